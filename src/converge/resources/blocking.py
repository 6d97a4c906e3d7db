"""Blocking plugin work (files, /proc, SQLite) run on a thread, off the event loop.

``asyncio.to_thread`` behind a function that imports asyncio when first called: plugin
modules are imported for their schemas alone by ``converge validate``, on every run, and
asyncio costs more to import than the rest of a small template's validation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


async def in_thread(function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` on a worker thread (``asyncio.to_thread``)."""
    import asyncio

    return await asyncio.to_thread(function, *args, **kwargs)
