"""Plugin checks that Heat makes when a request is accepted, through the public API."""

from __future__ import annotations

import pytest

from converge.api import Converge
from converge.errors import TemplateError

RANDOM = """
heat_template_version: 2021-04-16
resources:
  v: {type: OS::Heat::Value, properties: {value: 3}}
  fixed:
    type: OS::Heat::RandomString
    properties:
      length: 4
      character_classes: [{class: digits, min: 3}, {class: letters, min: 3}]
  later:
    type: OS::Heat::RandomString
    properties:
      length: {get_attr: [v, value]}
"""


async def test_random_string_shorter_than_its_minimums_is_refused(cv: Converge) -> None:
    # Heat: "Length property cannot be smaller than combined character class and character
    # sequence minimums", at validation, before any resource is made. A length known only
    # once another resource exists (``later``) is left to create, as in Heat.
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack("s", RANDOM)
    message = str(caught.value)
    assert "resources.fixed.properties.length" in message
    assert "minimums add up to 6" in message
    assert "later" not in message
    assert await cv.list_stacks() == []
