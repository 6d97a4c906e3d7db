"""What a node's sync point received, as the ResourceData that template evaluation asks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from converge.records import Report


class ReportedData:
    """Reference ids and attributes of the resources a node depends on, by resource name."""

    def __init__(self, reports: Iterable[Report]) -> None:
        self._by_name: dict[str, Mapping[str, Any]] = {}
        for report in reports:
            name = report.data.get("name")
            if name is not None and report.sender_is_update:
                self._by_name[str(name)] = report.data

    def reference_id(self, name: str) -> Any:
        data = self._by_name.get(name)
        return None if data is None else data.get("reference_id")

    def attributes(self, name: str) -> Mapping[str, Any]:
        data = self._by_name.get(name)
        return {} if data is None else data.get("attributes", {})

    def resource_ids(self) -> frozenset[int]:
        return frozenset(int(data["resource_id"]) for data in self._by_name.values())


class StoredData:
    """ResourceData from stored resource rows (outputs are resolved from these)."""

    def __init__(self, references: Mapping[str, Any], attributes: Mapping[str, Mapping[str, Any]]):
        self._references = references
        self._attributes = attributes

    def reference_id(self, name: str) -> Any:
        return self._references.get(name)

    def attributes(self, name: str) -> Mapping[str, Any]:
        return self._attributes.get(name, {})
