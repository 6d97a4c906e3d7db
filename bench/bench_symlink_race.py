"""Benchmark: does confinement hold while Local::File and Local::Directory act?

Runs rounds of the symlink-swap race (``tests/support/symlink_race.py``): a thread keeps
exchanging a directory inside the allowed root with a symlink to one outside while the
plugins create, update or delete 16 files and a ``purge_on_delete`` directory below it.
An escape is anything outside that was created, changed or deleted (target: 0). With
``--compare-with REV`` the same rounds also run against that git revision's ``src``, in a
child process, to show what the race does to code that checks once and acts by name.
Figures go to docs/benchmarks.md (section ``symlink-race``) unless ``--no-write``.
Run: ``python bench/bench_symlink_race.py [--rounds N] [--compare-with REV] [--no-write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from _report import ROOT, git_head, provenance, write_section

sys.path.insert(0, str(ROOT / "tests"))
from support.symlink_race import PHASES, race

FILES = 16


def measure(rounds: int) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for phase in PHASES:
        started = time.perf_counter()
        result = race(phase, rounds, FILES)
        figures[phase] = {
            "rounds": result.rounds,
            "actions": result.actions,
            "refused": result.refused,
            "swaps": result.swaps,
            "rounds_with_escapes": result.rounds_with_escapes,
            "escapes": len(result.escapes),
            "bugs": len(result.bugs),
            "seconds": time.perf_counter() - started,
        }
    return figures


def measure_revision(revision: str, rounds: int) -> dict[str, dict[str, float]]:
    """The same rounds against ``revision``'s package, in a child process."""
    archive = subprocess.run(
        ["git", "archive", revision, "src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="converge-old-src-") as old:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(old, filter="data")
        environment = {**os.environ, "PYTHONPATH": str(Path(old, "src"))}
        output = subprocess.run(
            [sys.executable, __file__, "--rounds", str(rounds), "--json"],
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    figures: dict[str, dict[str, float]] = json.loads(output)
    return figures


def rows(label: str, figures: dict[str, dict[str, float]]) -> list[str]:
    lines = []
    for phase, f in figures.items():
        lines.append(
            f"| {label} | {phase} | {f['rounds']:.0f} | {f['swaps']:.0f} | {f['actions']:.0f} "
            f"| {f['refused']:.0f} | {f['rounds_with_escapes']:.0f} | {f['escapes']:.0f} "
            f"| {f['bugs']:.0f} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--compare-with", metavar="REV", help="also run a git revision's src")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()
    figures = measure(args.rounds)
    if args.json:
        print(json.dumps(figures))
        return 0
    table = rows(f"this code ({git_head()})", figures)
    if args.compare_with:
        table += rows(
            f"before ({args.compare_with})", measure_revision(args.compare_with, args.rounds)
        )
    lines = [
        "## Symlink-swap race on local files (`bench/bench_symlink_race.py`)",
        "",
        "A thread exchanges a directory inside the allowed root with a symlink to one outside",
        "(`renameat2(RENAME_EXCHANGE)`, as fast as it can) while `Local::File` creates, updates",
        f"or deletes {FILES} files below it and `Local::Directory` makes or purges a",
        "`purge_on_delete` directory there. An escape is a file or directory outside the root",
        "that was created, changed (content, mode, extended attributes) or deleted; the target",
        "is 0. Refused: actions that met the symlink and failed with a clear error instead.",
        "Bugs: anything raised other than `PermanentFailure`. Swaps: exchanges made while the",
        "phase ran. The previous code's deletes refused nothing: one that met the symlink",
        "resolved the path outside, called it gone and reported success.",
        "",
        "| code | phase | rounds | swaps | actions | refused | rounds with escapes "
        "| escapes | bugs |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
        *table,
        "",
        *provenance(),
    ]
    print("\n".join(lines))
    if args.no_write:
        print("(not written to docs/benchmarks.md: --no-write)")
    else:
        write_section("symlink-race", lines)
    current_escapes = sum(f["escapes"] + f["bugs"] for f in figures.values())
    return 0 if current_escapes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
