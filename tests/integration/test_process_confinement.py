"""Local::Process's working directory and log stay inside the root while it starts.

The check (``launch_spec``) resolves both paths; the launcher then used them by name, so a
parent swapped for a symlink in between ran the service, and created its log, outside.
Now the engine opens both through the descriptor walk and the launcher gets descriptors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from converge.errors import PermanentFailure
from converge.resources.base import ResourceContext
from converge.resources.local import LocalProcess, process, procfs

MakeContext = Callable[..., ResourceContext]

# Writes a file in its working directory, then waits.
SERVICE = [sys.executable, "-c", "open('was-here', 'w').close()\nimport time; time.sleep(60)"]


@pytest.mark.parametrize(
    ("working_directory", "log_file"), [("work", "service.log"), (".", "work/service.log")]
)
async def test_a_parent_swapped_after_the_check_starts_nothing_outside(
    working_directory: str,
    log_file: str,
    root: Path,
    tmp_path: Path,
    make_context: MakeContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (root / "work").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    real_spec = process.launch_spec

    def checked_then_swapped(ctx: ResourceContext, props: Mapping[str, Any]) -> dict[str, Any]:
        spec = real_spec(ctx, props)
        (root / "work").rename(root / "moved-away")
        (root / "work").symlink_to(outside)
        return spec

    monkeypatch.setattr(process, "launch_spec", checked_then_swapped)
    ctx = make_context()
    props = {
        "command": SERVICE,
        "working_directory": working_directory,
        "log_file": log_file,
        "startup_check_secs": 0.05,
    }
    with pytest.raises(PermanentFailure, match=r"a symlink at .*/root/work would lead outside"):
        await LocalProcess().create(ctx, props)
    assert list(outside.iterdir()) == []
    assert procfs.find_marked(ctx.physical_name) == []
