"""The PostgreSQL ownership marker: what it says, whose it is, what delete does with it."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from converge.engine.clock import SystemClock
from converge.errors import PermanentFailure
from converge.resources.base import ResourceContext
from converge.resources.postgres.ownership import (
    Marker,
    OnDelete,
    held_by,
    on_delete,
    parse,
    takeover_marker,
    update_marker,
)


def context(stack_id: str = "s-1", resource: str = "db", row: str = "0a1b2c3d") -> ResourceContext:
    return ResourceContext(
        stack_id=stack_id,
        stack_name="shop",
        resource_name=resource,
        physical_name=f"shop-{resource}-{row}",
        clock=SystemClock(),
        deadline=None,
        logger=logging.getLogger("test"),
    )


def test_a_marker_reads_back_what_it_wrote() -> None:
    marker = Marker.adopting(context(), 'the "ledger"')
    assert parse(marker.text()) == marker
    assert marker.text().startswith('converge:{"stack":"shop","stack_id":"s-1"')
    assert parse(None) is None and parse("the billing app") is None
    assert parse("converge:{not json") is None and parse("converge:") is None


def test_ownership_is_by_stack_and_resource_and_delete_by_row() -> None:
    ctx = context()
    marker = Marker.made(ctx)
    replacement = context(row="99999999")
    assert marker.belongs_to(replacement) and not marker.is_held_by(replacement)
    assert not marker.belongs_to(context(stack_id="s-2"))
    assert not marker.belongs_to(context(resource="db2"))
    assert on_delete(ctx, marker.text()) == OnDelete.DROP
    assert on_delete(replacement, marker.text()) == OnDelete.KEEP
    assert on_delete(ctx, None) == OnDelete.KEEP
    assert held_by(ctx, [("a", marker.text()), ("b", None), ("c", "x")]) == ["a"]


def test_an_adopted_one_is_dropped_only_on_an_explicit_delete_policy() -> None:
    ctx = context()
    adopted = Marker.adopting(ctx, None).text()
    assert on_delete(ctx, adopted) == OnDelete.RELEASE
    for policy in ("Retain", "Snapshot"):
        assert on_delete(dataclasses.replace(ctx, deletion_policy=policy), adopted) == (
            OnDelete.RELEASE
        )
    assert on_delete(dataclasses.replace(ctx, deletion_policy="Delete"), adopted) == OnDelete.DROP


def test_legacy_markers_name_only_the_row() -> None:
    ctx = context()
    legacy = "converge:" + ctx.physical_name
    assert parse(legacy) == Marker("", "", ctx.physical_name)
    assert on_delete(ctx, legacy) == OnDelete.DROP
    assert (parse(legacy) or Marker("", "", "")).belongs_to(context(row="99999999"))
    assert not (parse(legacy) or Marker("", "", "")).belongs_to(context(resource="d"))
    taken = takeover_marker(context(row="99999999"), "role", "r", legacy, adopt=False)
    assert taken == Marker("s-1", "db", "shop-db-99999999", stack_name="shop")


def test_takeover_needs_adopt_for_what_this_resource_did_not_make() -> None:
    ctx = context()
    with pytest.raises(PermanentFailure, match="'x' already exists and was not made by converge"):
        takeover_marker(ctx, "database", "x", "someone's", adopt=False)
    other = Marker.made(context(stack_id="s-2", resource="main")).text()
    with pytest.raises(PermanentFailure, match="is managed by converge stack 'shop', resource 'm"):
        takeover_marker(ctx, "database", "x", other, adopt=False)
    adopted = takeover_marker(ctx, "database", "x", "someone's", adopt=True)
    assert adopted.adopted and adopted.previous_comment == "someone's"
    # Taken over again by a replacement row: still adopted, the old comment still kept.
    again = takeover_marker(context(row="99999999"), "database", "x", adopted.text(), False)
    assert again.adopted and again.previous_comment == "someone's"


def test_update_refuses_what_another_resource_manages_now() -> None:
    ctx = context()
    with pytest.raises(PermanentFailure, match="'x' is now managed by converge stack"):
        update_marker(ctx, "role", "x", Marker.made(context(resource="db2")).text(), False)
    assert update_marker(ctx, "role", "x", None, adopt=False) == Marker.made(ctx)
    assert update_marker(ctx, "role", "x", None, adopt=True).adopted
