"""The store contract, on SQLite and PostgreSQL: compare-and-swap, claims, sync points."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import StatementError

from converge.adapters.sql.stacks import UNUSED_TEMPLATE_KEPT
from converge.adapters.sql.store import SqlStore
from converge.core.states import Action, Status
from converge.core.traversal import STACK_NODE, GraphNode
from converge.errors import Conflict, NotFound
from converge.records import NewEvent, NewResource, NewTemplate, ResourceRecord, ServiceRecord
from support.store_rows import named, new_stack, stack_with_rows


async def test_stack_names_are_unique_among_live_stacks(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    with pytest.raises(Conflict, match="a stack named 's' already exists"):
        await new_stack(store)
    await store.mark_stack_deleted(stack_id)
    again = await new_stack(store)
    assert again != stack_id
    with pytest.raises(NotFound):
        await store.get_stack("no-such-id")
    found = await store.find_stack("s", "p")
    assert found.id == again


async def test_find_stack_by_name_or_id_in_its_project(store: SqlStore) -> None:
    first = await new_stack(store)
    await store.mark_stack_deleted(first)
    with pytest.raises(NotFound, match="stack 's' not found"):
        await store.find_stack("s", "p")
    assert (await store.find_stack("s", "p", include_deleted=True)).id == first
    assert (await store.find_stack(first, "p", include_deleted=True)).deleted
    second = await new_stack(store)
    # By name: the live one; with the deleted ones too: the newest.
    assert (await store.find_stack("s", "p")).id == second
    await store.mark_stack_deleted(second)
    found = await store.find_stack("s", "p", include_deleted=True)
    assert found.id == second and found.deleted and found.name == "s"
    assert (await store.find_stack(first, "p", include_deleted=True)).id == first
    with pytest.raises(NotFound):
        await store.find_stack(first, "other-project", include_deleted=True)
    with pytest.raises(NotFound):
        await store.find_stack("t", "p", include_deleted=True)


async def test_stack_compare_and_swap(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    first = await store.update_stack(
        stack_id, {"status_reason": "one"}, expected_key=stack.atomic_key
    )
    second = await store.update_stack(
        stack_id, {"status_reason": "two"}, expected_key=stack.atomic_key
    )
    assert first is not None and second is None
    assert (await store.get_stack(stack_id)).status_reason == "one"


async def test_start_traversal_is_atomic(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)

    def build(rows: list) -> tuple[dict, dict]:  # type: ignore[type-arg]
        return {"current_traversal": "t1", "status": Status.IN_PROGRESS}, {
            "nodes": [[r.id, True] for r in rows],
            "edges": [],
        }

    started = await store.start_traversal(
        stack_id, stack.atomic_key, [NewResource("a", "T"), NewResource("b", "T")], build
    )
    assert started is not None and started.current_traversal == "t1"
    rows = await store.list_resources(stack_id)
    assert [r.name for r in rows] == ["a", "b"]
    # A second start from the same stale key writes nothing, not even the rows.
    assert (
        await store.start_traversal(stack_id, stack.atomic_key, [NewResource("c", "T")], build)
        is None
    )
    assert [r.name for r in await store.list_resources(stack_id)] == ["a", "b"]
    traversal, graph = await store.get_traversal_graph(stack_id)
    assert traversal == "t1" and graph is not None and len(graph["nodes"]) == 2


async def test_resource_claims_race_and_only_one_wins(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    await store.start_traversal(
        stack_id, stack.atomic_key, [NewResource("a", "T")], lambda rows: ({}, {})
    )
    (row,) = await store.list_resources(stack_id)
    results = await asyncio.gather(
        *[store.update_resource(row.id, row.atomic_key, {"engine_id": f"e{i}"}) for i in range(8)]
    )
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    claimed = await store.get_resource(row.id)
    assert claimed is not None and claimed.engine_id == winners[0].engine_id
    # A stale holder is stolen from by compare-and-swap on the key it read.
    stolen = await store.update_resource(row.id, claimed.atomic_key, {"engine_id": "thief"})
    assert stolen is not None and stolen.engine_id == "thief"


async def test_resource_hosts_name_every_row_and_its_host(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    rows = [NewResource("f", "Local::File", host="h1"), NewResource("n", "OS::Heat::None")]
    await store.start_traversal(stack_id, stack.atomic_key, rows, lambda rows: ({}, {}))
    assert await store.resource_hosts(stack_id) == [("f", "h1"), ("n", None)]
    assert await store.resource_hosts("no-such-stack") == []


async def test_a_removed_service_lets_go_of_its_claims(store: SqlStore) -> None:
    """A process found dead (or stopped) holds nothing afterwards; others' claims stay, and
    the released row can still be claimed with the key read before the release."""
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    await store.start_traversal(
        stack_id,
        stack.atomic_key,
        [NewResource("a", "T"), NewResource("b", "T")],
        lambda rows: ({}, {}),
    )
    a, b = await store.list_resources(stack_id)
    await store.register_service(ServiceRecord("dead", "h", 1, ("worker",), 100.0, 100.0))
    held = await store.update_resource(a.id, a.atomic_key, {"engine_id": "dead"})
    other = await store.update_resource(b.id, b.atomic_key, {"engine_id": "alive"})
    assert held is not None and other is not None
    await store.remove_service("dead")
    released = await store.get_resource(a.id)
    assert released is not None and released.engine_id is None
    assert released.atomic_key == held.atomic_key
    kept = await store.get_resource(b.id)
    assert kept is not None and kept.engine_id == "alive"
    taken = await store.update_resource(a.id, held.atomic_key, {"engine_id": "taker"})
    assert taken is not None and taken.engine_id == "taker"


async def test_sync_point_counts_a_duplicate_report_once(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    target = GraphNode(9, True)
    senders = [GraphNode(1, True), GraphNode(2, True)]
    expected = {target: 2}
    ok, ready, _, *_ = await store.finish_node(
        stack_id,
        "t",
        senders[0],
        resource_id=None,
        expected_key=None,
        changes=None,
        reports={target: {"name": "one"}},
        expected_counts=expected,
    )
    assert ok and ready == []
    # the same sender again (a re-delivered message): still one report
    ok, ready, _, *_ = await store.finish_node(
        stack_id,
        "t",
        senders[0],
        resource_id=None,
        expected_key=None,
        changes=None,
        reports={target: {"name": "one"}},
        expected_counts=expected,
    )
    assert ready == []
    assert await store.count_reports("t", target) == 1
    ok, ready, _, *_ = await store.finish_node(
        stack_id,
        "t",
        senders[1],
        resource_id=None,
        expected_key=None,
        changes=None,
        reports={target: {"name": "two"}},
        expected_counts=expected,
    )
    assert ready == [target]
    assert await store.reported_senders("t") == set(senders)
    _stack, _row, reports = await store.load_for_check(stack_id, target, "t")
    assert sorted(r.data["name"] for r in reports) == ["one", "two"]


async def test_finish_node_writes_nothing_when_the_row_changed(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    await store.start_traversal(
        stack_id, stack.atomic_key, [NewResource("a", "T")], lambda rows: ({}, {})
    )
    (row,) = await store.list_resources(stack_id)
    await store.update_resource(row.id, row.atomic_key, {"status_reason": "someone else"})
    ok, ready, _, *_ = await store.finish_node(
        stack_id,
        "t",
        GraphNode(row.id, True),
        resource_id=row.id,
        expected_key=row.atomic_key,
        changes={"status": Status.COMPLETE},
        events=[NewEvent("a", "T", "CREATE", "COMPLETE", "x")],
        reports={STACK_NODE: {}},
        expected_counts={STACK_NODE: 1},
    )
    assert not ok and ready == []
    assert await store.count_reports("t", STACK_NODE) == 0
    assert await store.list_events(stack_id) == []


async def test_finishes_at_once_each_keep_their_outcome(store: SqlStore) -> None:
    """Finishes of many rows made at once (on SQLite: one transaction, a savepoint each):
    those whose row changed write nothing, and undo nothing of the others'."""
    stack_id, rows = await stack_with_rows(store, named(12))
    lost = {row.id for row in rows[::3]}
    for row in rows:
        if row.id in lost:
            await store.update_resource(row.id, row.atomic_key, {"status_reason": "moved"})

    async def finish(row: ResourceRecord) -> bool:
        stored, _ready, _current, *_ = await store.finish_node(
            stack_id,
            "t",
            GraphNode(row.id, True),
            resource_id=row.id,
            expected_key=row.atomic_key,
            changes={"status_reason": "done"},
            events=[NewEvent(row.name, "T", "CREATE", "COMPLETE", "done")],
            reports={STACK_NODE: {}},
            expected_counts={STACK_NODE: len(rows)},
        )
        return stored

    outcomes = await asyncio.gather(*(finish(row) for row in rows))
    assert outcomes == [row.id not in lost for row in rows]
    after = {row.id: row.status_reason for row in await store.list_resources(stack_id)}
    assert after == {row.id: "moved" if row.id in lost else "done" for row in rows}
    assert await store.count_reports("t", STACK_NODE) == len(rows) - len(lost)
    assert sorted(e.resource_name for e in await store.list_events(stack_id)) == sorted(
        row.name for row in rows if row.id not in lost
    )


async def _one_resource(store: SqlStore, traversal: str = "t1") -> tuple[str, ResourceRecord]:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    await store.start_traversal(
        stack_id,
        stack.atomic_key,
        [NewResource("a", "T")],
        lambda rows: ({"current_traversal": traversal}, {}),
    )
    (row,) = await store.list_resources(stack_id)
    return stack_id, row


async def test_finish_node_writes_the_row_events_and_reports_at_once(store: SqlStore) -> None:
    stack_id, row = await _one_resource(store)
    first, second = GraphNode(50, True), GraphNode(51, False)
    ok, ready, current, *_ = await store.finish_node(
        stack_id,
        "t1",
        GraphNode(row.id, True),
        resource_id=row.id,
        expected_key=row.atomic_key,
        changes={"action": Action.CREATE, "status": Status.COMPLETE, "attr_data": {"x": [1]}},
        events=[NewEvent("a", "T", "CREATE", "COMPLETE", "done", "phys")],
        reports={second: {}, first: {"name": "a"}},
        expected_counts={first: 1, second: 2},
    )
    assert ok and current == "t1"
    assert ready == [first]  # the second waits for another predecessor
    written = await store.get_resource(row.id)
    assert written is not None and written.atomic_key == row.atomic_key + 1
    assert (written.status, written.attr_data) == (Status.COMPLETE, {"x": [1]})
    (event,) = await store.list_events(stack_id)
    assert (event.reason, event.physical_resource_id) == ("done", "phys")
    _stack, _row, reports = await store.load_for_check(stack_id, first, "t1")
    assert [(r.sender_resource_id, r.data) for r in reports] == [(row.id, {"name": "a"})]
    assert await store.count_reports("t1", second) == 1


@pytest.mark.parametrize("superseded", [False, True])
async def test_finish_node_deletes_the_row_unless_a_newer_traversal_may_use_it(
    store: SqlStore, superseded: bool
) -> None:
    stack_id, row = await _one_resource(store, traversal="t2" if superseded else "t1")
    ok, ready, current, *_ = await store.finish_node(
        stack_id,
        "t1",
        GraphNode(row.id, False),
        resource_id=row.id,
        expected_key=row.atomic_key,
        changes=None,
        delete_resource=True,
        reports={STACK_NODE: {}},
        expected_counts={STACK_NODE: 1},
        kept_if_superseded={"status_reason": "kept for t2"},
    )
    assert ok and ready == [STACK_NODE] and current == ("t2" if superseded else "t1")
    kept = await store.get_resource(row.id)
    if superseded:
        assert kept is not None and kept.status_reason == "kept for t2"
        assert kept.atomic_key == row.atomic_key + 1
    else:
        assert kept is None
    # A second finish with the old key changes nothing and reports nothing.
    again = await store.finish_node(
        stack_id,
        "t1",
        GraphNode(row.id, False),
        resource_id=row.id,
        expected_key=row.atomic_key,
        changes=None,
        delete_resource=True,
        reports={GraphNode(7, True): {}},
        expected_counts={GraphNode(7, True): 1},
    )
    assert again == (False, [], "", None, None, None)


async def test_a_claim_reads_back_the_row_it_wrote(store: SqlStore) -> None:
    """Without ``current`` the row comes back as stored; a lost claim adds no event."""
    stack_id, row = await _one_resource(store)
    event = NewEvent("a", "T", "CREATE", "IN_PROGRESS", "claimed")
    claimed = await store.update_resource(
        row.id, row.atomic_key, {"engine_id": "e1"}, events=[event], stack_id=stack_id
    )
    assert claimed is not None and claimed == await store.get_resource(row.id)
    assert claimed.engine_id == "e1" and claimed.atomic_key == row.atomic_key + 1
    lost = await store.update_resource(
        row.id, row.atomic_key, {"engine_id": "e2"}, events=[event], stack_id=stack_id
    )
    assert lost is None
    assert [e.reason for e in await store.list_events(stack_id)] == ["claimed"]


async def test_replacement_row_and_events(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)
    await store.start_traversal(
        stack_id, stack.atomic_key, [NewResource("a", "T")], lambda rows: ({}, {})
    )
    (row,) = await store.list_resources(stack_id)
    made = await store.add_replacement(row, NewResource("a", "T", replaces=row.id), {})
    assert made is not None
    old, new = made
    assert old.replaced_by == new.id and new.replaces == old.id
    assert await store.add_replacement(row, NewResource("a", "T", replaces=row.id), {}) is None
    assert len(await store.list_resources(stack_id)) == 2
    await store.add_events(stack_id, [NewEvent("a", "T", "CREATE", "IN_PROGRESS", "go")])
    events = await store.list_events(stack_id)
    assert [e.state for e in events] == ["CREATE_IN_PROGRESS"]
    assert await store.list_events(stack_id, after_id=events[-1].id) == []


async def test_services_and_liveness(store: SqlStore) -> None:
    await store.register_service(ServiceRecord("e1", "h", 1, ("engine",), 100.0, 100.0))
    await store.register_service(ServiceRecord("e2", "h", 2, ("engine",), 100.0, 100.0))
    await store.heartbeat("e2", 200.0)
    assert await store.live_engines(150.0) == {"e2"}
    await store.remove_service("e2")
    assert await store.live_engines(0.0) == {"e1"}


async def test_a_lease_is_held_by_one_live_engine_at_a_time(store: SqlStore) -> None:
    await store.register_service(ServiceRecord("e1", "h", 1, ("engine",), 100.0, 100.0))
    await store.register_service(ServiceRecord("e2", "h", 2, ("engine",), 100.0, 100.0))

    async def take(holder: str, now: float, ttl: float | None = 10.0) -> bool:
        return await store.take_lease("heal:s", holder, now=now, ttl=ttl, live_after=50.0)

    assert await take("e1", 100.0)
    assert not await take("e2", 101.0)  # held by a live engine
    assert await take("e1", 105.0)  # renewed by its holder, until 115
    assert not await take("e2", 114.0)
    assert await take("e2", 115.0)  # expired
    await store.release_lease("heal:s", "e1")  # no longer e1's: stays e2's
    assert not await take("e1", 116.0)
    await store.release_lease("heal:s", "e2")
    assert await take("e1", 117.0, ttl=None)  # no expiry: held while e1 lives
    assert not await take("e2", 10_000.0)
    await store.remove_service("e1")  # e1 is gone (or its heartbeat stale): free
    assert await take("e2", 10_001.0)


async def test_purge_keeps_needed_templates(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    t1 = await store.add_template(stack_id, {"a": 1}, {}, {}, {})
    t2 = await store.add_template(stack_id, {"a": 2}, {}, {}, {})
    t3 = await store.add_template(stack_id, {"a": 3}, {}, {}, {})
    await store.purge_stack_data(stack_id, [t2, t3])
    with pytest.raises(NotFound):
        await store.get_template(t1)
    assert (await store.get_template(t3)).template == {"a": 3}


async def test_purge_drops_unused_templates_once_they_are_old(store: SqlStore) -> None:
    """A template nothing uses is dropped once older than ``UNUSED_TEMPLATE_KEPT``, newer
    ones than the oldest in use included: a row that keeps an old template in use (one no
    later traversal converged) kept every later operation's template until the delete."""
    stack_id = await new_stack(store)
    oldest = await store.add_template(stack_id, {"a": 0}, {}, {}, {})  # a row keeps it
    stored = [await store.add_template(stack_id, {"a": i}, {}, {}, {}) for i in (1, 2, 3)]
    current = await store.add_template(stack_id, {"a": 4}, {}, {}, {})
    await store.purge_stack_data(stack_id, [oldest, current])
    for template_id in stored:  # fresh: an operation may be about to start with it
        assert (await store.get_template(template_id)).template
    later = store._clock() + UNUSED_TEMPLATE_KEPT + 1
    store._clock = lambda: later
    fresh = await store.add_template(stack_id, {"a": 5}, {}, {}, {})
    await store.purge_stack_data(stack_id, [oldest, current])
    for template_id in stored:
        with pytest.raises(NotFound):
            await store.get_template(template_id)
    for template_id in (oldest, current, fresh):
        assert (await store.get_template(template_id)).template


async def test_an_operation_whose_template_was_purged_does_not_start(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    template_id = await store.add_template(stack_id, {"a": 1}, {}, {}, {})
    kept = await store.add_template(stack_id, {"a": 2}, {}, {}, {})
    later = store._clock() + UNUSED_TEMPLATE_KEPT + 1
    store._clock = lambda: later
    await store.purge_stack_data(stack_id, [kept])
    stack = await store.get_stack(stack_id)

    def build(rows: list[ResourceRecord]) -> tuple[dict[str, object], dict[str, object]]:
        return {"current_traversal": "t1", "raw_template_id": template_id}, {"nodes": []}

    with pytest.raises(Conflict, match=r"template .* was removed as unused before"):
        await store.start_traversal(stack_id, stack.atomic_key, [NewResource("a", "T")], build)
    assert await store.get_stack(stack_id) == stack  # nothing changed
    assert await store.list_resources(stack_id) == []


async def test_a_row_reads_the_same_by_every_path(store: SqlStore) -> None:
    """The single-row reads and writes of a check (SQLite runs them on its own connection)
    agree with the SQLAlchemy paths: JSON values, nulls, sets and enums round-trip."""
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)

    def build(rows: list) -> tuple[dict, dict]:  # type: ignore[type-arg]
        return {"current_traversal": "t1"}, {"nodes": [], "edges": []}

    await store.start_traversal(stack_id, stack.atomic_key, [NewResource("a", "T")], build)
    (row,) = await store.list_resources(stack_id)
    changes = {
        "action": Action.CREATE,
        "status": Status.COMPLETE,
        "properties_data": {"nested": {"list": [1, "two", None]}, "flag": True, "none": None},
        "attr_data": {"ünïcode": "✓"},
        "requires": frozenset({3, 1}),
        "hook_pending": None,
        "cleared_hooks": ("t1:pre-create",),
        "physical_resource_id": "phys-1",
    }
    written = await store.update_resource(row.id, row.atomic_key, changes, current=row)
    reread = await store.get_resource(row.id)
    (listed,) = await store.list_resources(stack_id)
    assert written == reread == listed
    assert reread is not None
    assert reread.properties_data == changes["properties_data"]
    assert reread.requires == frozenset({1, 3}) and reread.action is Action.CREATE
    loaded_stack, loaded, reports = await store.load_for_check(
        stack_id, GraphNode(row.id, True), "t1"
    )
    assert loaded == listed and reports == [] and loaded_stack == await store.get_stack(stack_id)


async def test_sqlite_check_path_waits_for_a_lock_held_elsewhere(tmp_path: object) -> None:
    """The inline fast path never waits; with the file locked, the store thread does."""
    import sqlite3

    path = f"{tmp_path}/locked.db"
    store = SqlStore.open(f"sqlite:///{path}")
    try:
        stack_id = await new_stack(store)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process mid-transaction
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, other.execute, "COMMIT")
        started = loop.time()
        await store.add_events(stack_id, [NewEvent("a", "T", "CREATE", "COMPLETE", "ok", None)])
        assert loop.time() - started >= 0.25  # it waited for the lock, then wrote
        other.close()
        events = await store.list_events(stack_id)
        assert [e.reason for e in events] == ["ok"]
    finally:
        await store.close()


async def test_resource_types_of_a_stack(store: SqlStore) -> None:
    stack_id = await new_stack(store)
    stack = await store.get_stack(stack_id)

    def build(rows: list) -> tuple[dict, dict]:  # type: ignore[type-arg]
        return {"current_traversal": "t1"}, {"nodes": [], "edges": []}

    await store.start_traversal(
        stack_id,
        stack.atomic_key,
        [NewResource("a", "T1"), NewResource("b", "T2"), NewResource("c", "T1")],
        build,
    )
    assert await store.resource_types(stack_id) == {"T1", "T2"}
    assert await store.resource_types("no-such-stack") == set()


async def test_a_stack_and_its_template_are_stored_in_one_transaction(store: SqlStore) -> None:
    template = NewTemplate({"heat_template_version": "2018-08-31"}, {}, {"f": "x"}, {"p": 1})
    stack = await store.create_stack(
        "s",
        "p",
        action=Action.CREATE,
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
        template=template,
    )
    assert stack.raw_template_id is not None
    stored = await store.get_template(stack.raw_template_id)
    assert (stored.stack_id, stored.files, stored.parameters) == (stack.id, {"f": "x"}, {"p": 1})

    # A template that cannot be stored leaves no stack behind (a later create may go on).
    unstorable = NewTemplate({"heat_template_version": object()}, {}, {}, {})
    with pytest.raises((TypeError, StatementError)):  # not JSON: the insert fails
        await store.create_stack(
            "t",
            "p",
            action=Action.CREATE,
            disable_rollback=False,
            timeout_mins=None,
            drift_policy="notify",
            template=unstorable,
        )
    with pytest.raises(NotFound):
        await store.find_stack("t", "p")


def test_the_known_schema_versions_are_the_migration_scripts() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from converge.adapters.sql.migrations import SCHEMA_HEAD, SCHEMA_REVISIONS
    from converge.adapters.sql.store import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    scripts = ScriptDirectory.from_config(config)
    assert scripts.get_current_head() == SCHEMA_HEAD
    walked = [script.revision for script in scripts.walk_revisions()]
    assert sorted(walked) == sorted(SCHEMA_REVISIONS)


async def test_an_up_to_date_schema_is_not_migrated_again(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening an up-to-date database reads its revision and nothing more (both dialects)."""
    url = database_url
    await SqlStore.open(url).close()

    def refuse(self: SqlStore) -> None:
        raise AssertionError("migrated an up-to-date schema")

    monkeypatch.setattr(SqlStore, "migrate", refuse)
    await SqlStore.open(url).close()


async def test_a_schema_from_a_newer_converge_is_refused(tmp_path: object) -> None:
    import sqlite3

    from converge.errors import StateError

    path = f"{tmp_path}/s.db"
    await SqlStore.open(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.close()
    with pytest.raises(StateError, match=r"s\.db: written by a newer converge \(schema 9999"):
        SqlStore.open(f"sqlite:///{path}")
    with pytest.raises(StateError, match="written by a newer converge"):
        SqlStore.open_file(path, read_only=True)


async def test_service_rows_keep_their_process_identity(store: SqlStore) -> None:
    await store.register_service(ServiceRecord("e1", "h", 7, ("engine",), 1.0, 1.0, "boot:42"))
    await store.register_service(ServiceRecord("e2", "h", 8, ("engine",), 2.0, 2.0))
    listed = await store.list_services()
    assert [(s.engine_id, s.pid, s.process_start) for s in listed] == [
        ("e1", 7, "boot:42"),
        ("e2", 8, None),
    ]


async def test_the_latest_event_id_moves_with_every_event(store: SqlStore) -> None:
    """The sweeper's sign that work is being done somewhere: claims and finishes add events."""
    assert await store.latest_event_id() == 0
    stack_id, row = await _one_resource(store)
    before = await store.latest_event_id()
    await store.update_resource(
        row.id,
        row.atomic_key,
        {"engine_id": "e1"},
        events=[NewEvent("a", "T", "CREATE", "IN_PROGRESS", "claimed")],
        stack_id=stack_id,
    )
    after = await store.latest_event_id()
    assert after > before
    assert [e.id for e in await store.list_events(stack_id)][-1] == after


async def test_a_deleted_rows_id_never_names_a_new_row(store: SqlStore) -> None:
    """A traversal's graph names rows by id, and templates are cached by id: SQLite gave a
    new row the id of the newest row deleted, and a graph took a new replacement for the
    dropped row it had deleted."""
    _, rows = await stack_with_rows(store, named(2))
    newest = rows[-1]
    await store.delete_resources([newest.id])
    made = await store.add_replacement(rows[0], NewResource("r0", "T", replaces=rows[0].id), {})
    assert made is not None
    assert made[1].id > newest.id
    other = await new_stack(store, "other")
    template_id = await store.add_template(other, {}, {}, {}, {})
    await store.mark_stack_deleted(other)  # its templates go with it
    third = await new_stack(store, "third")
    assert await store.add_template(third, {}, {}, {}, {}) > template_id
