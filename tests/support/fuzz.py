"""Mutated templates for fuzzing ``validate``: seeds from ``examples/`` and the test corpora,
changed by a seeded random sequence of structural and textual mutations.

A case is fully determined by (seed template, random seed, number of mutations), so a
failure found by the bench or by hypothesis is reproduced by ``make_case`` alone.
``run_case`` validates a case as ``converge validate`` does and says whether it ended in
success, a ``TemplateError`` (both fine) or anything else (a crash).
"""

from __future__ import annotations

import functools
import json
import random
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SEED_DIRECTORIES = (ROOT / "examples", ROOT / "tests" / "corpus", ROOT / "tests" / "fuzz" / "seeds")

# Every intrinsic function name of every HOT version, and some that are not.
FUNCTIONS = (
    "get_param", "get_resource", "get_attr", "get_file", "list_join", "str_replace",
    "str_replace_strict", "str_replace_vstrict", "str_split", "repeat", "digest",
    "resource_facade", "map_merge", "map_replace", "yaql", "equals", "not", "and", "or",
    "if", "contains", "filter", "make_url", "list_concat", "list_concat_unique",
    "Fn::Select", "Fn::GetAZs", "Ref", "Fn::GetAtt", "Fn::Join", "Fn::Split",
    "Fn::Replace", "Fn::Base64", "Fn::MemberListToMap", "Fn::ResourceFacade", "get_paramz",
)  # fmt: skip

_VERSIONS = (
    "2013-05-23", "2014-10-16", "2015-04-30", "2015-10-15", "2016-04-08", "2016-10-14",
    "2017-02-24", "2017-09-01", "2018-03-02", "2018-08-31", "2021-04-16", "wallaby",
    "2099-01-01", "2013-05-23x", 20130523,
)  # fmt: skip

_TYPES = (
    "OS::Heat::None", "OS::Heat::Value", "OS::Heat::TestResource", "OS::Heat::RandomString",
    "Dummy", "Local::File", "Local::Directory", "Local::Process", "PostgreSQL::Role",
    "server.yaml", "../outside.yaml", "file:///etc/passwd", "OS::Nova::Server", "My::Server",
    "OS::*", "",
)  # fmt: skip


def _nested(depth: int, leaf: Any, as_map: bool = False) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value} if as_map else [value]
    return value


def _interesting_values(rng: random.Random, names: list[str]) -> list[Any]:
    """Values that have broken parsers and evaluators before, plus names from the document."""
    name = rng.choice(names) if names else "x"
    many = [str(i) for i in range(rng.choice((3, 40, 400)))]
    return [
        None, True, False, 0, -1, 1.5, 10**30, float("inf"), "", " ", "\x00", "\t",
        "x" * rng.choice((100, 10_000, 200_000)), "%s", "{}", "[", "$x", "%a%", "é—😀",
        "yes", "no", "1,2,,3", "../../etc/passwd", "/etc/passwd", "a" * 30 + "!",
        name, [name], {name: name}, [], {}, [None], {"": None},
        _nested(rng.choice((50, 99, 101, 500)), "x"),
        _nested(rng.choice((50, 101)), "x", as_map=True),
        "[" * 5000 + "]" * 5000, '{"a": ' * 200 + "1" + "}" * 200,
        list(range(rng.choice((10, 5000)))),
        {"get_param": name}, {"get_param": [name, 0, "k"]}, {"get_param": "OS::stack_name"},
        {"get_resource": name}, {"get_attr": [name, "value"]}, {"get_attr": [name]},
        {"get_file": rng.choice(("server.yaml", "../x", "missing.txt", "file:///etc/hosts"))},
        {"if": [name, "a", "b"]}, {"if": [{"equals": [{"get_param": name}, "x"]}, 1]},
        {"equals": [{"get_param": name}, None]}, {"not": name}, {"and": [name, True]},
        {"repeat": {"template": "%a%%b%%c%", "for_each": {"%a%": many, "%b%": many, "%c%": many}}},
        {"repeat": {"template": {"x": "%a%"}, "for_each": {"%a%": {"get_param": name}}}},
        {"str_replace": {"template": "$a$a$a", "params": {"$a": "$a$a"}}},
        {"str_split": [",", "a,b", 5]}, {"list_join": [",", [{"get_attr": [name, "x"]}]]},
        {"map_merge": [{"a": 1}, {"get_param": name}]}, {"digest": ["sha999", "x"]},
        {"yaql": {"expression": "$.data", "data": 1}}, {"Fn::Select": [0, "[" * 3000]},
        {"filter": [[None], [1, None]]}, {"make_url": {"scheme": "http", "host": name}},
        {"list_concat_unique": [[1], [1]]}, {"contains": ["a", name]},
        {"allowed_pattern": "(a+)+$"}, {"allowed_pattern": "(a)\\1"}, {"length": {"min": "x"}},
        {"range": {"min": 10, "max": 1}}, {"modulo": {"step": 0, "offset": 0}},
        {"custom_constraint": "ip_addr"}, {"custom_constraint": name},
        {"type": rng.choice(_TYPES)}, {"type": "json", "default": "[" * 3000 + "]" * 3000},
        {"type": "string", "constraints": [{"allowed_pattern": "(a+)+$"}]},
        {"type": rng.choice(("string", "number", "json", "boolean", "comma_delimited_list"))},
        {"condition": name}, {"depends_on": [name, name]}, {"value": {"get_attr": [name]}},
    ]  # fmt: skip


@dataclass(frozen=True)
class Seed:
    """A template with what validating it needs: environments and a files map."""

    name: str
    template: str
    environments: tuple[tuple[str, str], ...] = ()
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    seed: str
    random_seed: int
    template: str
    environments: tuple[tuple[str, str], ...]
    files: dict[str, str]
    parameters: dict[str, str]
    mutations: tuple[str, ...]


def _is_template(text: str) -> bool:
    return any(
        key in text
        for key in (
            "heat_template_version",
            "AWSTemplateFormatVersion",
            "HeatTemplateFormatVersion",
        )
    )


def load_seeds() -> list[Seed]:
    """Every template under the seed directories, with the files next to it as its files map
    and, for ``x.yaml``, environments named ``x-*.env.yaml`` or ``env.yaml`` beside it."""
    seeds: list[Seed] = []
    for directory in SEED_DIRECTORIES:
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*")):
            if path.suffix not in (".yaml", ".json") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            if not _is_template(text):
                continue
            siblings = {
                other.name: other.read_text(encoding="utf-8")
                for other in sorted(path.parent.iterdir())
                if other.is_file() and other.suffix in (".yaml", ".json", ".txt", ".sh")
            }
            environments = tuple(
                (name, content)
                for name, content in siblings.items()
                if name == "env.yaml" or (name.startswith(path.stem) and ".env." in name)
            )
            name = str(path.relative_to(ROOT))
            seeds.append(Seed(name, text, environments, siblings))
    return seeds


# --- mutations --------------------------------------------------------------------------------


def _paths(data: Any) -> list[tuple[Any, ...]]:
    """The path of every node of a document (the root too), breadth first."""
    found: list[tuple[Any, ...]] = []
    pending: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while pending and len(found) < 20_000:
        node, path = pending.pop(0)
        found.append(path)
        if isinstance(node, dict):
            pending.extend((value, (*path, key)) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((value, (*path, index)) for index, value in enumerate(node))
    return found


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _names(data: Any) -> list[str]:
    names: list[str] = []
    if isinstance(data, dict):
        for section in ("parameters", "resources", "conditions", "outputs"):
            value = data.get(section)
            if isinstance(value, dict):
                names.extend(str(key) for key in value)
    return names


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = _get(data, path[:-1])
    parent[path[-1]] = value
    return data


def _mutate_data(data: Any, rng: random.Random, log: list[str]) -> Any:
    paths = _paths(data)
    path = rng.choice(paths)
    names = _names(data)
    kind = rng.choice(
        ("replace", "replace", "replace", "delete", "copy", "wrap", "rename", "version")
    )
    node = _get(data, path)
    if kind == "replace":
        value = rng.choice(_interesting_values(rng, names))
        log.append(f"replace {path} with {str(value)[:60]}")
        return _replace(data, path, value)
    if kind == "delete" and path:
        parent = _get(data, path[:-1])
        log.append(f"delete {path}")
        del parent[path[-1]]
        return data
    if kind == "copy":
        source = rng.choice(paths)
        log.append(f"copy {source} to {path}")
        return _replace(data, path, json.loads(json.dumps(_get(data, source), default=str)))
    if kind == "wrap":
        function = rng.choice(FUNCTIONS)
        value = rng.choice((node, [node], [node, node], [name for name in names[:3]]))
        log.append(f"wrap {path} in {function}")
        return _replace(data, path, {function: value})
    if kind == "rename" and path and isinstance(_get(data, path[:-1]), dict):
        parent = _get(data, path[:-1])
        new = rng.choice([*names, "x", "", "type", "properties", str(path[-1]) + "x"])
        log.append(f"rename {path} to {new!r}")
        parent[new] = parent.pop(path[-1])
        return data
    if isinstance(data, dict):
        version = rng.choice(_VERSIONS)
        log.append(f"version {version}")
        data["heat_template_version"] = version
    return data


_TEXT_INSERTS = (
    "\x00", "\t", ":", ": ", "- ", "{", "}", "[", "]", "&a ", "*a", "<<: *a", "!!python/object ",
    "!!binary ", "'", '"', "\n", "\n  ", "#", "%", "@", "`", "\ufeff", "\r", "---\n", "? ",
    "{get_param: x}", "~", "0x", "1e400", ".nan",
)  # fmt: skip


def _mutate_text(text: str, rng: random.Random, log: list[str]) -> str:
    if not text:
        return text
    position = rng.randrange(len(text))
    kind = rng.choice(("insert", "delete", "truncate", "duplicate", "indent"))
    if kind == "insert":
        insert = rng.choice(_TEXT_INSERTS)
        log.append(f"text insert {insert!r} at {position}")
        return text[:position] + insert + text[position:]
    if kind == "delete":
        log.append(f"text delete at {position}")
        return text[:position] + text[position + rng.randint(1, 20) :]
    if kind == "truncate":
        log.append(f"text truncate at {position}")
        return text[:position]
    lines = text.splitlines(keepends=True)
    index = rng.randrange(len(lines))
    if kind == "duplicate":
        log.append(f"text duplicate line {index + 1}")
        return "".join([*lines[: index + 1], lines[index], *lines[index + 1 :]])
    log.append(f"text indent line {index + 1}")
    return "".join([*lines[:index], "  " + lines[index], *lines[index + 1 :]])


def _dump(data: Any, rng: random.Random) -> str:
    if rng.random() < 0.15:
        return json.dumps(data, default=str)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def _load(text: str) -> Any:
    """The data of a YAML document, or None for one that does not load."""
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError):
        return None


def _mutated_document(text: str, rng: random.Random, count: int, log: list[str]) -> str:
    data = _load(text)
    structural = data is not None and rng.random() < 0.8
    if structural:
        for _ in range(count):
            data = _mutate_data(data, rng, log)
        try:
            text = _dump(data, rng)
        except (yaml.YAMLError, RecursionError, ValueError):
            log.append("(could not dump: text mutations instead)")
            structural = False
    if not structural or rng.random() < 0.2:
        for _ in range(count if not structural else 1):
            text = _mutate_text(text, rng, log)
    return text


def make_case(seed: Seed, random_seed: int, count: int) -> Case:
    """``count`` mutations of ``seed`` chosen by ``random_seed``: mostly in the template,
    sometimes in an environment or a file of the files map."""
    if count == 0:
        return Case(seed.name, random_seed, seed.template, seed.environments, seed.files, {}, ())
    rng = random.Random(random_seed)
    log: list[str] = []
    template = seed.template
    environments = list(seed.environments)
    files = dict(seed.files)
    target = rng.random()
    if target < 0.15 and environments:
        index = rng.randrange(len(environments))
        name, text = environments[index]
        log.append(f"in environment {name}:")
        environments[index] = (name, _mutated_document(text, rng, count, log))
    elif target < 0.25 and files:
        key = rng.choice(sorted(files))
        log.append(f"in file {key}:")
        files[key] = _mutated_document(files[key], rng, count, log)
    else:
        template = _mutated_document(template, rng, count, log)
    parameters: dict[str, str] = {}
    if rng.random() < 0.2:
        names = _names(_load(seed.template))
        if names:
            parameters[rng.choice(names)] = rng.choice(("", "x", "1", "[" * 2000, "a" * 30 + "!"))
            log.append(f"parameters {parameters}")
    return Case(
        seed.name, random_seed, template, tuple(environments), files, parameters, tuple(log)
    )


# --- running a case ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    kind: str  # "valid", "error" (a TemplateError: fine) or "crash"
    seconds: float
    detail: str = ""


Validator = Callable[[Case], object]


@functools.cache
def _settings() -> Any:
    """What ``converge validate`` checks plugins' values with: Local::* confined to a
    directory of its own (made once, empty)."""
    from converge.cli.inputs import embedded_settings

    return embedded_settings(str(Path(tempfile.mkdtemp(prefix="converge-fuzz-")) / "s.db"))


def validate_case(case: Case) -> object:
    """Validate ``case`` as ``converge validate`` does (template checks, then each plugin's
    checks of the values known, Local::* paths confined to an empty directory): with parameter
    values optional for even random seeds; for odd ones required and, once prepared, every
    property and output evaluated with made-up resource data, as ``apply`` would."""
    import datetime

    from converge.core.template import (
        StackIdentity,
        load_environment,
        load_template,
        merge_environments,
    )
    from converge.engine.validation import prepare_definition
    from converge.resources.registry import default_registry

    template = load_template(case.template, "fuzz.yaml")
    environments = [load_environment(text, name) for name, text in case.environments]
    definition = prepare_definition(
        template,
        environment=merge_environments(environments),
        parameters=case.parameters,
        files=case.files,
        identity=StackIdentity("fuzz", "fuzz-id", "fuzz-project"),
        registry=default_registry(),
        settings=_settings(),
        now=datetime.datetime.now(datetime.UTC),
        require_values=case.random_seed % 2 == 1,
    )
    if case.random_seed % 2 == 1:
        # as apply would, once every resource has reported (any shape of attribute value)
        data = _ReportedData(case.random_seed)
        for resource in definition.resources.values():
            resource.resolve_properties(data)
            resource.resolve_metadata(data)
        for output in definition.outputs.values():
            output.resolve(data)
    return definition


class _ReportedData:
    """What converged resources might report: ids, and attributes of any JSON shape."""

    _VALUES = (None, "", "x", 0, 1.5, True, [], ["a", 1], {}, {"k": ["v"]}, "[1]")

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def reference_id(self, name: str) -> Any:
        return f"{name}-id"

    def attributes(self, name: str) -> Any:
        return _AnyAttribute(self._rng, self._VALUES)


class _AnyAttribute(dict[str, Any]):
    """Every attribute name has a value, drawn from ``values``."""

    def __init__(self, rng: random.Random, values: tuple[Any, ...]) -> None:
        super().__init__()
        self._rng = rng
        self._values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self._rng.choice(self._values)

    def __missing__(self, key: str) -> Any:
        return self._rng.choice(self._values)


def run_case(case: Case, validator: Validator = validate_case) -> Outcome:
    from converge.errors import TemplateError

    started = time.perf_counter()
    try:
        validator(case)
    except TemplateError as exc:
        return Outcome("error", time.perf_counter() - started, exc.format().splitlines()[0])
    except Exception:  # anything else is what the fuzzing looks for
        return Outcome("crash", time.perf_counter() - started, traceback.format_exc())
    return Outcome("valid", time.perf_counter() - started)


def describe(case: Case) -> str:
    """How to reproduce ``case``, for a failure message."""
    steps = "\n  ".join(case.mutations)
    return f"seed {case.seed}, random seed {case.random_seed}:\n  {steps}"
