"""Parsed template snippets: plain data with ``Function`` nodes where intrinsics were called.

A snippet is parsed once (``parse``) into the same JSON-like data with every intrinsic
function call replaced by a ``Function`` object, then evaluated as often as needed with an
``EvalContext`` that answers for parameters, conditions, files and resources. Partial
evaluation (``partial``) resolves everything that does not need resource data, so a stack
operation evaluates parameters and conditions once and the engine later fills in only
``get_resource`` / ``get_attr``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from converge.errors import TemplateError

PathPart = str | int
Path = tuple[PathPart, ...]


class SourceMap:
    """Line numbers of the nodes of a loaded document, by their path inside it."""

    def __init__(self, lines: Mapping[Path, int] | None = None) -> None:
        self._lines: dict[Path, int] = dict(lines or {})

    def line_of(self, path: Path) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        while True:
            line = self._lines.get(path)
            if line is not None or not path:
                return line
            path = path[:-1]

    def __len__(self) -> int:
        return len(self._lines)


EMPTY_SOURCE_MAP = SourceMap()


def format_path(path: Path) -> str:
    """``("resources", "web", "properties", "image")`` -> ``resources.web.properties.image``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


@dataclass(frozen=True)
class Where:
    """A place in a template: the file, the path inside it, and so the line."""

    file: str | None
    path: Path = ()
    source_map: SourceMap = EMPTY_SOURCE_MAP

    def __init__(
        self, file: str | None, path: Path = (), source_map: SourceMap = EMPTY_SOURCE_MAP
    ) -> None:
        # Written out (the dataclass keeps it) to set the fields in one step: the generated
        # __init__ of a frozen dataclass calls object.__setattr__ per field, twice as slow,
        # and preparing a 10,000-resource template makes tens of thousands of places.
        object.__setattr__(self, "__dict__", {"file": file, "path": path, "source_map": source_map})

    @property
    def line(self) -> int | None:
        return self.source_map.line_of(self.path)

    def child(self, *parts: PathPart) -> Where:
        return Where(self.file, self.path + parts, self.source_map)

    def error(self, message: str) -> TemplateError:
        return TemplateError(message, file=self.file, line=self.line, path=format_path(self.path))


@dataclass(frozen=True)
class Reference:
    """A resource named by ``get_resource`` (attribute None) or ``get_attr``.

    ``attribute`` is the top-level attribute name; ``ALL_ATTRIBUTES`` for the
    whole-resource form of ``get_attr``.
    """

    resource: str
    attribute: str | None = None
    where: Where | None = None

    def __init__(
        self, resource: str, attribute: str | None = None, where: Where | None = None
    ) -> None:
        # one step, as Where's: a template makes one per get_resource and get_attr
        object.__setattr__(
            self, "__dict__", {"resource": resource, "attribute": attribute, "where": where}
        )


ALL_ATTRIBUTES = "*"


class Unresolved(Exception):  # an internal signal, never shown to a user
    """Raised by an EvalContext that has no resource data yet (partial evaluation)."""


class _Removed:
    """Marks a value that must vanish from its enclosing map or list (two-argument ``if``)."""

    _instance: ClassVar[_Removed | None] = None

    def __new__(cls) -> _Removed:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REMOVED"


REMOVED: Any = _Removed()


class EvalContext(Protocol):
    """What evaluation may ask about the world. Pure implementations only."""

    @property
    def version(self) -> str: ...

    def parameter(self, name: str, where: Where) -> Any:
        """A parameter's value, including the pseudo-parameters (``OS::stack_name`` …)."""

    def condition(self, name: str, where: Where) -> bool:
        """A named condition's value."""

    def file_content(self, key: str, where: Where) -> str:
        """``get_file``: content from the request's files map."""

    def reference_id(self, resource: str, where: Where) -> Any:
        """``get_resource``; raises ``Unresolved`` when resource data is not available."""

    def attribute(self, resource: str, attribute: str, where: Where) -> Any:
        """``get_attr`` (top level; the function applies the path); may raise ``Unresolved``."""

    def all_attributes(self, resource: str, where: Where) -> Mapping[str, Any]:
        """Whole-resource ``get_attr``; may raise ``Unresolved``."""


class Function(ABC):
    """An intrinsic function call in a template (``{get_param: name}``)."""

    def __init__(self, fn_name: str, args: Any, where: Where) -> None:
        self.fn_name = fn_name
        self.args = args  # already parsed: may hold Function nodes
        self.where = where
        self.validate_args()

    def validate_args(self) -> None:  # noqa: B027 - optional hook
        """Check the argument shape at parse time; raise ``self.where.error(...)``."""

    @abstractmethod
    def resolve(self, ctx: EvalContext) -> Any:
        """The function's value (use ``resolve(self.args, ctx)`` for arguments)."""

    def partial(self, ctx: EvalContext) -> Any:
        """Evaluate without resource data: the value, or a node with what is left.

        Overridden where the choice of arguments to evaluate matters (``if`` drops the
        branch it does not take, so that branch's references vanish as in Heat).
        """
        try:
            return self.resolve(ctx)
        except Unresolved:
            args = partial(self.args, ctx)
            return self if args is self.args else self.with_args(args)

    def references(self) -> Iterator[Reference]:
        """Resources this call depends on (default: those its arguments name)."""
        return references(self.args)

    def with_args(self, args: Any) -> Function:
        """A copy with other (partially evaluated) arguments."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.args = args
        return clone

    def __repr__(self) -> str:
        return f"{{{self.fn_name}: {self.args!r}}}"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, Function)
            and other.fn_name == self.fn_name
            and other.args == self.args
        )

    def __hash__(self) -> int:
        return hash((type(self), self.fn_name, repr(self.args)))


FunctionTable = Mapping[str, type[Function]]


def parse(data: Any, functions: FunctionTable, where: Where) -> Any:
    """Replace every intrinsic function call in ``data`` by a ``Function`` node.

    A mapping with exactly one key that names a function of ``functions`` is a call (Heat's
    rule). Arguments are parsed first, so nested calls are nodes too.
    """
    if type(data) in _SCALARS:
        return data
    return _parse(data, functions, where.file, where.path, where.source_map)


# Plain values parsing and evaluation leave as they are. Exact type checks come first on
# the hot paths (10,000-resource templates): ``isinstance`` against the ``Function`` ABC or
# ``Mapping`` is several times slower than a set lookup of the type.
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})

# A path under construction: (parent link, key) pairs, turned into a tuple only when a
# Function keeps its Where; cheaper than copying a tuple for every node of the document.
_PathLink = tuple[Any, PathPart] | None


def _materialize(link: _PathLink, base: Path) -> Path:
    parts: list[PathPart] = []
    while link is not None:
        link, key = link
        parts.append(key)
    return base + tuple(reversed(parts))


def _parse(
    data: Any,
    functions: FunctionTable,
    file: str | None,
    base: Path,
    source_map: SourceMap,
    link: _PathLink = None,
) -> Any:
    # Scalars are tested before the call in the loops: most values are, and a call costs.
    kind = type(data)
    if kind is list:
        return [
            item
            if type(item) in _SCALARS
            else _parse(item, functions, file, base, source_map, (link, index))
            for index, item in enumerate(data)
        ]
    if kind is dict or isinstance(data, Mapping):
        if len(data) == 1:
            ((key, value),) = data.items()
            if type(key) is str and key in functions:
                if type(value) not in _SCALARS:
                    value = _parse(value, functions, file, base, source_map, (link, key))
                where = Where(file, _materialize(link, base), source_map)
                return functions[key](key, value, where)
        return {
            key: value
            if type(value) in _SCALARS
            else _parse(value, functions, file, base, source_map, (link, key))
            for key, value in data.items()
        }
    return data


def resolve(node: Any, ctx: EvalContext) -> Any:
    """Evaluate a parsed snippet completely; ``REMOVED`` entries vanish from containers."""
    kind = type(node)
    if kind in _SCALARS:
        return node
    if kind is dict:
        result = {}
        for key, value in node.items():
            resolved = resolve(value, ctx)
            if resolved is not REMOVED:
                result[key] = resolved
        return result
    if kind is list:
        items = []
        for value in node:
            resolved = resolve(value, ctx)
            if resolved is not REMOVED:
                items.append(resolved)
        return items
    if isinstance(node, Function):
        return node.resolve(ctx)
    return node


def partial(node: Any, ctx: EvalContext) -> Any:
    """Evaluate what can be evaluated without resource data; keep the rest as nodes.

    What evaluation leaves unchanged is returned as it is, not copied (parsed snippets are
    never modified): most of a template waits for resource data and would be copied whole.
    """
    kind = type(node)
    if kind in _SCALARS:
        return node
    if kind is dict:
        return _partial_map(node, ctx)
    if kind is list:
        return _partial_list(node, ctx)
    if isinstance(node, Function):
        return node.partial(ctx)
    return node


def _partial_map(node: dict[Any, Any], ctx: EvalContext) -> dict[Any, Any]:
    copy: dict[Any, Any] | None = None  # made when a first value changes
    for key, value in node.items():
        if type(value) in _SCALARS:
            continue
        evaluated = partial(value, ctx)
        if evaluated is value:
            continue
        if copy is None:
            copy = dict(node)  # keys keep their order when a value is replaced or removed
        if evaluated is REMOVED:
            del copy[key]
        else:
            copy[key] = evaluated
    return node if copy is None else copy


def _partial_list(node: list[Any], ctx: EvalContext) -> list[Any]:
    copy: list[Any] | None = None  # made when a first item changes
    for index, value in enumerate(node):
        evaluated = value if type(value) in _SCALARS else partial(value, ctx)
        if copy is None:
            if evaluated is value:
                continue
            copy = node[:index]
        if evaluated is not REMOVED:
            copy.append(evaluated)
    return node if copy is None else copy


def references(node: Any) -> Iterator[Reference]:
    """Every resource reference inside a parsed snippet."""
    found: list[Reference] = []
    _collect_references(node, found)
    return iter(found)


def _collect_references(node: Any, found: list[Reference]) -> None:
    kind = type(node)
    if kind in _SCALARS:
        return
    if kind is dict or kind is list:
        for value in node.values() if kind is dict else node:
            if type(value) not in _SCALARS:
                _collect_references(value, found)
    elif isinstance(node, Function):
        found.extend(node.references())


def is_static(node: Any) -> bool:
    """True when the snippet holds no function call any more."""
    if isinstance(node, Function):
        return False
    if isinstance(node, dict):
        return all(is_static(value) for value in node.values())
    if isinstance(node, list):
        return all(is_static(value) for value in node)
    return True
