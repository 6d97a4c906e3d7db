"""inotify pushes edits, mode changes and deletions of managed paths within a second."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

from converge.resources.base import AppliedState
from converge.resources.local.watch import PathWatcher


async def next_change(changes: AsyncIterator[str]) -> str:
    return await asyncio.wait_for(anext(changes), 1.0)


async def until(changes: AsyncIterator[str], wanted: str) -> None:
    """Each step is pushed within a second (a write makes several events: skip repeats)."""
    while await next_change(changes) != wanted:
        pass


async def test_edits_deletions_and_recreations_are_pushed(root: Path) -> None:
    site = root / "site"
    site.mkdir()
    page = site / "index.html"
    page.write_text("v1")
    managed = {str(page): AppliedState(str(page), {}), str(site): AppliedState(str(site), {})}
    changes = PathWatcher(managed).changes()
    try:
        pending = asyncio.ensure_future(next_change(changes))
        await asyncio.sleep(0.05)
        page.write_text("edited")
        assert await pending == str(page)
        os.chmod(site, 0o700)
        await until(changes, str(site))
        shutil.rmtree(site)
        seen = set()
        while {str(page), str(site)} - seen:
            seen.add(await next_change(changes))
        site.mkdir()  # the parent comes back: the watch is re-armed on it
        await until(changes, str(site))
        await asyncio.sleep(0.05)
        page.write_text("back")
        await until(changes, str(page))
    finally:
        await changes.aclose()
