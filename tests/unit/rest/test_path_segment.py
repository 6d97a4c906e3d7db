"""Resource and stack names in links: the fast path quotes exactly as ``quote`` does."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from converge.rest.documents import path_segment


@pytest.mark.parametrize(
    "name",
    ["r00001", "web_server-2.a~b", "", "a b", "a/b", "a%2Fb", "é", "x\n", "名前", "a?b#c", "+"],
)
def test_path_segment_quotes_as_quote_does(name: str) -> None:
    assert path_segment(name) == quote(name, safe="")
