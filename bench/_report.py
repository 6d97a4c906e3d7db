"""Where benchmark figures go: a marked section of docs/benchmarks.md, with machine and commit."""

from __future__ import annotations

import datetime
import os
import platform
import re
import resource
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"


def git_head() -> str:
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


def provenance() -> list[str]:
    """Markdown bullets saying where and when the figures were taken."""
    return [
        f"- machine: `{' '.join(platform.uname())}`, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- commit: {git_head()} (plus any uncommitted changes in the working tree)",
    ]


def write_section(key: str, lines: list[str], doc: Path = DOC) -> None:
    """Replace the section marked ``key`` in ``doc`` (or append it) with ``lines``."""
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    section = "\n".join([begin, *lines, end])
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _match: section, text)
    else:
        text = text.rstrip() + "\n\n" + section
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text.rstrip() + "\n")


def peak_rss_kb() -> int:
    """This process's peak resident set, in KiB.

    Linux's ``VmHWM`` belongs to this program's own address space. ``ru_maxrss`` is not
    used: it keeps the peak of the process before ``exec``, so a child started by a
    benchmark that already holds hundreds of MB would report the parent's figure.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
