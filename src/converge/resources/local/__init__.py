"""Resource types whose reality is this machine: directories, files and processes."""

from __future__ import annotations

from converge.resources.base import ResourcePlugin
from converge.resources.local.directory import LocalDirectory
from converge.resources.local.file import LocalFile
from converge.resources.local.process import LocalProcess

LOCAL_TYPES: tuple[type[ResourcePlugin], ...] = (LocalDirectory, LocalFile, LocalProcess)

__all__ = ["LOCAL_TYPES", "LocalDirectory", "LocalFile", "LocalProcess"]
