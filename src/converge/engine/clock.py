"""The wall clock the engine uses for deadlines and sleeping (injected; tests may swap it)."""

from __future__ import annotations

import asyncio
import time


class SystemClock:
    """Wall-clock seconds: deadlines are stored in the database and shared by processes."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
