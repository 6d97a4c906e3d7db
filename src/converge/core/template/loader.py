"""Parsing template and environment text (YAML or JSON) into data plus a map of lines.

YAML is read event by event from libyaml (or PyYAML's pure parser where libyaml is missing)
and built here without recursion, so that limits on size, nesting depth and alias expansion
hold *before* any deep structure exists: a 5 MiB ``[[[[…`` or a "billion laughs" document
is refused in milliseconds instead of crashing the C composer or exhausting memory. Scalars
follow PyYAML's safe rules (YAML 1.1, as Heat reads templates) except that timestamps stay
strings, so ``heat_template_version: 2016-10-14`` is the text ``"2016-10-14"``.

Two builders read the same events. The *quick* one makes only the data, for the documents
templates nearly always are (maps, lists and scalars; no anchor, alias, tagged collection,
merge key or problem); it is twice as fast as the *careful* one, which also records the
line of every path and checks every rule. Anything unusual makes the quick builder give up, and the
careful one starts over: it reports every problem exactly as before, with its line. The
line map of a document the quick builder made is built by the careful one when an error
first asks for a line (and is never built for a valid template), which also spares the
memory of a map with an entry per node.

A document starting with ``{`` is JSON (Heat's rule) and parsed by ``json``, which is much
faster; its line map too is built from the YAML events only when an error needs a line.

Faster YAML libraries were measured on the 10,000-resource benchmark template (2.6 MB) and
not taken: ``yaml-rs`` parses it in 0.07 s but reads YAML 1.2 (``yes`` and ``on`` stay
strings, ``017`` is 17) and says nothing of quoting, so Heat's YAML 1.1 rules cannot be
applied after it; ``rapidyaml`` parses it in 0.05 s but its Python binding exposes no node
positions, and walking its tree through that binding to make the data takes 0.3 s, no
faster than libyaml's events; both accept and reject other documents than libyaml does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from converge.core.template.gcpause import without_gc
from converge.core.template.nodes import Path, SourceMap, format_path
from converge.errors import TemplateError

# Only the event parser is used; libyaml when PyYAML was built with it.
_Parser: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


@dataclass(frozen=True)
class Limits:
    """Bounds checked before heavy work, so one document cannot exhaust the engine."""

    max_template_bytes: int = 5 * 1024 * 1024
    max_resources: int = 20_000
    max_depth: int = 100  # nesting of maps and lists
    max_nodes: int = 2_000_000  # scalars + collections, counting every alias expansion


DEFAULT_LIMITS = Limits()


class _LazySourceMap(SourceMap):
    """A SourceMap built on first use: only an error needs a line."""

    def __init__(self, build: Callable[[], dict[Path, int]]) -> None:
        super().__init__()
        self._build: Callable[[], dict[Path, int]] | None = build

    def _ensure(self) -> None:
        build = self._build
        if build is not None:
            # built before it is published: a concurrent reader builds it too, never sees half
            self._lines.update(build())
            self._build = None

    def line_of(self, path: Path) -> int | None:
        self._ensure()
        return super().line_of(path)

    def __len__(self) -> int:
        self._ensure()
        return super().__len__()


# --- scalars ------------------------------------------------------------------------------

_YAML = "tag:yaml.org,2002:"
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
# Only plain scalars starting with one of these characters, or being one of these words, may
# be something else than a string (number, merge key; boolean, null): only they go through
# the (slow) implicit resolver. In PyYAML's YAML 1.1 rules a letter starts nothing but the
# boolean and null words; a hypothesis test holds this to the resolver.
_MAYBE_TYPED = frozenset("0123456789+-.~<=")
_BOOLEAN_WORDS = ("yes", "no", "true", "false", "on", "off")
_TYPED_WORDS = frozenset(
    spelling
    for word in (*_BOOLEAN_WORDS, "null")
    for spelling in (word, word.capitalize(), word.upper())
)
_MERGE = object()  # the ``<<`` merge key
# A plain decimal integer without leading zeros or underscores: YAML 1.1 makes it an int
# (``017`` is octal, ``1_000`` and ``1:30`` are other forms: those take the slow way).
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")


class _Problem(Exception):
    """A located loading problem, raised inside the builder and turned into a TemplateError."""

    def __init__(self, message: str, line: int | None, path: Path = ()) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.path = path


def _typed_scalar(tag: str, value: str, line: int) -> Any:
    if tag == _YAML + "str" or tag == _YAML + "timestamp" or tag == _YAML + "value":
        return value
    if tag == _YAML + "null":
        return None
    if tag == _YAML + "merge":
        return _MERGE
    if tag in (_YAML + "bool", _YAML + "int", _YAML + "float"):
        node = yaml.ScalarNode(tag, value)
        try:
            return _CONSTRUCTOR.construct_object(node)
        except (yaml.YAMLError, ValueError, KeyError, IndexError) as exc:  # IndexError: !!int ""
            raise _Problem(f"{value!r} is not a valid {tag[len(_YAML) :]}", line) from exc
    raise _Problem(f"unsupported YAML tag {tag!r}", line)


def _scalar(event: Any, line: int) -> Any:
    tag = event.tag
    value: str = event.value
    if tag is None or tag == "!":
        if not event.implicit[0] or tag == "!":
            return value  # quoted, or a block scalar: always a string
        if value and value[0] not in _MAYBE_TYPED and value not in _TYPED_WORDS:
            return value
        if _DECIMAL.match(value):
            return int(value)  # what the resolver and constructor make, four times faster
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    return _typed_scalar(tag, value, line)


# --- the builder ---------------------------------------------------------------------------


class _Frame:
    __slots__ = ("anchor", "container", "has_key", "key", "key_line", "merges", "path", "size")

    def __init__(self, container: Any, path: Path, anchor: str | None) -> None:
        self.container = container
        self.path = path
        self.anchor = anchor
        self.size = 1
        self.has_key = False
        self.key: Any = None
        self.key_line = 0
        self.merges: list[tuple[Any, int]] = []


class _Builder:
    """The careful builder: parser events -> Python data and a path -> line map, checking
    every rule and limit and reporting each problem with its line."""

    def __init__(self, limits: Limits, strict: bool = False) -> None:
        self.limits = limits
        self.strict = strict
        self.duplicates: list[_Problem] = []  # kept, the last one winning (Heat's rule)
        self.lines: dict[Path, int] = {}
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.nodes = 0
        self.documents = 0
        self.root: Any = None

    def run(self, events: Iterator[Any]) -> Any:
        for event in events:
            line = event.start_mark.line + 1
            kind = type(event)
            if kind is yaml.ScalarEvent:
                self._add(_scalar(event, line), 1, line, event.anchor)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                self._open(event, line, kind is yaml.MappingStartEvent)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                self._close(line)
            elif kind is yaml.AliasEvent:
                self._alias(event.anchor, line)
            elif kind is yaml.DocumentStartEvent:
                self.documents += 1
                if self.documents > 1:
                    raise _Problem("expected a single YAML document, found several", line)
        return self.root

    def _child_path(self) -> Path:
        frame = self.stack[-1]
        if frame.container.__class__ is list:
            return (*frame.path, len(frame.container))
        return (*frame.path, frame.key)

    def _count(self, size: int, line: int) -> None:
        self.nodes += size
        if self.nodes > self.limits.max_nodes:
            raise _Problem(
                f"the document is too large: more than {self.limits.max_nodes} values "
                "(counting every use of a YAML alias)",
                line,
            )

    def _open(self, event: Any, line: int, is_map: bool) -> None:
        tag = event.tag
        if tag not in (None, "!", _YAML + ("map" if is_map else "seq")):
            raise _Problem(f"unsupported YAML tag {tag!r}", line)
        if len(self.stack) >= self.limits.max_depth:
            raise _Problem(
                f"nesting is deeper than the limit of {self.limits.max_depth} levels", line
            )
        if self.stack and self.stack[-1].container.__class__ is dict and not self.stack[-1].has_key:
            raise _Problem("a mapping key must be a string or another scalar", line)
        path: Path = self._child_path() if self.stack else ()
        if path not in self.lines:
            self.lines[path] = line
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(_Frame({} if is_map else [], path, event.anchor))

    def _close(self, line: int) -> None:
        frame = self.stack.pop()
        container = frame.container
        for source, merge_line in frame.merges:
            sources = source if isinstance(source, list) else [source]
            for item in sources:
                if not isinstance(item, dict):
                    raise _Problem("a merge key '<<' needs a mapping or a list of them", merge_line)
                for key, value in item.items():
                    container.setdefault(key, value)
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
            self.anchors[frame.anchor] = (container, frame.size)
        self._place(container, frame.size, line, path_line=False)

    def _alias(self, anchor: str, line: int) -> None:
        if anchor in self.open_anchors:
            raise _Problem(f"the alias *{anchor} refers to a collection that contains it", line)
        try:
            value, size = self.anchors[anchor]
        except KeyError:
            raise _Problem(f"unknown alias *{anchor}", line) from None
        self._count(size, line)
        self._place(value, size, line, path_line=True)

    def _add(self, value: Any, size: int, line: int, anchor: str | None) -> None:
        self._count(size, line)
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        self._place(value, size, line, path_line=True)

    def _place(self, value: Any, size: int, line: int, *, path_line: bool) -> None:
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        frame.size += size
        container = frame.container
        if container.__class__ is list:
            if path_line:
                self.lines[(*frame.path, len(container))] = line
            container.append(value)
            return
        if not frame.has_key:
            if value.__class__ is dict or value.__class__ is list:
                raise _Problem("a mapping key must be a string or another scalar", line)
            frame.key = value
            frame.key_line = line
            frame.has_key = True
            return
        key = frame.key
        frame.has_key = False
        if key is _MERGE:
            frame.merges.append((value, frame.key_line))
            return
        if key in container:
            first = self.lines.get((*frame.path, key), "?")
            if self.strict:
                raise _Problem(
                    f"duplicate key {key!r} (first on line {first})",
                    frame.key_line,
                    (*frame.path, key),
                )
            self.duplicates.append(
                _Problem(
                    f"duplicate key {key!r}: this one (line {frame.key_line}) is used and the "
                    f"one on line {first} ignored, as Heat does",
                    frame.key_line,
                    (*frame.path, key),
                )
            )
        self.lines[(*frame.path, key)] = frame.key_line
        container[key] = value


def _yaml_error(exc: yaml.YAMLError, text: str, limits: Limits) -> tuple[str, int | None]:
    if isinstance(exc, yaml.MarkedYAMLError):
        if exc.problem and "maximum nesting depth" in exc.problem:
            # Recent PyYAML builds' libyaml scans ahead and stops at a nesting limit of its
            # own (1,000 flow levels) before the builder sees our much lower one.
            mark = exc.problem_mark or exc.context_mark
            message = f"nesting is deeper than the limit of {limits.max_depth} levels"
            return message, (mark.line + 1 if mark else None)
        parts = [part for part in (exc.context, exc.problem) if part]
        mark = exc.problem_mark or exc.context_mark
        return "invalid YAML: " + ", ".join(parts), (mark.line + 1 if mark else None)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        return f"invalid YAML: {exc.reason} (character {exc.character!r})", line
    return f"invalid YAML: {exc}", None


def _parse_yaml(text: str, limits: Limits, strict: bool = False) -> _Builder:
    """The careful builder, having built the data (``root``), its line map (``lines``) and
    the list of ``duplicates``; raises ``_Problem`` or ``yaml.YAMLError``."""
    builder = _Builder(limits, strict)
    parser = _Parser(text)
    try:
        builder.run(_events(parser))
    finally:
        _dispose(parser)
    return builder


def _events(parser: Any) -> Iterator[Any]:
    next_event = parser.get_event
    while (event := next_event()) is not None:  # None once the stream has ended
        yield event


def _dispose(parser: Any) -> None:
    dispose = getattr(parser, "dispose", None)  # libyaml's parser holds C memory
    if dispose is not None:
        dispose()


# --- the quick builder ---------------------------------------------------------------------


class _Unusual(Exception):
    """The document needs the careful builder (an anchor, a tag, a limit, a problem…)."""


_NO_KEY: Any = object()  # a mapping waiting for its next key


def _quick_data(text: str, limits: Limits) -> Any:
    """The data of a plain document; raises ``_Unusual``, ``_Problem`` or ``yaml.YAMLError``
    for anything else, which is the careful builder's to load or report.

    Plain: maps, lists and scalars, without anchors, aliases, merge keys or tagged
    collections, and nothing the careful builder would refuse; on those both make the same
    data (a hypothesis test holds them to it). One loop keeping its state in local variables
    rather than methods on a frame stack: it runs once per event, 360,000 times for the
    benchmark template.
    """
    parser = _Parser(text)
    try:
        return _quick_build(parser.get_event, limits)
    finally:
        _dispose(parser)


def _quick_build(next_event: Callable[[], Any], limits: Limits) -> Any:
    enclosing: list[tuple[Any, Any]] = []  # (container, pending key) of the open parents
    container: Any = None  # the map or list being filled; None at the top
    key = _NO_KEY
    root: Any = None
    scalars = documents = 0
    while (event := next_event()) is not None:
        kind = event.__class__
        if kind is yaml.ScalarEvent:
            if event.anchor is not None:
                raise _Unusual
            value = event.value
            if event.tag is not None or (
                event.implicit[0]
                and (not value or value[0] in _MAYBE_TYPED or value in _TYPED_WORDS)
            ):
                value = _scalar(event, 0)  # a _Problem is the careful builder's to report
                if value is _MERGE:
                    raise _Unusual
            scalars += 1
            if scalars > limits.max_nodes:
                raise _Unusual
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None or event.tag is not None:
                raise _Unusual
            if len(enclosing) >= limits.max_depth or (
                key is _NO_KEY and container.__class__ is dict
            ):
                raise _Unusual  # too deep, or a map or list used as a key
            enclosing.append((container, key))
            container = {} if kind is yaml.MappingStartEvent else []
            key = _NO_KEY
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            value = container
            container, key = enclosing.pop()
        else:
            if kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise _Unusual
            elif kind is yaml.AliasEvent:
                raise _Unusual
            continue
        # place the scalar or the finished collection in its parent
        if container.__class__ is list:
            container.append(value)
        elif container is None:
            root = value
        elif key is _NO_KEY:
            key = value  # a scalar: collections as keys were refused when they opened
        elif key in container:
            raise _Unusual  # a duplicate key
        else:
            container[key] = value
            key = _NO_KEY
    return root


def _decode(source: str | bytes, filename: str, limits: Limits) -> str:
    size = len(source)
    if isinstance(source, str) and size * 4 > limits.max_template_bytes:
        size = len(source.encode("utf-8", "surrogatepass"))
    if size > limits.max_template_bytes:
        raise TemplateError(
            f"the document is {size} bytes, more than the limit of "
            f"{limits.max_template_bytes} bytes",
            file=filename,
        )
    if isinstance(source, bytes):
        try:
            return source.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise TemplateError(
                f"not UTF-8 text: {exc.reason} at byte {exc.start}", file=filename
            ) from exc
    return source.removeprefix("\ufeff")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _check_json_shape(data: Any, limits: Limits) -> None:
    """Depth and size limits for JSON data (``json`` has no such limits of its own)."""
    count = 0
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        count += 1
        if value.__class__ is dict:
            children: Any = value.values()
        elif value.__class__ is list:
            children = value
        else:
            continue
        if depth > limits.max_depth:
            raise TemplateError(f"nesting is deeper than the limit of {limits.max_depth} levels")
        pending.extend((child, depth + 1) for child in children)
    if count > limits.max_nodes:
        raise TemplateError(f"the document is too large: more than {limits.max_nodes} values")


_JSON_START = re.compile(r"\s*\{")


@without_gc
def load_document(
    source: str | bytes,
    filename: str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    strict: bool = False,
    warnings: list[TemplateError] | None = None,
) -> tuple[Any, SourceMap]:
    """Parse YAML or JSON text into plain data and the line of each node's path.

    Every problem is a ``TemplateError`` naming the file and, where known, the line. A key
    repeated in a mapping is accepted as Heat's loader does, the last one winning, and
    reported in ``warnings`` (when given); ``strict`` makes it an error instead.
    """
    text = _decode(source, filename, limits)
    load = _Loading(filename, limits, strict, warnings)
    if _JSON_START.match(text):
        try:
            return load.json(text)
        except _NotJson as not_json:
            # Heat reads a document starting with "{" as JSON; a YAML flow mapping is
            # accepted too, but a document that is neither gets the JSON parser's message.
            try:
                return load.yaml(text)
            except TemplateError as exc:
                if exc.message.startswith("invalid YAML"):
                    raise not_json.error from None
                raise
    return load.yaml(text)


class _NotJson(Exception):
    def __init__(self, error: TemplateError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class _Loading:
    """One document being loaded: where problems go and how repeated keys are treated."""

    filename: str
    limits: Limits
    strict: bool
    warnings: list[TemplateError] | None

    def yaml(self, text: str) -> tuple[Any, SourceMap]:
        try:
            data = _quick_data(text, self.limits)
        except (_Unusual, _Problem, yaml.YAMLError):
            return self.carefully(text)
        limits = self.limits
        return data, _LazySourceMap(lambda: _lines_of(text, limits))

    def carefully(self, text: str) -> tuple[Any, SourceMap]:
        try:
            builder = _parse_yaml(text, self.limits, self.strict)
        except _Problem as problem:
            raise self.error(problem) from None
        except yaml.YAMLError as exc:
            message, line = _yaml_error(exc, text, self.limits)
            raise TemplateError(message, file=self.filename, line=line) from None
        if self.warnings is not None:
            self.warnings.extend(self.error(problem) for problem in builder.duplicates)
        return builder.root, SourceMap(builder.lines)

    def error(self, problem: _Problem) -> TemplateError:
        return TemplateError(
            problem.message,
            file=self.filename,
            line=problem.line,
            path=format_path(problem.path) or None,
        )

    def json(self, text: str) -> tuple[Any, SourceMap]:
        limits = self.limits
        source_map = _LazySourceMap(lambda: _lines_of(text, limits))
        try:
            data = json.loads(text, object_pairs_hook=_json_object)
        except json.JSONDecodeError as exc:
            error = TemplateError(f"invalid JSON: {exc.msg}", file=self.filename, line=exc.lineno)
            raise _NotJson(error) from None
        except (_DuplicateKey, RecursionError):
            # JSON is YAML: the careful builder reports a repeated key or the depth limit
            # with its line and path
            return self.carefully(text)
        try:
            _check_json_shape(data, limits)
        except TemplateError as exc:
            raise exc.located(file=self.filename) from None
        return data, source_map


@without_gc
def _lines_of(text: str, limits: Limits) -> dict[Path, int]:
    """The line map of a document that loaded (JSON is YAML too), for a lazy source map."""
    try:
        return _parse_yaml(text, limits).lines
    except (_Problem, yaml.YAMLError):
        return {}
