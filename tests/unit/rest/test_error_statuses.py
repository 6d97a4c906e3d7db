"""converge's errors as Heat's HTTP statuses: what a client may retry is a 503."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from starlette.requests import Request

from converge.errors import ConvergeError, StoreError, Unavailable
from converge.rest.errors import install


def _answer(error: ConvergeError) -> tuple[int, dict[str, object]]:
    app = FastAPI()
    install(app)
    handler = app.exception_handlers[ConvergeError]
    request = Request({"type": "http", "method": "POST", "path": "/v1/p/stacks", "headers": []})
    response = handler(request, error)
    return response.status_code, json.loads(bytes(response.body))


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (StoreError("the database went away"), "StoreError"),
        (Unavailable("cannot reach the broker amqp://guest@mq/"), "ServiceUnavailable"),
    ],
)
def test_a_service_that_cannot_be_reached_is_a_503(error: ConvergeError, kind: str) -> None:
    status, body = _answer(error)
    assert status == 503
    assert body["error"] == {"type": kind, "message": str(error), "traceback": None}
