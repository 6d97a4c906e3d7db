"""Benchmark: the engine on PostgreSQL side by side with the embedded SQLite file.

A create of ``N`` ``OS::Heat::None`` (default 1,000) as a chain (r_i ``depends_on``
r_i-1: every link waits for the one before, so this measures the latency of one check)
and independent (throughput), on three stores in one run, interleaved so that the load
of this shared machine weighs on each alike:

- the SQLite state file of the embedded mode (``synchronous=NORMAL``: a commit is not
  flushed to disk, a power loss may lose the last ones);
- PostgreSQL as configured (``synchronous_commit=on``: every commit waits for its WAL
  flush, which this machine's disk takes milliseconds to do);
- PostgreSQL with ``options=-csynchronous_commit=off`` in the URL: commits are not waited
  for, as SQLite's; a server crash may lose the last fraction of a second of them.

Each figure is the median of ``--repeat`` runs (the range is shown), each on a fresh
database (made and dropped here) and a fresh engine. CPU is this process's (engine,
worker, store threads) and, for PostgreSQL, the server processes serving that database
(read from /proc; WAL writer and checkpointer not counted). ``durable commit ms`` is how long
one single-row commit takes on the server right before each run: a chain link commits
twice (its claim and its finish), so with ``synchronous_commit=on`` twice that is its
floor.
Run: ``python bench/bench_postgres.py [--server URL] [--n 1000] [--repeat 3] [--no-write]
[--section KEY --title TEXT]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

import converge
from _report import provenance, write_section
from bench_engine import NONE, converge_in, make_template
from converge.api import Converge

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
SHAPES = ("chain", "independent")
TARGET_MS_PER_LINK = 2.0
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    seconds: float
    cpu: float
    server_cpu: float | None
    status: str
    commit_ms: float | None = None  # a durable commit on the server just before the run


def backends(server: str) -> list[tuple[str, str | None]]:
    asynchronous = server + ("&" if "?" in server else "?") + "options=-csynchronous_commit%3Doff"
    return [
        ("SQLite file", None),
        ("PostgreSQL", server),
        ("PostgreSQL, synchronous_commit=off", asynchronous),
    ]


def server_ticks(database: str) -> dict[int, int]:
    """CPU clock ticks of each server process serving ``database`` (its backends)."""
    ticks = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                words = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            if not words.startswith("postgres: ") or f" {database} " not in words:
                continue
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks[int(entry.name)] = int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            continue  # ended while read
    return ticks


def commit_ms(server: str) -> float:
    """One durable single-row commit on the server, in ms (median of 200)."""
    with psycopg.connect(server.partition("?")[0], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (a int)")
        times = []
        for _ in range(200):
            started = time.perf_counter()
            conn.execute("INSERT INTO bench_commit_probe VALUES (1)")
            times.append(time.perf_counter() - started)
        conn.execute("DROP TABLE bench_commit_probe")
    return statistics.median(times) * 1000


async def create_once(shape: str, n: int, database: str | None) -> Run:
    text = make_template(shape, n, NONE, {})
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        async with converge_in(tmp, database) as cv:
            name = _database_name(cv) if database else None
            before = server_ticks(name) if name else {}
            cpu, started = time.process_time(), time.perf_counter()
            view = await cv.create_stack("s", text)
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu
            after = server_ticks(name) if name else {}
            count = len(await cv.list_resources("s"))
    status = view.stack_status + ("" if count == n else f", {count} of {n} resources")
    server_cpu = (
        sum(t - before.get(pid, 0) for pid, t in after.items()) / TICK if database else None
    )
    return Run(seconds, cpu, server_cpu, status)


def _database_name(cv: Converge) -> str:
    store = cv.engine.ctx.store
    return str(make_url(store.url).database)  # type: ignore[attr-defined]


async def run_all(server: str, n: int, repeat: int) -> dict[tuple[str, str], list[Run]]:
    runs: dict[tuple[str, str], list[Run]] = {}
    for round_ in range(repeat):
        for shape in SHAPES:
            for label, database in backends(server):
                probe = commit_ms(server) if database else None
                run = await create_once(shape, n, database)
                run.commit_ms = probe
                runs.setdefault((shape, label), []).append(run)
                server_cpu = "" if run.server_cpu is None else f" + server {run.server_cpu:.2f}"
                commit = "" if probe is None else f", durable commit {probe:.2f} ms"
                print(
                    f"  {round_ + 1}/{repeat} {shape:11} {label:36} {run.seconds:7.3f} s "
                    f"(cpu {run.cpu:.2f}{server_cpu} s{commit}) {run.status}",
                    flush=True,
                )
    return runs


def render(runs: dict[tuple[str, str], list[Run]], n: int) -> list[str]:
    lines = [
        "| shape | store | seconds (median, range) | ms per resource | CPU s (engine) "
        "| CPU s (server) | durable commit ms | status | target |",
        "|---|---|--:|--:|--:|--:|--:|---|---|",
    ]
    for (shape, label), done in runs.items():
        seconds = statistics.median(r.seconds for r in done)
        cpu = statistics.median(r.cpu for r in done)
        server = [r.server_cpu for r in done if r.server_cpu is not None]
        per = seconds / n * 1000
        target = ""
        if shape == "chain" and label.startswith("PostgreSQL"):
            met = "met" if per < TARGET_MS_PER_LINK else "**missed**"
            target = f"< {TARGET_MS_PER_LINK:g} ms/link {met}"
        statuses = ", ".join(sorted({r.status for r in done}))
        low, high = min(r.seconds for r in done), max(r.seconds for r in done)
        server_cpu = f"{statistics.median(server):.2f}" if server else ""
        probes = [r.commit_ms for r in done if r.commit_ms is not None]
        commit = f"{statistics.median(probes):.2f}" if probes else ""
        lines.append(
            f"| {shape} | {label} | {seconds:.3f} ({low:.2f} to {high:.2f}) | {per:.2f} "
            f"| {cpu:.2f} | {server_cpu} | {commit} | {statuses} | {target} |"
        )
    return [
        *lines,
        "",
        f"N = {n:,} `OS::Heat::None`, median of {len(next(iter(runs.values())))} runs each. "
        "Durable commit: one single-row commit on the server just before each PostgreSQL "
        "run (median of 200; the row's median), which is how long this machine's disk "
        "takes to flush the WAL at that moment: it varies from 0.2 to 4 ms with the other "
        "work on the machine. A chain link commits twice (its claim, then its finish with "
        "the report), so with `synchronous_commit=on` (the default) a link cannot take "
        "less than two of them.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", default=SERVER, help=f"PostgreSQL server (default {SERVER})")
    parser.add_argument("--n", type=int, default=1000, help="resources per stack (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument(
        "--section",
        default="bench_postgres",
        help="the docs/benchmarks.md section to write (another one keeps, say, the figures "
        "of an older commit run with PYTHONPATH=its/src beside these)",
    )
    parser.add_argument("--title", default="Engine on PostgreSQL beside SQLite")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    runs = asyncio.run(run_all(args.server, args.n, args.repeat))
    table = render(runs, args.n)
    print()
    print("\n".join(table))
    if args.no_write:
        return
    write_section(
        args.section,
        [
            f"## {args.title} (`bench/bench_postgres.py`)",
            "",
            *table,
            "",
            f"- load average at the start: {load:.1f} (2 cores, shared with other work)",
            *provenance(),
            f"- converge imported from: `{Path(converge.__file__).parent.parent}`",
        ],
    )


if __name__ == "__main__":
    main()
