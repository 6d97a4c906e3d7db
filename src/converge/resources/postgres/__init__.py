"""Resource types whose reality is a PostgreSQL server: roles and databases.

The classes are imported on first use (the registry names them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge.resources.postgres.database import PostgresDatabase
    from converge.resources.postgres.role import PostgresRole

_MODULES = {"PostgresDatabase": "database", "PostgresRole": "role"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PostgresDatabase", "PostgresRole"]
