"""Messages between engine processes: frozen, versioned, JSON-serialisable data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from converge.core.baseline import ChangeKind
from converge.errors import ConvergeError


class MessageError(ConvergeError):
    """A message that this version of converge cannot read."""


@dataclass(frozen=True)
class CheckResource:
    """Ask a worker to converge one graph node of a traversal (a hint: the DB is the truth)."""

    kind: ClassVar[str] = "check_resource"
    version: ClassVar[int] = 1

    stack_id: str
    traversal_id: str
    resource_id: int
    is_update: bool

    def to_dict(self) -> dict[str, Any]:
        # Spelled out: ``asdict`` deep-copies, and this is sent once per graph node.
        return {
            "kind": self.kind,
            "version": self.version,
            "stack_id": self.stack_id,
            "traversal_id": self.traversal_id,
            "resource_id": self.resource_id,
            "is_update": self.is_update,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResource:
        if data.get("kind") != cls.kind or data.get("version") != cls.version:
            raise MessageError(f"not a {cls.kind} v{cls.version} message: {data!r}")
        try:
            return cls(
                stack_id=str(data["stack_id"]),
                traversal_id=str(data["traversal_id"]),
                resource_id=int(data["resource_id"]),
                is_update=bool(data["is_update"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"malformed {cls.kind} message: {data!r}") from exc


@dataclass(frozen=True)
class CheckResources:
    """Ask a worker to converge several graph nodes of one traversal, each as if it came in
    a ``CheckResource`` of its own; the message is done when all of them are.

    A traversal's leaves go out a few dozen to a message: a broker stores, confirms and
    delivers each message, and both ends pay for it, so 1,000 leaves in 67 messages reach
    the workers in a fraction of the time 1,000 messages take.
    """

    kind: ClassVar[str] = "check_resources"
    version: ClassVar[int] = 1

    stack_id: str
    traversal_id: str
    nodes: tuple[tuple[int, bool], ...]  # (resource_id, is_update)

    def checks(self) -> list[CheckResource]:
        return [
            CheckResource(self.stack_id, self.traversal_id, resource_id, is_update)
            for resource_id, is_update in self.nodes
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "version": self.version,
            "stack_id": self.stack_id,
            "traversal_id": self.traversal_id,
            "nodes": [[resource_id, is_update] for resource_id, is_update in self.nodes],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResources:
        if data.get("kind") != cls.kind or data.get("version") != cls.version:
            raise MessageError(f"not a {cls.kind} v{cls.version} message: {data!r}")
        try:
            nodes = tuple((int(node[0]), bool(node[1])) for node in data["nodes"])
            if not nodes or any(len(node) != 2 for node in data["nodes"]):
                raise ValueError("no nodes, or a node that is not [resource_id, is_update]")
            return cls(
                stack_id=str(data["stack_id"]),
                traversal_id=str(data["traversal_id"]),
                nodes=nodes,
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise MessageError(f"malformed {cls.kind} message: {data!r}") from exc


def work_checks(data: dict[str, Any]) -> list[CheckResource]:
    """The checks a work message asks for: one (``CheckResource``) or several
    (``CheckResources``); ``MessageError`` for anything else."""
    if data.get("kind") == CheckResources.kind:
        return CheckResources.from_dict(data).checks()
    return [CheckResource.from_dict(data)]


@dataclass(frozen=True)
class ChangeNotification:
    """An entity of a resource type appeared, changed its essence (or owner), or disappeared.

    Published by the synchronizer on topic ``entity.<type>``. ``seq`` is the type's sequence
    number at this change: it only grows, so a consumer holding a snapshot taken at ``seq``
    applies exactly the notifications with a greater one.
    """

    message: ClassVar[str] = "change_notification"
    version: ClassVar[int] = 1

    type: str
    physical_id: str
    kind: ChangeKind
    seq: int
    essence: Mapping[str, Any] | None  # None when gone
    hash: str | None  # sha256 of the essence; None when gone
    observed_at: float
    stack_id: str | None = None  # the owner, when a stack manages the entity
    resource_id: int | None = None
    resource_name: str | None = None

    @property
    def is_managed(self) -> bool:
        return self.stack_id is not None

    @staticmethod
    def topic(type_name: str) -> str:
        return f"entity.{type_name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "version": self.version,
            "type": self.type,
            "physical_id": self.physical_id,
            "kind": str(self.kind),
            "seq": self.seq,
            "essence": None if self.essence is None else dict(self.essence),
            "hash": self.hash,
            "observed_at": self.observed_at,
            "stack_id": self.stack_id,
            "resource_id": self.resource_id,
            "resource_name": self.resource_name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangeNotification:
        if data.get("message") != cls.message or data.get("version") != cls.version:
            raise MessageError(f"not a {cls.message} v{cls.version} message: {data!r}")
        try:
            essence = data["essence"]
            resource_id = data.get("resource_id")
            return cls(
                type=str(data["type"]),
                physical_id=str(data["physical_id"]),
                kind=ChangeKind(data["kind"]),
                seq=int(data["seq"]),
                essence=None if essence is None else dict(essence),
                hash=None if data.get("hash") is None else str(data["hash"]),
                observed_at=float(data["observed_at"]),
                stack_id=data.get("stack_id"),
                resource_id=None if resource_id is None else int(resource_id),
                resource_name=data.get("resource_name"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"malformed {cls.message} message: {data!r}") from exc
