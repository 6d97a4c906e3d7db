"""Broken templates and the exact messages (with lines) converge gives for each.

Each ``*.yaml`` file lists what it expects in ``# expect:`` comment lines; other files have
their expectations in ``<name>.expect``. Types come from the real plugin registry.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from converge.core.template import StackIdentity, load_template, prepare_stack
from converge.errors import TemplateError, TemplateErrors
from converge.resources.registry import default_registry

HERE = Path(__file__).parent
CASES = sorted(
    path for path in HERE.iterdir() if path.suffix in (".yaml", ".json") and path.is_file()
)


def expected(path: Path) -> list[str]:
    sidecar = path.with_suffix(".expect")
    if sidecar.exists():
        return sidecar.read_text().splitlines()
    prefix = "# expect: "
    return [
        line[len(prefix) :] for line in path.read_text().splitlines() if line.startswith(prefix)
    ]


@pytest.mark.parametrize("path", CASES, ids=[path.name for path in CASES])
def test_corpus(path: Path) -> None:
    wanted = expected(path)
    assert wanted, f"{path.name} states no expectation"
    with pytest.raises(TemplateError) as info:
        # strict: a repeated key is an error here (by default it is a warning, as in Heat)
        template = load_template(path.read_bytes(), path.name, strict=True)
        prepare_stack(
            template, identity=StackIdentity("corpus", "id", "project"), schemas=default_registry()
        )
    error = info.value
    errors = error.errors if isinstance(error, TemplateErrors) else [error]
    assert sorted(e.format() for e in errors) == sorted(wanted)
