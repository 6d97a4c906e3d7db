"""Work messages: one node (``CheckResource``) or several of one traversal
(``CheckResources``), read back by ``work_checks``; anything else is refused."""

from __future__ import annotations

from typing import Any

import pytest

from converge.adapters import json_codec
from converge.messages import CheckResource, CheckResources, MessageError, work_checks


def _through_json(data: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json_codec.loads(json_codec.dumps(data))
    return loaded


def test_a_single_check_reads_back_as_itself() -> None:
    message = CheckResource("s", "t", 7, True)
    assert work_checks(_through_json(message.to_dict())) == [message]


def test_several_checks_read_back_as_their_nodes_in_order() -> None:
    message = CheckResources("s", "t", ((3, True), (1, False), (2, True)))
    assert work_checks(_through_json(message.to_dict())) == [
        CheckResource("s", "t", 3, True),
        CheckResource("s", "t", 1, False),
        CheckResource("s", "t", 2, True),
    ]


@pytest.mark.parametrize(
    "nodes",
    [[], [[1]], [[1, True, 3]], ["x"], None, [["a", True]]],
    ids=["no nodes", "short node", "long node", "not a pair", "missing", "bad id"],
)
def test_a_malformed_batch_is_refused(nodes: Any) -> None:
    data = {"kind": "check_resources", "version": 1, "stack_id": "s", "traversal_id": "t"}
    if nodes is not None:
        data["nodes"] = nodes
    with pytest.raises(MessageError):
        work_checks(data)


@pytest.mark.parametrize(
    "data",
    [{"kind": "check_resources", "version": 2, "nodes": [[1, True]]}, {"kind": "other"}, {}],
    ids=["newer version", "other kind", "empty"],
)
def test_an_unknown_message_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(MessageError):
        work_checks(data)
