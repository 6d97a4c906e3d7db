"""Parsing template and environment text (YAML or JSON) into data plus a map of lines.

YAML is read event by event from libyaml (or PyYAML's pure parser where libyaml is missing)
and built here without recursion, so that limits on size, nesting depth and alias expansion
hold *before* any deep structure exists: a 5 MiB ``[[[[…`` or a "billion laughs" document
is refused in milliseconds instead of crashing the C composer or exhausting memory. Scalars
follow PyYAML's safe rules (YAML 1.1, as Heat reads templates) except that timestamps stay
strings, so ``heat_template_version: 2016-10-14`` is the text ``"2016-10-14"``.

A document starting with ``{`` is JSON (Heat's rule) and parsed by ``json``, which is much
faster; its line map is built from the YAML events only when an error needs a line.
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
    """A SourceMap built on first use (JSON documents only need lines to report errors)."""

    def __init__(self, build: Callable[[], dict[Path, int]]) -> None:
        super().__init__()
        self._build: Callable[[], dict[Path, int]] | None = build

    def _ensure(self) -> None:
        if self._build is not None:
            build, self._build = self._build, None
            self._lines.update(build())

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
# Plain scalars starting with one of these may be something else than a string (null, bool,
# int, float, merge key): only they go through the (slow) implicit resolver.
_MAYBE_TYPED = frozenset("0123456789+-.~<=nNyYtTfFoO")
_MERGE = object()  # the ``<<`` merge key


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
        except (yaml.YAMLError, ValueError, KeyError) as exc:
            raise _Problem(f"{value!r} is not a valid {tag[len(_YAML) :]}", line) from exc
    raise _Problem(f"unsupported YAML tag {tag!r}", line)


def _scalar(event: Any, line: int) -> Any:
    tag = event.tag
    value: str = event.value
    if tag is None or tag == "!":
        if not event.implicit[0] or tag == "!":
            return value  # quoted, or a block scalar: always a string
        if value and value[0] not in _MAYBE_TYPED:
            return value
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
    """Turns parser events into Python data and a path -> line map, within the limits."""

    def __init__(self, limits: Limits, record_lines: bool = True) -> None:
        self.limits = limits
        self.record = record_lines
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
        if self.record and path not in self.lines:
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
            if path_line and self.record:
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
            raise _Problem(
                f"duplicate key {key!r} (first on line {self.lines.get((*frame.path, key), '?')})",
                frame.key_line,
                (*frame.path, key),
            )
        if self.record:
            self.lines[(*frame.path, key)] = frame.key_line
        container[key] = value


def _yaml_error(exc: yaml.YAMLError, text: str) -> tuple[str, int | None]:
    if isinstance(exc, yaml.MarkedYAMLError):
        parts = [part for part in (exc.context, exc.problem) if part]
        mark = exc.problem_mark or exc.context_mark
        return "invalid YAML: " + ", ".join(parts), (mark.line + 1 if mark else None)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        return f"invalid YAML: {exc.reason} (character {exc.character!r})", line
    return f"invalid YAML: {exc}", None


def _parse_yaml(text: str, limits: Limits, record_lines: bool = True) -> tuple[Any, dict]:
    builder = _Builder(limits, record_lines)
    parser = _Parser(text)
    try:
        root = builder.run(_events(parser))
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose is not None:
            dispose()
    return root, builder.lines


def _events(parser: Any) -> Iterator[Any]:
    while parser.check_event():
        yield parser.get_event()


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
    source: str | bytes, filename: str, *, limits: Limits = DEFAULT_LIMITS
) -> tuple[Any, SourceMap]:
    """Parse YAML or JSON text into plain data and the line of each node's path.

    Every problem is a ``TemplateError`` naming the file and, where known, the line.
    """
    text = _decode(source, filename, limits)
    if _JSON_START.match(text):
        try:
            return _load_json(text, filename, limits)
        except _NotJson as not_json:
            # Heat reads a document starting with "{" as JSON; a YAML flow mapping is
            # accepted too, but a document that is neither gets the JSON parser's message.
            try:
                return _load_yaml(text, filename, limits)
            except TemplateError as exc:
                if exc.message.startswith("invalid YAML"):
                    raise not_json.error from None
                raise
    return _load_yaml(text, filename, limits)


class _NotJson(Exception):
    def __init__(self, error: TemplateError) -> None:
        super().__init__(str(error))
        self.error = error


def _load_yaml(text: str, filename: str, limits: Limits) -> tuple[Any, SourceMap]:
    try:
        data, lines = _parse_yaml(text, limits)
    except _Problem as problem:
        raise TemplateError(
            problem.message,
            file=filename,
            line=problem.line,
            path=format_path(problem.path) or None,
        ) from None
    except yaml.YAMLError as exc:
        message, line = _yaml_error(exc, text)
        raise TemplateError(message, file=filename, line=line) from None
    return data, SourceMap(lines)


def _load_json(text: str, filename: str, limits: Limits) -> tuple[Any, SourceMap]:
    def lines() -> dict[Path, int]:
        try:
            return _parse_yaml(text, limits)[1]
        except (_Problem, yaml.YAMLError):
            return {}

    source_map = _LazySourceMap(lines)
    try:
        data = json.loads(text, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        error = TemplateError(f"invalid JSON: {exc.msg}", file=filename, line=exc.lineno)
        raise _NotJson(error) from None
    except _DuplicateKey as exc:
        raise TemplateError(
            f"duplicate key {exc.key!r}", file=filename, line=_duplicate_line(text, exc.key)
        ) from None
    except RecursionError:
        return _load_yaml(text, filename, limits)  # reports the depth limit with a line
    try:
        _check_json_shape(data, limits)
    except TemplateError as exc:
        raise exc.located(file=filename) from None
    return data, source_map


def _duplicate_line(text: str, key: str) -> int | None:
    """The line of the second occurrence of ``"key":`` (good enough to point at the problem)."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    matches = list(pattern.finditer(text))
    if len(matches) < 2:
        return None
    return text.count("\n", 0, matches[1].start()) + 1
