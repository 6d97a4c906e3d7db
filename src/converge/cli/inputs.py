"""What ``apply`` and ``plan`` read from disk: template, environments, the files map, parameters.

The files map holds what the template fetches with ``get_file`` and the provider templates
that the template (``type: nested.yaml``) or an environment (``resource_registry``) name.
Each is keyed by the reference exactly as written and read relative to the directory of
the file that references it, wherever that leads (``../common/ports.yaml``, an absolute
path, ``file://``), as python-heatclient's ``template_utils`` does: this is the client
side, run by the user on their own files. The server side never reads files: it has only
the request's files map. Other URLs (``http://``) are refused: there is no network here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge.core.template.environment import is_provider_template
from converge.core.template.loader import load_document
from converge.core.template.nodes import Where
from converge.errors import TemplateError, TemplateErrors

if TYPE_CHECKING:
    from converge.engine.settings import EngineSettings

# Environment registry keys whose values are not provider templates.
_NOT_PROVIDERS = frozenset({"base_url", "hooks", "restricted_actions"})


@dataclass(frozen=True)
class SourceFile:
    """A file given on the command line: its text and the name errors should use."""

    text: str
    filename: str
    directory: Path


@dataclass(frozen=True)
class Inputs:
    template: SourceFile
    environments: tuple[SourceFile, ...]
    files: Mapping[str, str]
    parameters: Mapping[str, str] = field(default_factory=dict)


def read_source(path: str | os.PathLike[str]) -> SourceFile:
    """Read a template or environment file; a missing or unreadable one is a TemplateError."""
    shown = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TemplateError("no such file", file=shown) from None
    except UnicodeDecodeError as exc:
        raise TemplateError(f"not UTF-8 text ({exc.reason})", file=shown) from None
    except OSError as exc:
        raise TemplateError(f"cannot read the file: {exc.strerror}", file=shown) from None
    return SourceFile(text, shown, Path(path).resolve().parent)


def embedded_settings(state: str) -> EngineSettings:
    """Settings of the CLI's engine: Local::* types may touch only the state's directory.

    A database URL (``postgresql://…``) has no directory: there, Local::* paths may lie
    only in ``CONVERGE_ALLOWED_ROOTS`` (directories separated by ``:``; none if unset),
    and the built-in test types keep their simulated world in ``CONVERGE_TEST_WORLD``
    (a file every process of the deployment shares; none if unset). Here, not with the
    commands that run the engine, so ``validate`` reads them cheaply.
    """
    from converge.engine.settings import EngineSettings

    plugin_settings = {}
    if os.environ.get("CONVERGE_POSTGRES_URL"):
        plugin_settings["postgres_url"] = os.environ["CONVERGE_POSTGRES_URL"]
    if "://" not in state:
        return EngineSettings(
            allowed_roots=(Path(state).resolve().parent,), plugin_settings=plugin_settings
        )
    roots = os.environ.get("CONVERGE_ALLOWED_ROOTS", "")
    if os.environ.get("CONVERGE_TEST_WORLD"):
        from converge.resources.builtin.world import SETTING

        plugin_settings[SETTING] = str(Path(os.environ["CONVERGE_TEST_WORLD"]).resolve())
    return EngineSettings(
        allowed_roots=tuple(Path(root).resolve() for root in roots.split(os.pathsep) if root),
        plugin_settings=plugin_settings,
    )


def parse_parameters(pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` pairs into a mapping; a value may contain ``=``; the last key wins."""
    parameters: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        parameters[key] = value
    return parameters


def read_inputs(
    template_path: str | os.PathLike[str],
    environment_paths: Sequence[str | os.PathLike[str]] = (),
    parameter_pairs: Sequence[str] = (),
) -> Inputs:
    """Read everything ``apply``/``plan`` needs; every file problem names the file and line."""
    parameters = parse_parameters(parameter_pairs)
    template = read_source(template_path)
    environments = tuple(read_source(path) for path in environment_paths)
    collector = _FilesCollector()
    errors: list[TemplateError] = []
    for source, is_environment in [(template, False), *((e, True) for e in environments)]:
        try:
            collector.collect(source, is_environment=is_environment)
        except TemplateError as error:
            errors.append(error)
    TemplateErrors.raise_if_any(errors)
    return Inputs(template, environments, dict(collector.files), parameters)


class _FilesCollector:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self._origin: dict[str, Path] = {}
        self._visited: set[Path] = set()

    def collect(self, source: SourceFile, *, is_environment: bool) -> None:
        data, source_map = load_document(source.text, source.filename)
        where = Where(source.filename, (), source_map)
        references = (
            _environment_references(data, where)
            if is_environment
            else _template_references(data, where)
        )
        errors: list[TemplateError] = []
        for reference, place, is_template in sorted(references, key=lambda r: r[1].line or 0):
            try:
                self._add(reference, place, source.directory, is_template)
            except TemplateError as error:
                errors.append(error)
        TemplateErrors.raise_if_any(errors)

    def _add(self, reference: str, where: Where, directory: Path, is_template: bool) -> None:
        if "://" in reference and not reference.startswith("file://"):
            raise where.error(
                f"{reference!r} is not a local file: converge reads only files on this machine"
            )
        path = (directory / reference.removeprefix("file://")).resolve()
        if not path.is_file():
            raise where.error(f"no file {reference!r} (looked for {path})")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise where.error(f"cannot read {reference!r}: {exc}") from None
        known = self._origin.get(reference)
        if known is not None and known != path:
            raise where.error(
                f"{reference!r} names two different files ({known} and {path}); "
                "give them different names"
            )
        self.files[reference] = text
        self._origin[reference] = path
        if is_template and path not in self._visited:
            self._visited.add(path)
            nested = SourceFile(text, _shown(path), path.parent)
            self.collect(nested, is_environment=False)


def _shown(path: Path) -> str:
    """The path relative to the working directory when it is below it (shorter messages)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _template_references(data: Any, where: Where) -> Iterator[tuple[str, Where, bool]]:
    """``get_file`` arguments, and ``type`` values that are template files, anywhere.

    Anywhere, as python-heatclient does, so a ResourceGroup's ``resource_def`` is covered.
    An explicit stack, not recursion: templates may nest deeply.
    """
    stack: list[tuple[Any, Where]] = [(data, where)]
    while stack:
        value, place = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if key == "get_file" and isinstance(child, str) and len(value) == 1:
                    yield child, place.child(key), False
                elif key == "type" and isinstance(child, str) and is_provider_template(child):
                    yield child, place.child(key), True
                else:
                    stack.append((child, place.child(key)))
        elif isinstance(value, list):
            stack.extend((child, place.child(index)) for index, child in enumerate(value))


def _environment_references(data: Any, where: Where) -> Iterator[tuple[str, Where, bool]]:
    """Provider templates in ``resource_registry``, including per-resource entries."""
    if not isinstance(data, dict) or not isinstance(data.get("resource_registry"), dict):
        return
    stack: list[tuple[Mapping[str, Any], Where]] = [
        (data["resource_registry"], where.child("resource_registry"))
    ]
    while stack:
        registry, place = stack.pop()
        for key, value in registry.items():
            if key in _NOT_PROVIDERS:
                continue
            if isinstance(value, dict):
                stack.append((value, place.child(key)))
            elif isinstance(value, str) and is_provider_template(value):
                yield value, place.child(key), True
