"""The level-triggered safety net: a lost message cannot leave a stack IN_PROGRESS forever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore, sqlite_url
from converge.api import Converge
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry
from support.world import Reality

CHAIN = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
  c: {type: Test::Thing, depends_on: b}
"""


class LossyBus(LocalBus):
    """Drops every other work message, as a broker might lose them."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.dropped = 0

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.sent += 1
        if self.sent % 2 == 1:
            self.dropped += 1
            return
        await super().send_work(message)


async def test_lost_messages_are_resent(
    tmp_path: Path, registry: PluginRegistry, reality: Reality
) -> None:
    store = SqlStore.open(sqlite_url(tmp_path / "s.db"))
    bus = LossyBus()
    engine = Engine(store, bus, registry=registry, settings=EngineSettings(sweep_interval=0.05))
    await engine.start()
    try:
        cv = Converge(engine)
        stack = await cv.create_stack("lossy", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert bus.dropped >= 2
        assert [name for _, name, _ in reality.log] == ["a", "b", "c"]
    finally:
        await engine.stop()
        await store.close()


async def test_checking_a_resource_twice_is_harmless(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("twice", CHAIN, wait=False)
    await cv.wait("twice")
    # re-deliver a check for the finished traversal: dropped, nothing made again
    await cv.engine.sweep()
    await cv.engine.sweep()
    assert len(reality.actions("create")) == 3
