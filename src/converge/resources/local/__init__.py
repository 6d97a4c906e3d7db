"""Resource types whose reality is this machine: directories, files and processes.

The classes are imported on first use (the registry names them), so loading one type
does not load the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge.resources.local.directory import LocalDirectory
    from converge.resources.local.file import LocalFile
    from converge.resources.local.process import LocalProcess

_MODULES = {"LocalDirectory": "directory", "LocalFile": "file", "LocalProcess": "process"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LocalDirectory", "LocalFile", "LocalProcess"]
