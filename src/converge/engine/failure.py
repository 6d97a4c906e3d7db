"""A plugin action that failed, as the engine reports it."""

from __future__ import annotations


class ActionFailed(Exception):
    """A plugin action failed; ``reason`` is Heat's ``Type: resources.name: message`` form."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
