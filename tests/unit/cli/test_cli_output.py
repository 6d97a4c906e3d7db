"""CLI rendering, the error boundary's table and the progress follower, with fake views."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from converge.cli import output
from converge.cli.boundary import Session, error_lines, exit_code, run_command
from converge.cli.logging_setup import JsonLinesFormatter, logging_to_stderr
from converge.cli.progress import (
    STACK_TYPE,
    OperationProgress,
    Outcome,
    ProgressRow,
    counts,
    follow,
    live_table,
)
from converge.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    StoreError,
    TemplateError,
    TemplateErrors,
)
from converge.views import EventView, ResourceView, StackView


def stack(status: str, *, reason: str = "", disable_rollback: bool = False) -> StackView:
    return StackView(
        id="s-1",
        stack_name="demo",
        stack_status=status,
        stack_status_reason=reason,
        creation_time="2026-01-01T00:00:00Z",
        updated_time=None,
        disable_rollback=disable_rollback,
        timeout_mins=None,
        drift_policy="notify",
        tags=[],
        outputs=[{"output_key": "o", "output_value": {"a": 1}, "description": "an output"}],
        parameters={"p": "v"},
    )


def resource(name: str, status: str, index: int = 1) -> ResourceView:
    return ResourceView(
        resource_name=name,
        logical_resource_id=name,
        physical_resource_id=f"phys-{name}",
        resource_type="OS::Heat::None",
        resource_status=status,
        resource_status_reason="",
        updated_time=None,
        creation_time=None,
        required_by=[],
        drift_status="IN_SYNC",
        attributes={},
        properties={},
        id=index,
    )


def event(
    index: int, name: str, status: str, reason: str = "", kind: str = "OS::Heat::None"
) -> EventView:
    return EventView(
        id=index,
        event_time=f"2026-01-01T00:00:0{index % 10}Z",
        resource_name=name,
        logical_resource_id=name,
        physical_resource_id="",
        resource_type=kind,
        resource_status=status,
        resource_status_reason=reason,
    )


def render(renderable: Any) -> str:
    console = Console(width=200, no_color=True, record=True)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


# --- tables ---------------------------------------------------------------------------------


def test_tables_carry_heat_field_values() -> None:
    text = render(output.stack_table(stack("CREATE_COMPLETE").as_dict()))
    assert "CREATE_COMPLETE" in text and "parameters.p" in text
    rows = output.dicts([resource("web", "CREATE_COMPLETE")])
    assert "phys-web" in render(output.resources_table(rows))
    assert '{"a": 1}' in render(output.outputs_table(stack("CREATE_COMPLETE").outputs))
    line = render(output.event_line(event(3, "web", "CREATE_FAILED", "boom").as_dict()))
    assert "00:00:03  web  CREATE_FAILED  boom" in line


def test_plan_summary_counts_each_action() -> None:
    changes = [
        {
            "action": a,
            "resource_name": n,
            "resource_type": "T",
            "reason": "",
            "changed_properties": [],
        }
        for a, n in [
            ("CREATE", "a"),
            ("CREATE", "b"),
            ("REPLACE", "c"),
            ("DELETE", "d"),
            ("NOTHING", "e"),
        ]
    ]
    assert output.plan_summary(changes) == (
        "Plan: 2 to create, 0 to update, 1 to replace, 1 to delete, 1 unchanged."
    )
    text = render(output.plan_table(changes))
    assert text.index("CREATE") < text.index("REPLACE") < text.index("DELETE")


def test_short_value_truncates_long_values() -> None:
    assert output.short_value("x" * 10, limit=5) == "xxxx…"
    assert output.short_value([1, 2]) == "[1, 2]"


# --- the error boundary ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TemplateError("bad"), 1),
        (InvalidRequest("bad"), 2),
        (NotFound("gone"), 3),
        (Conflict("busy"), 4),
        (StoreError("down"), 5),
    ],
)
def test_exit_codes(error: Exception, code: int) -> None:
    assert exit_code(error) == code  # type: ignore[arg-type]


def test_every_template_problem_is_its_own_line() -> None:
    errors = TemplateErrors(
        [
            TemplateError(
                "unknown property", file="t.yaml", line=4, path="resources.a.properties.x"
            ),
            TemplateError("bad type", file="t.yaml", line=9, path="resources.b.type"),
        ]
    )
    assert error_lines(errors) == [
        "t.yaml:4: resources.a.properties.x: unknown property",
        "t.yaml:9: resources.b.type: bad type",
        "2 problems found; nothing was changed",
    ]


def _command(body: Any, debug: bool = False) -> click.Command:
    @click.command()
    def cmd() -> None:
        run_command(body, debug=debug, log_json=False)

    return cmd


def test_boundary_prints_one_line_and_keeps_the_traceback_for_debug() -> None:
    async def body(session: Session) -> int:
        raise NotFound("stack 'x' not found")

    result = CliRunner().invoke(_command(body))
    assert result.exit_code == 3
    assert result.stderr == "error: stack 'x' not found\n"
    debug = CliRunner().invoke(_command(body, debug=True))
    assert debug.exit_code == 3
    assert "Traceback" in debug.stderr and "error: stack 'x' not found" in debug.stderr


def test_a_bug_is_reported_as_such() -> None:
    async def body(session: Session) -> int:
        raise ZeroDivisionError("oops")

    result = CliRunner().invoke(_command(body))
    assert result.exit_code == 70
    assert "internal error (ZeroDivisionError: oops)" in result.stderr
    assert "Traceback" not in result.stderr


def test_interrupt_says_what_happens_next() -> None:
    async def body(session: Session) -> int:
        session.interrupt_message = "interrupted: resumes on the next apply"
        raise KeyboardInterrupt

    result = CliRunner().invoke(_command(body))
    assert result.exit_code == 130
    assert result.stderr == "interrupted: resumes on the next apply\n"


def test_logging_is_restored_and_json_lines_keep_extra_fields() -> None:
    logger = logging.getLogger("converge")
    before = (logger.level, list(logger.handlers))
    records: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            records.append(text)

        def flush(self) -> None:
            pass

    with logging_to_stderr(debug=True, log_json=True, stream=Sink()):  # type: ignore[arg-type]
        logging.getLogger("converge.engine").info("started", extra={"stack": "demo"})
    assert (logger.level, list(logger.handlers)) == before
    document = json.loads("".join(records))
    assert document["message"] == "started" and document["stack"] == "demo"
    assert document["level"] == "info" and document["logger"] == "converge.engine"
    assert isinstance(JsonLinesFormatter(), logging.Formatter)


# --- progress -------------------------------------------------------------------------------


def test_progress_counts_only_this_operations_events() -> None:
    # An update: every row still says CREATE_COMPLETE from the create before it.
    resources = [resource(name, "CREATE_COMPLETE", i) for i, name in enumerate("abcdefgh")]
    progress = OperationProgress("demo")
    progress.add(event(1, "demo", "UPDATE_IN_PROGRESS", "Stack UPDATE started", STACK_TYPE))
    progress.add(event(2, "a", "UPDATE_IN_PROGRESS", "state changed"))
    rows = progress.rows(resources, settled=False)
    assert counts(rows) == (0, 8)  # not 7/8: the old CREATE_COMPLETEs are not this update's
    assert {r.name: r.status for r in rows}["b"] == "WAITING"
    progress.add(event(3, "a", "UPDATE_COMPLETE", "state changed"))
    assert counts(progress.rows(resources, settled=False)) == (1, 8)
    # Settled: what this operation did not touch is unchanged, and counts as done.
    assert counts(progress.rows(resources, settled=True)) == (8, 8)


def test_a_long_chain_says_waiting_for_what_has_not_started() -> None:
    resources = [resource(f"r{i:02}", "INIT_COMPLETE", i) for i in range(30)]
    progress = OperationProgress("chain")
    for i in range(5):
        progress.add(event(2 * i, f"r{i:02}", "CREATE_COMPLETE"))
    progress.add(event(99, "r05", "CREATE_IN_PROGRESS"))
    text = render(live_table(progress.rows(resources, settled=False)))
    assert "r05" in text and "r01" not in text
    assert "24 waiting, 5 done" in text and "settled" not in text


def test_a_resource_paused_at_a_hook_shows_how_to_resume_it() -> None:
    progress = OperationProgress("demo")
    paused = event(1, "db", "INIT_COMPLETE", "CREATE paused until Hook pre-create is cleared")
    progress.add(paused)
    (row,) = progress.rows([resource("db", "INIT_COMPLETE")], settled=False)
    assert row.status == "PAUSED"
    assert row.reason == "at pre-create: converge hook clear demo db pre-create"
    assert counts([row]) == (0, 1)
    text = render(live_table([row]))
    assert "PAUSED" in text and "converge hook clear demo db pre-create" in text


class FakeEngine:
    def __init__(self) -> None:
        self.idle_calls = 0

    async def idle(self) -> None:
        self.idle_calls += 1


class FakeConverge:
    """Replays a script of stack states; events appear with them."""

    def __init__(self, script: Sequence[tuple[StackView, list[EventView]]]) -> None:
        self.script = list(script)
        self.step = 0
        self.engine = FakeEngine()
        self.events: list[EventView] = []

    async def get_stack(self, stack_id: str, *, include_deleted: bool = False) -> StackView:
        view, new_events = self.script[min(self.step, len(self.script) - 1)]
        if self.step < len(self.script):
            self.events.extend(new_events)
        self.step += 1
        return view

    async def list_events(self, stack_id: str, *, after_id: int | None = None) -> list[EventView]:
        return [e for e in self.events if after_id is None or e.id > after_id]

    async def list_resources(self, stack_id: str) -> list[ResourceView]:
        return [resource("web", "CREATE_COMPLETE")]


class Recorder:
    def __init__(self) -> None:
        self.events: list[int] = []

    def resources(self, rows: Sequence[ProgressRow]) -> None:
        pass

    def event(self, event: EventView) -> None:
        self.events.append(event.id)

    def close(self) -> None:
        pass


async def test_follow_prints_each_event_once_and_waits_through_a_rollback() -> None:
    script = [
        (
            stack("CREATE_IN_PROGRESS"),
            [event(1, "demo", "CREATE_IN_PROGRESS", kind="OS::Heat::Stack")],
        ),
        (stack("CREATE_IN_PROGRESS"), [event(2, "web", "CREATE_FAILED", "boom")]),
        # Failed for a moment: the rollback has not started yet.
        (
            stack("CREATE_FAILED"),
            [event(3, "demo", "CREATE_FAILED", "Resource failed: boom", kind="OS::Heat::Stack")],
        ),
        (
            stack("ROLLBACK_IN_PROGRESS"),
            [event(4, "demo", "ROLLBACK_IN_PROGRESS", kind="OS::Heat::Stack")],
        ),
        (stack("ROLLBACK_COMPLETE", reason="Stack ROLLBACK completed successfully"), []),
    ]
    cv = FakeConverge(script)
    recorder = Recorder()
    outcome: Outcome = await follow(cv, "s-1", recorder, poll=0.001)  # type: ignore[arg-type]
    assert outcome.stack.stack_status == "ROLLBACK_COMPLETE"
    assert recorder.events == [1, 2, 3, 4]
    assert outcome.failure_reason == "Resource failed: boom"


async def test_follow_stops_at_a_failure_that_does_not_roll_back() -> None:
    script: list[tuple[StackView, list[EventView]]] = [
        (stack("CREATE_FAILED", reason="boom", disable_rollback=True), [])
    ]
    cv = FakeConverge(script)
    outcome = await follow(cv, "s-1", Recorder(), poll=0.001)  # type: ignore[arg-type]
    assert outcome.stack.stack_status == "CREATE_FAILED"
    assert outcome.failure_reason == "boom"
    assert cv.engine.idle_calls == 1


def test_live_display_draws_events_resources_and_progress() -> None:
    from io import StringIO

    from converge.cli.progress import LiveDisplay

    buffer = StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    display = LiveDisplay(console, "create demo", "demo")
    progress = OperationProgress("demo")
    progress.add(event(1, "a", "CREATE_COMPLETE", "state changed"))
    progress.add(event(2, "b", "CREATE_IN_PROGRESS", "state changed"))
    display.resources(
        progress.rows(
            [resource("a", "CREATE_COMPLETE", 1), resource("b", "CREATE_IN_PROGRESS", 2)],
            settled=False,
        )
    )
    display.event(event(1, "a", "CREATE_COMPLETE", "state changed"))
    display.close()
    text = buffer.getvalue()
    assert "a  CREATE_COMPLETE  state changed" in text
    assert "create demo" in text and "1/2" in text and "CREATE_IN_PROGRESS" in text


async def test_follow_gives_a_rollback_a_moment_to_start_then_stops() -> None:
    script: list[tuple[StackView, list[EventView]]] = [(stack("UPDATE_FAILED", reason="boom"), [])]
    cv = FakeConverge(script)
    outcome = await follow(cv, "s-1", Recorder(), poll=0.001, rollback_grace=0.02)  # type: ignore[arg-type]
    assert outcome.stack.stack_status == "UPDATE_FAILED"
    assert cv.engine.idle_calls > 1  # looked again during the grace period
