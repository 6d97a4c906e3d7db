"""Messages between engine processes: frozen, versioned, JSON-serialisable data."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

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
        return {"kind": self.kind, "version": self.version, **asdict(self)}

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
