"""One environment file's parameter values with its ``parameter_merge_strategies``.

Heat (since Pike) lets each environment file say how its ``parameters`` and
``parameter_defaults`` combine with those of the files before it: per parameter name, or
for all of them with ``default``, one of ``overwrite`` (the default), ``merge`` or
``deep_merge``. What merging means depends on the parameter's type in the template, so
merged environments keep each file's values apart, as a layer, until the template is known
(``parameter_merge.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from converge.core.template.nodes import EMPTY_SOURCE_MAP, SourceMap, Where
from converge.core.template.template import did_you_mean
from converge.errors import TemplateError

OVERWRITE, MERGE, DEEP_MERGE = "overwrite", "merge", "deep_merge"
MERGE_STRATEGIES = (OVERWRITE, MERGE, DEEP_MERGE)
STRATEGIES_SECTION = "parameter_merge_strategies"
DEFAULT_STRATEGY_KEY = "default"  # the strategy of every parameter the file does not name


def read_merge_strategies(raw: Any, where: Where) -> tuple[dict[str, str], list[TemplateError]]:
    """A file's ``parameter_merge_strategies`` section, and every problem in it."""
    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [where.error(f"{STRATEGIES_SECTION} must be a map")]
    strategies: dict[str, str] = {}
    errors: list[TemplateError] = []
    for name, strategy in raw.items():
        at = where.child(name)
        if not isinstance(name, str):
            errors.append(at.error(f"{name!r} is not a parameter name (nor 'default')"))
        elif not isinstance(strategy, str) or strategy not in MERGE_STRATEGIES:
            errors.append(
                at.error(
                    f"invalid merge strategy {strategy!r}{did_you_mean(strategy, MERGE_STRATEGIES)}"
                    f"; acceptable values: {', '.join(MERGE_STRATEGIES)}"
                )
            )
        else:
            strategies[name] = strategy
    return strategies, errors


@dataclass(frozen=True)
class ParameterLayer:
    """The parameter sections of one environment file, kept apart for merging later."""

    filename: str | None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)
    strategies: Mapping[str, str] = field(default_factory=dict)
    source_map: SourceMap = field(default=EMPTY_SOURCE_MAP, repr=False, compare=False)

    @property
    def where(self) -> Where:
        return Where(self.filename, (), self.source_map)

    @property
    def label(self) -> str:
        """The file, as messages name it."""
        return self.filename or "the environment"

    def is_empty(self) -> bool:
        return not (self.parameters or self.parameter_defaults or self.strategies)

    def to_data(self) -> dict[str, Any]:
        """Environment data with this file's parameter sections (and its name under ``file``)."""
        data: dict[str, Any] = {
            "parameters": dict(self.parameters),
            "parameter_defaults": dict(self.parameter_defaults),
            STRATEGIES_SECTION: dict(self.strategies),
        }
        if self.filename is not None:
            data["file"] = self.filename
        return data
