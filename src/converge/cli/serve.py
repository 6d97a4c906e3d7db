"""``converge serve``: the long-running roles of one process, and its worker processes.

``--roles`` chooses what this process does (``engine``: the sweeper that re-sends lost
work and times out operations, and the takeover of dead processes' claims; ``worker``:
checking resources from the work queue; ``observer``: the synchronizer and drift
handling, heals included). ``--workers N`` hands the worker role to N child processes
(``converge.cli.worker_pool``). Several ``serve`` processes, on one machine or many,
share the work through one database (``--state postgresql://…``) and one broker
(``--broker amqp://…``); without a broker there is one process and it does everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import signal

import click

from converge.cli.api_server import api_options, api_server
from converge.cli.boundary import EXIT_OK, Session, run_command
from converge.cli.inputs import embedded_settings
from converge.cli.stack_commands import common_options
from converge.cli.target import (
    ALL_ROLES,
    Broker,
    current_broker,
    open_state,
    require_broker,
    shown_state,
)
from converge.cli.worker_pool import WorkerPool
from converge.engine.settings import EngineSettings

# Settings a worker process must not take from serve's environment.
_NOT_FOR_WORKERS = ("CONVERGE_API",)


def _parse_roles(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    named = {role.strip() for role in value.split(",") if role.strip()}
    unknown = named - set(ALL_ROLES)
    if unknown or not named:
        raise click.BadParameter(
            f"{', '.join(sorted(unknown)) or 'no role'}: choose from {','.join(ALL_ROLES)}",
            ctx=ctx,
            param=param,
        )
    return tuple(role for role in ALL_ROLES if role in named)


@click.command()
@click.option(
    "--roles",
    default=",".join(ALL_ROLES),
    show_default=True,
    callback=_parse_roles,
    metavar="ROLE,...",
    help="What this process does: engine (sweeps lost work, times operations out), worker "
    "(checks resources from the work queue), observer (watches reality, handles drift).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Run the worker role in N child processes instead of this one, restarted when "
    "they die (needs --broker).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Resource checks a worker process runs at once "
    f"(default {EngineSettings().max_concurrent_checks}: most checks wait on I/O).",
)
@click.option(
    "--prefetch",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Work messages a worker process takes from the broker at once (default: as many "
    "as it runs at once, --concurrency).",
)
@click.option("--parent-pid", type=int, hidden=True)
@click.option(
    "--recheck",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How often drift seen while a stack was busy, and heals that had to wait, are "
    "looked at again.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Seconds between full samples of each resource type (default: the settings').",
)
@api_options
@common_options
def serve(
    roles: tuple[str, ...],
    workers: int,
    concurrency: int | None,
    prefetch: int | None,
    parent_pid: int | None,
    recheck: float,
    interval: float | None,
    api: str | None,
    noauth: bool,
    local_types: bool,
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Run the engine, workers and the synchronizer until SIGINT or SIGTERM.

    Every stack's drift is handled by its policy: notify records it (see `converge
    drift`), heal converges it back, ignore does nothing. With ``--api HOST:PORT`` it also
    serves Heat's REST API (python-heatclient, `openstack stack`) and converge's routes.
    """
    broker = current_broker()
    if workers and broker is None:
        raise click.UsageError(
            "--workers needs --broker (or CONVERGE_BROKER): worker processes get their work "
            "from the broker"
        )
    own_roles = tuple(role for role in roles if not (workers and role == "worker"))
    if broker is None and "worker" not in own_roles:
        raise click.UsageError(
            "without --broker the work goes to this process alone: --roles must include worker"
        )
    if noauth and api is None:
        raise click.UsageError("--noauth needs --api HOST:PORT")

    async def body(session: Session) -> int:
        _collect_less_often()
        settings = dataclasses.replace(embedded_settings(state), drift_recheck_interval=recheck)
        if interval is not None:
            settings = dataclasses.replace(settings, observe_interval=interval)
        if concurrency is not None:
            settings = dataclasses.replace(settings, max_concurrent_checks=concurrency)
        if prefetch is not None:
            settings = dataclasses.replace(settings, work_prefetch=prefetch)
        if api is not None and not local_types:
            # Templates from the network must not touch this machine's files and processes.
            settings = dataclasses.replace(settings, enable_local_types=False)
        session.interrupt_message = "converge serve stopped"
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        rescues: int | None = None
        try:
            async with contextlib.AsyncExitStack() as running:
                cv = None
                if own_roles or api is not None:
                    cv = await running.enter_async_context(
                        open_state(state, settings, roles=own_roles, broker=broker)
                    )
                if broker is not None:  # an engine only sends, and workers would only retry
                    await require_broker(cv, broker)
                if cv is not None:
                    if "observer" in own_roles:
                        await running.enter_async_context(cv.serving())
                    await running.enter_async_context(api_server(cv, api, noauth=noauth))
                if workers:
                    assert broker is not None  # refused above
                    pool = WorkerPool(
                        workers,
                        _worker_environment(state, broker),
                        worker_options(
                            concurrency=concurrency,
                            prefetch=prefetch,
                            debug=debug,
                            log_json=log_json,
                        ),
                    )
                    running.push_async_callback(pool.stop)
                    await pool.start()
                _freeze_startup_objects()
                click.echo(_started(state, broker, own_roles, workers), err=True)
                while not stop.is_set():  # or until the state fails (damaged, full)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=1.0)
                    if cv is not None:
                        cv.raise_if_state_failed()
                    if parent_pid is not None and os.getppid() != parent_pid:
                        click.echo("converge serve: the serve that started it is gone", err=True)
                        break
                if cv is not None and "engine" in own_roles:
                    rescues = cv.engine.sweeper_rescues
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        if rescues is not None:
            # Lost triggers the sweeper had to push on: zero in a healthy run.
            click.echo(f"converge serve: sweeper rescues: {rescues}", err=True)
        click.echo("converge serve stopped", err=True)
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


# Allocations between two young-generation collections (CPython's default is 700).
YOUNG_COLLECTION_EVERY = 20_000


def _collect_less_often() -> None:
    """Collect the young generation every ``YOUNG_COLLECTION_EVERY`` allocations, not 700.

    A worker's checks make and drop thousands of short-lived objects (rows, records,
    messages), nearly all freed by their reference counts: the collections found next to
    no garbage and, promoting what was in flight, led to full collections of 30-60 ms in
    the middle of a burst of finishes. A/B in alternate runs (bench_distributed, same
    minutes): 10,000 None on 2 workers 6.8 and 7.9 s against 9.5 and 9.7 s; a chain of
    1,000 2.4 and 2.5 ms per link against 3.5 and 3.2; time collecting per worker process
    halved. What cycles there are wait a little longer to be freed.
    """
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)


def _freeze_startup_objects() -> None:
    """Leave what startup made (modules, plugins, the API's routes) out of every later
    garbage collection. A listing of a big stack makes thousands of objects that live
    through the request and reach the oldest generation, so full collections came every
    few requests, each walking everything made at startup: in `converge api` that took
    more CPU than the listings themselves (bench/bench_rest.py)."""
    gc.collect()  # what is garbage now must not be kept forever
    gc.freeze()


def worker_options(
    *, concurrency: int | None, prefetch: int | None, debug: bool, log_json: bool
) -> list[str]:
    """The options of serve that its worker processes run with too."""
    return [
        *(["--concurrency", str(concurrency)] if concurrency is not None else []),
        *(["--prefetch", str(prefetch)] if prefetch is not None else []),
        *(["--debug"] if debug else []),
        *(["--log-json"] if log_json else []),
    ]


def _worker_environment(state: str, broker: Broker) -> dict[str, str]:
    """serve's environment for its workers, with its own state and broker (passwords stay
    out of command lines) and without what only serve itself should act on."""
    environment = {k: v for k, v in os.environ.items() if k not in _NOT_FOR_WORKERS}
    environment.update(
        CONVERGE_STATE=state,
        CONVERGE_BROKER=broker.url,
        CONVERGE_BROKER_NAMESPACE=broker.namespace,
    )
    return environment


def _started(state: str, broker: Broker | None, roles: tuple[str, ...], workers: int) -> str:
    if broker is None:
        return f"converge serve: watching the stacks in {shown_state(state)}"
    parts = [f"roles {','.join(roles)}"] if roles else []
    if workers:
        parts.append(f"{workers} worker process{'es' if workers > 1 else ''}")
    return (
        f"converge serve: {' and '.join(parts)} over {shown_state(state)}, broker {broker.shown()}"
    )
