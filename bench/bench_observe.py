"""Benchmark: the synchronizer's latency and the cost of comparing a large snapshot.

Measures (1) the time from an out-of-band change to its notification for a pushing type
(``watch``; target under 1 s) and for a polled type (target within the interval plus 10 %),
and (2) one full pass over a type of 100,000 entities against its baseline, 1 % of them
changed (target under 2 s, peak memory under 300 MB). Figures go to docs/benchmarks.md.
Run: ``python bench/bench_observe.py [--entities N] [--database-url URL] [--no-record]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from _report import peak_rss_kb
from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore
from converge.core.states import Action, Status
from converge.engine.clock import SystemClock
from converge.engine.settings import EngineSettings
from converge.observe import Synchronizer
from converge.records import NewResource
from converge.resources.base import (
    AppliedState,
    ObserverContext,
    Outcome,
    ResourceContext,
    ResourcePlugin,
)
from converge.resources.registry import PluginRegistry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench_observe:begin -->", "<!-- bench_observe:end -->"

REALITY: dict[str, dict[str, Any]] = {}
HINTS: asyncio.Queue[str] | None = None


class Listed(ResourcePlugin):
    """Reality is REALITY: listed whole; ``mtime`` is volatile."""

    type_name = "Bench::Listed"
    open_properties = True

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        return None

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        return REALITY.get(current.physical_id or "")

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        return {key: value for key, value in live.items() if key != "mtime"}

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        return REALITY


class Polled(Listed):
    type_name = "Bench::Polled"

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        return {pid: REALITY[pid] for pid in ("p-1", "p-2") if pid in REALITY}


class Pushed(Listed):
    """Observed one by one; ``watch`` pushes a hint per change."""

    type_name = "Bench::Pushed"
    list_all = None  # type: ignore[assignment]  # observe only: no snapshot

    async def watch(
        self, ctx: ObserverContext, managed: Mapping[str, AppliedState]
    ) -> AsyncIterator[str]:
        assert HINTS is not None
        while True:
            yield await HINTS.get()


def registry(*plugins: type[ResourcePlugin]) -> PluginRegistry:
    result = PluginRegistry()
    for plugin in plugins:
        result.register(plugin)
    return result


async def add_stack(store: SqlStore, type_name: str, physical_id: str) -> None:
    stack = await store.create_stack(
        f"bench-{physical_id}",
        "p",
        action=Action.CREATE,
        disable_rollback=True,
        timeout_mins=None,
        drift_policy="notify",
    )
    await store.start_traversal(
        stack.id, stack.atomic_key, [NewResource("r", type_name)], lambda rows: ({}, {})
    )
    [row] = await store.list_resources(stack.id)
    changes = {
        "physical_resource_id": physical_id,
        "action": Action.CREATE,
        "status": Status.COMPLETE,
    }
    await store.update_resource(row.id, row.atomic_key, changes)


async def latency(url: str, *, pushing: bool, interval: float, rounds: int) -> list[float]:
    """Seconds from changing reality to receiving the notification, per round."""
    global HINTS
    HINTS = asyncio.Queue()
    REALITY.clear()
    REALITY.update({"p-1": {"v": 0}, "p-2": {"v": 0}})
    store = SqlStore.open(url)
    plugin = Pushed if pushing else Polled
    if pushing:
        await add_stack(store, plugin.type_name, "p-1")
    settings = EngineSettings(observe_interval=interval, observe_timeout=5.0)
    sync = Synchronizer(store, LocalBus(), registry(plugin), SystemClock(), settings)
    delays: list[float] = []
    try:
        async with sync.subscribe(plugin.type_name) as subscription:
            await sync.start()
            await anext(subscription)  # the first pass: p-1 appeared
            if not pushing:
                await anext(subscription)
            for round_ in range(1, rounds + 1):
                # change at a random moment of the polling cycle
                await asyncio.sleep((round_ * 0.37 % 1.0) * interval)
                REALITY["p-1"] = {"v": round_}
                changed = time.perf_counter()
                if pushing:
                    HINTS.put_nowait("p-1")
                note = await asyncio.wait_for(anext(subscription), interval * 3 + 5)
                delays.append(time.perf_counter() - changed)
                assert note.essence == {"v": round_}, note
    finally:
        await sync.stop()
        await store.close()
    return delays


def make_reality(count: int, *, changed: bool) -> None:
    REALITY.clear()
    REALITY.update(
        {
            f"entity-{i:06d}": {"size": i, "mode": "0644", "owner": "app", "mtime": i}
            for i in range(count)
        }
    )
    if changed:
        for i in range(0, count, 100):
            REALITY[f"entity-{i:06d}"] = {"size": -i, "mode": "0600", "owner": "app", "mtime": 0}
        for i in range(1, count, 7):
            REALITY[f"entity-{i:06d}"]["mtime"] = -1  # volatile only: not a change


async def populate(url: str, count: int) -> float:
    """A pass over the original reality: on an empty baseline, every entity appears."""
    make_reality(count, changed=False)
    store = SqlStore.open(url)
    sync = Synchronizer(store, LocalBus(), registry(Listed), SystemClock(), EngineSettings())
    try:
        start = time.perf_counter()
        await sync.sample_once(Listed.type_name)
        elapsed = time.perf_counter() - start
        assert len((await sync.get_all(Listed.type_name)).entities) == count
        return elapsed
    finally:
        await sync.stop()
        await store.close()


async def compare_pass(url: str, count: int, traced: bool) -> dict[str, float]:
    """A full pass against the baseline with 1 % changed, then one with nothing changed."""
    make_reality(count, changed=True)
    store = SqlStore.open(url)
    sync = Synchronizer(store, LocalBus(), registry(Listed), SystemClock(), EngineSettings())
    figures: dict[str, float] = {}
    try:
        if traced:
            tracemalloc.start()
        start = time.perf_counter()
        changed = await sync.sample_once(Listed.type_name)
        figures["compare with baseline, 1 % changed"] = time.perf_counter() - start
        if traced:
            figures["traced"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        assert len(changed) == len(range(0, count, 100)), len(changed)
        start = time.perf_counter()
        assert await sync.sample_once(Listed.type_name) == []
        figures["compare with baseline, nothing changed"] = time.perf_counter() - start
    finally:
        await sync.stop()
        await store.close()
    figures["rss"] = peak_rss_kb() / 1024
    return figures


def compare_in_child(url: str, count: int, traced: bool) -> dict[str, float]:
    """In a fresh process, so its peak RSS is the comparison's own (plus the interpreter)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_compare_sync, (url, count, traced))


def _compare_sync(url: str, count: int, traced: bool) -> dict[str, float]:
    return asyncio.run(compare_pass(url, count, traced))


def record(text: str) -> None:
    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    block = f"{BEGIN}\n{text}{END}"
    if BEGIN in doc:
        doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(doc)


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(no commit)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--interval", type=float, default=1.0, help="polled type's interval")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--database-url", help="default: a SQLite file in a temporary folder")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:

        def url(name: str) -> str:
            return args.database_url or f"sqlite:///{tmp}/{name}.db"

        pushed = asyncio.run(
            latency(url("pushed"), pushing=True, interval=60.0, rounds=args.rounds)
        )
        polled = asyncio.run(
            latency(url("polled"), pushing=False, interval=args.interval, rounds=args.rounds)
        )
        first = asyncio.run(populate(url("timed"), args.entities))
        timed = compare_in_child(url("timed"), args.entities, False)
        asyncio.run(populate(url("timed"), args.entities))  # back to the original reality
        traced = compare_in_child(url("timed"), args.entities, True)
    database = "PostgreSQL" if args.database_url else "SQLite"
    lines = [
        "## Synchronizer (`bench/bench_observe.py`)",
        "",
        f"Database: {database}. Latency from an out-of-band change to its notification, "
        f"{args.rounds} changes each:",
        "",
        "| type | median s | max s | target |",
        "|---|---|---|---|",
        f"| pushing (`watch`) | {statistics.median(pushed):.4f} | {max(pushed):.4f} | under 1 s |",
        f"| polled, interval {args.interval:g} s | {statistics.median(polled):.3f} | "
        f"{max(polled):.3f} | under {args.interval * 1.1:g} s |",
        "",
        f"One full pass over {args.entities} entities (list_all, essence, hash, compare with "
        "the baseline in one set-based read, write the changes):",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| first pass (the baseline: all appear) | {first:.3f} |",
        *(
            f"| {step} | {seconds:.3f} |"
            for step, seconds in timed.items()
            if step.startswith("compare")
        ),
        "",
        f"- peak memory of the comparison: {timed['rss']:.0f} MB RSS of a fresh process doing "
        f"only those two passes (interpreter, libraries and the plugin's {args.entities} "
        f"entities included); {traced['traced']:.0f} MB allocated by Python at peak during "
        "the 1 % pass (tracemalloc)",
        f"- machine: `{' '.join(platform.uname())}`, {os.cpu_count()} CPUs",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- commit: {commit()}",
        "- targets: comparison under 2 s, peak memory under 300 MB",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_record:
        record(text)


if __name__ == "__main__":
    main()
