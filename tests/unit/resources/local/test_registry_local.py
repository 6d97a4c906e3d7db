"""The Local types are in the default registry unless a deployment turns them off."""

from __future__ import annotations

from converge.engine.settings import EngineSettings
from converge.resources.registry import default_registry

LOCAL = {"Local::Directory", "Local::File", "Local::Process"}


def test_local_types_are_on_by_default_and_can_be_turned_off() -> None:
    assert set(default_registry().type_names()) >= LOCAL | {
        "PostgreSQL::Role",
        "PostgreSQL::Database",
    }
    off = default_registry(enable_local_types=False)
    assert not LOCAL & set(off.type_names())
    assert "PostgreSQL::Role" in off
    assert EngineSettings().enable_local_types is True
