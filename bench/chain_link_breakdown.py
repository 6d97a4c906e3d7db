"""Where one link of a chain spends its time in the distributed mode's adapters.

Creates a chain of ``--n`` (1,000) ``OS::Heat::None`` with the engine and the worker in
this one process over PostgreSQL and RabbitMQ (a fresh database and broker namespace,
dropped after), with timers around the store's and the bus's calls on a check's path:
``load_for_check`` (one SELECT), the claim (``update_resource``, one commit), the finish
(``finish_node``, one commit), the publication of the next check (a persistent message,
confirmed) and the time from publishing a check to a consumer receiving it. Printed:
each step's mean and its total per link, beside the wall time per link.

``--no-continuation`` sends every link through the broker
(``EngineSettings.continue_locally=False``); by default a worker continues the chain
itself. One process only: the 2-worker deployment adds a wake-up of another process per
link without continuation (``bench_distributed.py --chain`` measures that).

Run: ``python bench/chain_link_breakdown.py [--n 1000] [--no-continuation] [--server URL]
[--broker URL]``. Prints only; docs/benchmarks.md quotes it by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from bench_distributed import BROKER, SERVER, delete_namespace
from bench_engine import NONE, make_template


class Timers:
    """Total seconds and calls per step."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter[str] = collections.Counter()

    def wrap(self, owner: Any, name: str, label: str) -> None:
        call: Callable[..., Awaitable[Any]] = getattr(owner, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await call(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started
                self.calls[label] += 1

        setattr(owner, name, timed)


async def breakdown(n: int, continuation: bool, server: str, broker: str) -> None:
    from converge.api import Converge
    from converge.engine.settings import EngineSettings

    database = f"converge_links_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    try:
        async with Converge.open(
            f"{server.rsplit('/', 1)[0]}/{database}",
            broker_url=broker,
            broker_namespace=database,
            settings=EngineSettings(continue_locally=continuation),
        ) as cv:
            ctx = cv.engine.ctx
            timers = Timers()
            timers.wrap(ctx.store, "load_for_check", "load_for_check (SELECT)")
            timers.wrap(ctx.store, "update_resource", "claim (update_resource, commit)")
            timers.wrap(ctx.store, "finish_node", "finish_node (commit)")
            timers.wrap(ctx.bus, "send_work", "publish with confirm")
            published: dict[int, float] = {}
            to_delivery: list[float] = []
            send = ctx.bus.send_work

            async def stamped(message: dict[str, Any], **kwargs: Any) -> None:
                published[message["resource_id"]] = time.perf_counter()
                await send(message, **kwargs)

            ctx.bus.send_work = stamped  # type: ignore[method-assign]
            deliver = cv.engine._on_work

            def received(data: dict[str, Any]) -> asyncio.Future[None]:
                sent = published.pop(data["resource_id"], None)
                if sent is not None:
                    to_delivery.append(time.perf_counter() - sent)
                return deliver(data)

            ctx.bus._handler = received  # type: ignore[attr-defined]
            started = time.perf_counter()
            view = await cv.create_stack("chain", make_template("chain", n, NONE, {}))
            wall = time.perf_counter() - started
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await delete_namespace(broker, database)
    load = os.getloadavg()[0]
    mode = "continuation on" if continuation else "continuation off"
    print(f"{n:,} links, {mode}, load {load:.1f}: {view.stack_status}")
    print(f"  whole link (wall / N){'':21} {wall / n * 1000:6.2f} ms")
    for label, seconds in timers.seconds.items():
        calls = timers.calls[label]
        print(
            f"  {label:42} {seconds / calls * 1000:6.2f} ms mean, {calls:5} calls, "
            f"{seconds / n * 1000:6.2f} ms per link"
        )
    if to_delivery:
        to_delivery.sort()
        print(
            f"  {'publish to delivery':42} {to_delivery[len(to_delivery) // 2] * 1000:6.2f} ms "
            f"median, {len(to_delivery):5} messages"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="chain length (1000)")
    parser.add_argument(
        "--continuation",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="workers continue a chain themselves (default) or send every link",
    )
    parser.add_argument("--server", default=SERVER, help=f"PostgreSQL server (default {SERVER})")
    parser.add_argument("--broker", default=BROKER, help="RabbitMQ (default the local guest)")
    args = parser.parse_args()
    asyncio.run(breakdown(args.n, args.continuation, args.server, args.broker))


if __name__ == "__main__":
    main()
