"""The project's exception hierarchy: one root, branches chosen by what the caller does next."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class ConvergeError(Exception):
    """Root of every error converge raises on purpose; anything else is a bug."""


class TemplateError(ConvergeError):
    """A template, environment or parameter is wrong; nothing has been changed.

    Carries where: the file, the line (where YAML gives one) and the path inside the
    document (``resources.web.properties.image``). ``str()`` gives the one-line form
    ``file:line: path: message`` that ``converge validate`` prints.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.path = path
        super().__init__(self.format())

    def format(self) -> str:
        place = ""
        if self.file:
            place = self.file + (f":{self.line}" if self.line else "") + ": "
        elif self.line:
            place = f"line {self.line}: "
        if self.path:
            place += f"{self.path}: "
        return place + self.message

    def located(
        self, *, file: str | None = None, line: int | None = None, path: str | None = None
    ) -> TemplateError:
        """The same problem with missing location parts filled in (never overwritten)."""
        return type(self)(
            self.message,
            file=self.file or file,
            line=self.line or line,
            path=self.path or path,
        )

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "path": self.path, "message": self.message}


class TemplateErrors(TemplateError):
    """Several template problems found in one pass, so the author can fix them all at once."""

    def __init__(self, errors: Sequence[TemplateError]) -> None:
        self.errors: list[TemplateError] = []
        for error in errors:
            if isinstance(error, TemplateErrors):
                self.errors.extend(error.errors)
            else:
                self.errors.append(error)
        first = self.errors[0] if self.errors else TemplateError("no problems")
        super().__init__(first.message, file=first.file, line=first.line, path=first.path)

    def format(self) -> str:
        return "\n".join(error.format() for error in getattr(self, "errors", []))

    @staticmethod
    def raise_if_any(errors: Iterable[TemplateError]) -> None:
        collected = list(errors)
        if len(collected) == 1:
            raise collected[0]
        if collected:
            raise TemplateErrors(collected)


class NotFound(ConvergeError):
    """A stack, resource, event or output that was asked for does not exist."""


class Conflict(ConvergeError):
    """The request clashes with the current state (a name taken, an action not allowed now)."""


class Superseded(Conflict):
    """A newer operation on the stack replaced this one before it finished: what this one
    asked for was not carried out as such (the stack converges to the newer request)."""


class Unavailable(ConvergeError):
    """A service the request needs cannot be reached (the broker) or is not running (no
    live worker to do the work): nothing was started; start it and ask again."""


class InvalidTransition(ConvergeError):
    """A state change that the transition table does not allow: a bug or a corrupted store."""


class StoreError(ConvergeError):
    """The database could not be reached or answered unexpectedly."""


class StateError(StoreError):
    """The state itself is unusable (damaged, full, unreadable, not converge's): fatal.

    Never retried: every later use of the same store raises it again, so a run stops
    within seconds with nothing more written. ``location`` is the file (or database URL).
    """

    def __init__(self, location: str, reason: str) -> None:
        self.location = location
        self.reason = reason
        super().__init__(f"{location}: {reason}")


class PluginError(ConvergeError):
    """A resource plugin failed; ``resource`` names the template resource where known."""

    def __init__(self, message: str, *, resource: str | None = None) -> None:
        self.resource = resource
        super().__init__(f"{resource}: {message}" if resource else message)


# --- The plugin error contract: what a plugin raises to tell the engine what to do next. ---


class ReplacementRequired(ConvergeError):
    """Raised by a plugin's ``update`` when the change cannot be made in place."""


class RetryLater(ConvergeError):
    """A temporary failure: the engine retries after ``delay`` seconds, within the timeout."""

    def __init__(self, message: str, *, delay: float = 1.0) -> None:
        self.delay = delay
        super().__init__(message)


class PermanentFailure(ConvergeError):
    """The action failed and retrying will not help; the resource becomes FAILED.

    ``kind`` is the error's name in the resource's failure reason, as Heat writes it
    (``ValueError: resources.x: …``); ``path`` the place below the resource that failed
    (a nested stack's ``["resources", "inner"]``).
    """

    def __init__(self, message: str, *, kind: str = "Error", path: Sequence[str] = ()) -> None:
        self.kind = kind
        self.path = tuple(path)
        super().__init__(message)

    def reason(self, resource: str) -> str:
        """The failure reason of ``resource`` in Heat's form: ``Kind: resources.a.b: msg``."""
        return f"{self.kind}: {'.'.join(['resources', resource, *self.path])}: {self}"

    @classmethod
    def from_reason(cls, reason: str, fallback: str) -> PermanentFailure:
        """The failure a nested stack's status reason tells of (Heat's
        ``ResourceFailure._from_status_reason``): ``Resource CREATE failed: Kind: path:
        message`` keeps its kind and path; anything else becomes ``fallback``."""
        head, sep, rest = reason.partition(" failed: ")
        parts = [part.strip() for part in rest.split(":", 2)] if sep else []
        if not head.startswith("Resource ") or len(parts) < 3 or not parts[1]:
            return cls(fallback)
        return cls(parts[2], kind=parts[0], path=parts[1].split("."))


class InvalidRequest(ConvergeError):
    """A request that is malformed apart from its template (a bad stack name, a bad option)."""
