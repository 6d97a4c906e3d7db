"""The test world: a simulated reality for the built-in test types, changeable out of band.

This is NOT real infrastructure. ``OS::Heat::None``, ``TestResource``, ``Value``,
``RandomString`` and ``Dummy`` make nothing real; so that drift can be produced on purpose
(by tests, and by ``converge world`` for demos), each of them records what it "made" in a
small JSON file: ``{type: {physical id: {"properties": {...}}}}``. The file lives next to
the state file (``<state>.world.json``) and is named to plugins by the setting
``test_world``; several processes share it (``converge world`` changes it while
``converge serve`` runs), so every change holds an exclusive lock and replaces the file
atomically. Without the setting the test types keep no reality: ``observe`` reports what
was applied, as a type with nothing to read would.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from converge.resources.base import AppliedState, ObserverContext, ResourceContext, ResourcePlugin

SETTING = "test_world"
Entities = dict[str, dict[str, dict[str, Any]]]  # type -> physical id -> entity


def world_path_for(state: str | os.PathLike[str]) -> Path:
    """Where the test world of a state file lives: beside it, ``<state>.world.json``."""
    path = Path(state).resolve()
    return path.with_name(path.name + ".world.json")


class TestWorld:
    """The test world in one JSON file; every call is one locked read or read-modify-write."""

    __test__ = False  # not a pytest class

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _read(self) -> Entities:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        data = json.loads(text) if text.strip() else {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: Entities) -> None:
        # Write a temporary file and rename it: a reader never sees half a file.
        fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(name, self.path)

    def change(self, edit: Callable[[Entities], Any]) -> Any:
        """Apply ``edit`` to the whole world under the lock and store the result."""
        with self._locked():
            data = self._read()
            result = edit(data)
            self._write(data)
            return result

    def snapshot(self) -> Entities:
        with self._locked():
            return self._read()

    # --- entity operations (blocking; plugins call them through asyncio.to_thread) -------

    def get(self, type_name: str, physical_id: str) -> dict[str, Any] | None:
        return self.snapshot().get(type_name, {}).get(physical_id)

    def put(self, type_name: str, physical_id: str, properties: Mapping[str, Any]) -> None:
        def edit(data: Entities) -> None:
            data.setdefault(type_name, {})[physical_id] = {"properties": dict(properties)}

        self.change(edit)

    def remove(self, type_name: str, physical_id: str) -> bool:
        """Delete an entity; False when it was not there."""

        def edit(data: Entities) -> bool:
            return data.get(type_name, {}).pop(physical_id, None) is not None

        return bool(self.change(edit))

    def set_property(self, type_name: str, physical_id: str, name: str, value: Any) -> None:
        """Change one property out of band; ``KeyError`` naming what does not exist."""

        def edit(data: Entities) -> None:
            entity = data.get(type_name, {}).get(physical_id)
            if entity is None:
                raise KeyError(f"the test world has no {type_name} {physical_id!r}")
            entity.setdefault("properties", {})[name] = value

        self.change(edit)

    def all_of(self, type_name: str) -> dict[str, dict[str, Any]]:
        return self.snapshot().get(type_name, {})


def world_from(settings: Mapping[str, Any]) -> TestWorld | None:
    path = settings.get(SETTING)
    return TestWorld(path) if path else None


class WorldBacked(ResourcePlugin):
    """A built-in test type whose reality is its entry in the test world.

    ``ignored_properties`` are knobs that steer the simulation (waits, failure switches):
    not part of the thing made, so not part of its essence.
    """

    ignored_properties: ClassVar[frozenset[str]] = frozenset()

    async def _record(
        self, ctx: ResourceContext, physical_id: str | None, properties: Mapping[str, Any]
    ) -> None:
        world = world_from(ctx.settings)
        if world is not None and physical_id is not None:
            await asyncio.to_thread(world.put, self.type_name, physical_id, properties)

    async def _forget(self, ctx: ResourceContext, physical_id: str | None) -> None:
        world = world_from(ctx.settings)
        if world is not None and physical_id is not None:
            await asyncio.to_thread(world.remove, self.type_name, physical_id)

    async def _find(self, ctx: ResourceContext, physical_id: str) -> dict[str, Any] | None:
        """What a previous, interrupted create left under this id (to adopt it)."""
        world = world_from(ctx.settings)
        if world is None:
            return None
        return await asyncio.to_thread(world.get, self.type_name, physical_id)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        world = world_from(ctx.settings)
        if world is None:
            return dict(current.properties)
        entity = await asyncio.to_thread(world.get, self.type_name, current.physical_id or "")
        return None if entity is None else dict(entity.get("properties") or {})

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        world = world_from(ctx.settings)
        if world is None:
            return {}
        entities = await asyncio.to_thread(world.all_of, self.type_name)
        return {pid: dict(entity.get("properties") or {}) for pid, entity in entities.items()}

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        """The properties of the thing, without the simulation's knobs (pure)."""
        known = None if self.open_properties else self.properties_schema
        return {
            name: value
            for name, value in live.items()
            if name not in self.ignored_properties and (known is None or name in known)
        }
