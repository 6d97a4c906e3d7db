"""Local::Process: a long-running service started from a command list (never a shell string).

The service is started detached (its own session, output to the log file) and outlives the
engine. It is known by pid, start time and command line, so a recycled pid is never taken
for it; its environment carries a marker naming the resource row, so an interrupted create
adopts the process it already started instead of starting a second one. Any change of what
runs (command, environment, directory, log) replaces it: the engine starts the new process
before this one is stopped. Stopping is graceful: SIGTERM to the process group, SIGKILL
after ``stop_grace_secs``. A create succeeds only once the process proves it runs
(``Readiness``): it listens on ``ready_port`` itself, ``ready_file`` exists, or it has lived
long enough; one that dies first, or is not ready in time, fails the create with its log.

The service's environment is a small base taken from the engine (PATH, HOME, locale, …)
plus the ``environment`` property; nothing else of the engine's environment leaks into it.

Starting and stopping (asyncio, signals) are in ``process_control.py``, imported by the
actions that need them: ``converge validate`` imports this module for its schema alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge.core.schema import AttributeSchema, Constraint, PropertySchema, PropertyType
from converge.errors import PermanentFailure
from converge.resources.base import (
    AppliedState,
    Outcome,
    ResourceContext,
    ResourcePlugin,
    ValidationContext,
)
from converge.resources.local import procfs
from converge.resources.local.paths import ConfinementError, confine

BASE_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
# Without a readiness check, how long a process must live to count as started: long enough
# for an interpreter to import its program and fail on a taken port on a busy machine.
DEFAULT_MIN_UPTIME = 1.5
DEFAULT_READY_TIMEOUT = 30.0


class LocalProcess(ResourcePlugin):
    type_name = "Local::Process"
    bound_to_host = True
    description = "A long-running process on this machine, started detached from converge."
    properties_schema = {
        "command": PropertySchema(
            PropertyType.LIST,
            "The program and its arguments (a list: no shell is involved).",
            required=True,
            constraints=(Constraint("length", {"min": 1}),),
            item_schema=PropertySchema(PropertyType.STRING),
        ),
        "environment": PropertySchema(
            PropertyType.MAP,
            "Environment variables added to a small base (PATH, HOME, locale).",
            default={},
        ),
        "working_directory": PropertySchema(
            PropertyType.STRING,
            "Directory to run in; relative paths start at the first allowed root.",
            default=".",
        ),
        "log_file": PropertySchema(
            PropertyType.STRING,
            "File receiving the process's output (appended); none: output is discarded.",
        ),
        "stop_grace_secs": PropertySchema(
            PropertyType.NUMBER,
            "Seconds between SIGTERM and SIGKILL when stopping.",
            default=10,
            constraints=(Constraint("range", {"min": 0}),),
            update_allowed=True,
        ),
        "startup_check_secs": PropertySchema(
            PropertyType.NUMBER,
            "The process must still run this long after starting for create to succeed "
            f"(default {DEFAULT_MIN_UPTIME:g} s, or 0 when ready_port or ready_file is given).",
            constraints=(Constraint("range", {"min": 0, "max": 60}),),
            update_allowed=True,
        ),
        "ready_port": PropertySchema(
            PropertyType.INTEGER,
            "Create succeeds once the process itself listens on this TCP port.",
            constraints=(Constraint("range", {"min": 1, "max": 65535}),),
            update_allowed=True,
        ),
        "ready_file": PropertySchema(
            PropertyType.STRING,
            "Create succeeds once this file exists; relative paths start at the first "
            "allowed root.",
            update_allowed=True,
        ),
        "ready_timeout_secs": PropertySchema(
            PropertyType.NUMBER,
            "How long create waits for ready_port or ready_file before it fails.",
            default=DEFAULT_READY_TIMEOUT,
            constraints=(Constraint("range", {"min": 0, "max": 3600}),),
            update_allowed=True,
        ),
    }
    attributes_schema = {
        "pid": AttributeSchema("The process id.", PropertyType.INTEGER),
        "started_at": AttributeSchema(
            "When the process started (ISO 8601, UTC).", PropertyType.STRING
        ),
    }

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        roots = ctx.allowed_roots
        cwd: Path | None = None
        # Absent here may mean "given by a function, known later": then it is checked at start.
        if isinstance(properties.get("working_directory"), str):
            try:
                cwd = confine(properties["working_directory"], roots, allow_root=True)
            except ConfinementError as exc:
                problems.append(("working_directory", str(exc)))
        for name in ("log_file", "ready_file"):
            if isinstance(properties.get(name), str):
                try:
                    confine(properties[name], roots)
                except ConfinementError as exc:
                    problems.append((name, str(exc)))
        environment = properties.get("environment")
        if isinstance(environment, Mapping):
            problems.extend(
                ("environment", message) for message in _environment_problems(environment)
            )
        command = properties.get("command")
        if isinstance(command, list):
            problems.extend(("command", message) for message in _command_problems(command))
        program = command[0] if isinstance(command, list) and command else None
        # A relative program path needs the directory: wait for it when it is not known yet.
        if isinstance(program, str) and (
            cwd is not None or "/" not in program or program.startswith("/")
        ):
            env_path = environment.get("PATH") if isinstance(environment, Mapping) else None
            try:
                resolve_executable(program, cwd, env_path)
            except ValueError as exc:
                problems.append(("command", str(exc)))
        return problems

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        from converge.resources.local import process_control as control

        spec = launch_spec(ctx, properties)
        digest = spec["env"][procfs.SPEC_VARIABLE]
        grace = float(properties.get("stop_grace_secs") or 0)
        for found, found_digest in await control.find_marked(ctx.physical_name):
            if found_digest == digest:
                ctx.logger.info("adopting process %s started by an interrupted create", found.pid)
                return Outcome(found.physical_id, found.as_data())
            await control.stop(found, grace)
        ready = readiness(ctx, properties)
        identity = await control.launch(ctx, spec)
        identity = await control.await_ready(ctx, identity, spec, ready, grace)
        return Outcome(identity.physical_id, identity.as_data())

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        # Only the stop grace and startup check may change in place: nothing to do now.
        return Outcome(current.physical_id, current.data)

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        from converge.resources.local import process_control as control

        grace = float(current.properties.get("stop_grace_secs") or 0)
        identity = procfs.identity_of(current.data)
        if identity is not None:
            await control.stop(identity, grace)
        # An interrupted create may have started one without recording it.
        for found, _ in await control.find_marked(ctx.physical_name):
            await control.stop(found, grace)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        identity = procfs.identity_of(current.data)
        if identity is None or not procfs.is_running(identity):
            return None
        return dict(current.properties)

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        values = {"pid": current.data.get("pid"), "started_at": current.data.get("started_at")}
        return {name: values[name] for name in names if name in values}

    def watch(self, ctx: Any, managed: Mapping[str, AppliedState]) -> Any:
        from converge.resources.local.watch import ProcessWatcher

        return ProcessWatcher(managed).changes()


def _environment_problems(environment: Mapping[str, Any]) -> list[str]:
    problems = []
    for key, value in environment.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            problems.append(f"{key!r} is not a valid environment variable name")
        elif key in (procfs.MARKER_VARIABLE, procfs.SPEC_VARIABLE):
            problems.append(f"{key} is reserved: converge marks its processes with it")
        elif not isinstance(value, str | int | float) or isinstance(value, bool):
            problems.append(f"{key}: expected a string value")
        elif "\0" in str(value):
            problems.append(f"{key}: the value contains a NUL byte, which no process can receive")
    return problems


def _command_problems(command: list[Any]) -> list[str]:
    # execve takes C strings: a NUL would make the start fail inside the launcher's child.
    return [
        f"item {index} contains a NUL byte, which no process can receive"
        for index, part in enumerate(command)
        if isinstance(part, str) and "\0" in part
    ]


def resolve_executable(program: str, cwd: Path | None, path: str | None) -> str:
    """The absolute executable for ``program``; ``ValueError`` when there is none."""
    if "/" in program:
        candidate = Path(program)
        if not candidate.is_absolute():
            if cwd is None:
                raise ValueError(f"cannot resolve {program!r} without a working directory")
            candidate = cwd / candidate
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise ValueError(f"{program!r} is not an executable file")
    found = shutil.which(program, path=path if path is not None else os.environ.get("PATH"))
    if found is None:
        raise ValueError(f"command {program!r} was not found on PATH")
    return found


def launch_spec(ctx: ResourceContext, properties: Mapping[str, Any]) -> dict[str, Any]:
    """What the launcher needs, checked again here: late values were not validated."""
    try:
        cwd = confine(
            properties.get("working_directory") or ".", ctx.allowed_roots, allow_root=True
        )
        log_file = properties.get("log_file")
        log = str(confine(log_file, ctx.allowed_roots)) if log_file else os.devnull
        environment = dict(properties.get("environment") or {})
        problems = _environment_problems(environment)
        if problems:
            raise ValueError("environment: " + "; ".join(problems))
        argv = [str(part) for part in properties["command"]]
        if not argv:
            raise ValueError("command: expected at least the program")
        problems = _command_problems(argv)
        if problems:
            raise ValueError("command: " + "; ".join(problems))
        executable = resolve_executable(argv[0], cwd, environment.get("PATH"))
    except (ConfinementError, ValueError) as exc:
        raise PermanentFailure(f"{ctx.resource_name}: {exc}") from None
    if not cwd.is_dir():
        raise PermanentFailure(f"{ctx.resource_name}: working directory {cwd} does not exist")
    env = {key: os.environ[key] for key in BASE_VARIABLES if key in os.environ}
    env.update({key: str(value) for key, value in environment.items()})
    env[procfs.MARKER_VARIABLE] = ctx.physical_name
    asked = json.dumps([argv, env, str(cwd), log], sort_keys=True).encode()
    env[procfs.SPEC_VARIABLE] = hashlib.sha256(asked).hexdigest()[:16]
    return {"executable": executable, "argv": argv, "env": env, "cwd": str(cwd), "log": log}


def readiness(ctx: ResourceContext, properties: Mapping[str, Any]) -> Readiness:
    """What proves the process started, from its properties (late values checked here)."""
    ready_file = properties.get("ready_file")
    try:
        path = confine(ready_file, ctx.allowed_roots) if ready_file else None
    except ConfinementError as exc:
        raise PermanentFailure(f"{ctx.resource_name}: ready_file: {exc}") from None
    port = properties.get("ready_port")
    uptime = properties.get("startup_check_secs")
    if uptime is None:
        uptime = 0.0 if port is not None or path is not None else DEFAULT_MIN_UPTIME
    return Readiness(
        port=None if port is None else int(port),
        file=path,
        min_uptime=float(uptime),
        timeout=float(properties.get("ready_timeout_secs", DEFAULT_READY_TIMEOUT)),
    )


@dataclass(frozen=True)
class Readiness:
    """A started process counts as running once it has lived ``min_uptime`` seconds and,
    when given, listens on ``port`` and ``file`` exists; both within ``timeout``."""

    port: int | None
    file: Path | None
    min_uptime: float
    timeout: float

    def missing(self, identity: procfs.ProcessIdentity) -> str | None:
        """What is not there yet (a phrase for the error), or None when ready."""
        if self.port is not None and not procfs.is_listening(identity.pid, self.port):
            return f"it does not listen on port {self.port}"
        if self.file is not None and not self.file.exists():
            return f"{self.file} does not exist"
        return None
