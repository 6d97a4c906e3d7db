"""A TCP proxy that can drop every connection through it and refuse new ones, as a broker
or database going away does; and a thread to run it beside synchronous tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class FlakyLink:
    """A TCP proxy to ``target`` that can drop every connection and refuse new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._writers):
            writer.transport.abort()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        pipes: list[asyncio.Task[None]] = []
        try:
            upstream_reader, upstream = await asyncio.open_connection(*self._target)
            self._writers.add(upstream)
            pipes = [
                asyncio.ensure_future(self._pipe(reader, upstream)),
                asyncio.ensure_future(self._pipe(upstream_reader, writer)),
            ]
            self._pipes.update(pipes)
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._pipes.difference_update(pipes)
            for side in (writer, upstream):
                if side is not None:
                    self._writers.discard(side)
                    side.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.transport.abort()


class ThreadedLink:
    """A ``FlakyLink`` on an event loop of its own thread, driven from synchronous code."""

    def __init__(self, link: FlakyLink, loop: asyncio.AbstractEventLoop) -> None:
        self.link = link
        self._loop = loop

    @property
    def port(self) -> int:
        return self.link.port

    def up(self) -> None:
        asyncio.run_coroutine_threadsafe(self.link.up(), self._loop).result(10)

    def down(self) -> None:
        asyncio.run_coroutine_threadsafe(self.link.down(), self._loop).result(10)


@contextmanager
def threaded_link(target: tuple[str, int]) -> Iterator[ThreadedLink]:
    """A proxy to ``target``, up, for the block; down and its thread ended after it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="flaky-link", daemon=True)
    thread.start()
    link = ThreadedLink(FlakyLink(target), loop)
    try:
        link.up()
        yield link
    finally:
        try:
            link.down()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
