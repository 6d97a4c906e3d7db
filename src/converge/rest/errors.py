"""The REST face's one error boundary: exceptions to Heat's JSON error body and HTTP codes.

Heat answers every error as ``{"code", "title", "explanation", "error": {"type",
"message", "traceback"}}``; python-heatclient reads ``error.message`` and the status code.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from converge.errors import (
    Conflict,
    ConvergeError,
    InvalidRequest,
    NotFound,
    StoreError,
    TemplateError,
    Unavailable,
)

log = logging.getLogger("converge.rest")

_TITLES = {
    400: (
        "Bad Request",
        "The server could not comply with the request since it is either "
        "malformed or otherwise incorrect.",
    ),
    401: (
        "Unauthorized",
        "This server could not verify that you are authorized to access "
        "the document you requested.",
    ),
    403: ("Forbidden", "Access was denied to this resource."),
    404: ("Not Found", "The resource could not be found."),
    405: ("Method Not Allowed", "The method is not allowed for this resource."),
    409: ("Conflict", "There was a conflict when trying to complete your request."),
    500: (
        "Internal Server Error",
        "The server has either erred or is incapable of performing the requested operation.",
    ),
    503: (
        "Service Unavailable",
        "The server is currently unavailable. Please try again at a later time.",
    ),
}

# Most specific first: the first matching class gives the status and Heat's error type.
_STATUS: tuple[tuple[type[ConvergeError], int, str], ...] = (
    (TemplateError, 400, "StackValidationFailed"),
    (InvalidRequest, 400, "Invalid"),
    (NotFound, 404, "EntityNotFound"),
    (Conflict, 409, "Conflict"),
    (StoreError, 503, "StoreError"),
    (Unavailable, 503, "ServiceUnavailable"),  # the broker cannot be reached
)


class HeatHTTPError(Exception):
    """An HTTP-level refusal with Heat's error type (NotSupported, Forbidden, …)."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


def not_supported(feature: str, why: str = "") -> HeatHTTPError:
    """Heat's NotSupported (400): ``Stack Abandon is not supported.``"""
    return HeatHTTPError(400, "NotSupported", f"{feature} is not supported.{why}")


def error_body(status: int, error_type: str, message: str) -> dict[str, Any]:
    title, explanation = _TITLES.get(status, ("Error", ""))
    return {
        "code": status,
        "title": title,
        "explanation": explanation,
        "error": {"type": error_type, "message": message, "traceback": None},
    }


def error_response(status: int, error_type: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Keystone uri="none"'} if status == 401 else None
    return JSONResponse(error_body(status, error_type, message), status, headers=headers)


def _converge_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ConvergeError)
    for kind, status, error_type in _STATUS:
        if isinstance(exc, kind):
            message = exc.format() if isinstance(exc, TemplateError) else str(exc)
            return error_response(status, error_type, message)
    log.error("unexpected converge error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, type(exc).__name__, str(exc))


def _heat_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HeatHTTPError)
    return error_response(exc.status, exc.error_type, exc.message)


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for problem in exc.errors():
        place = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
        problems.append(f"{place}: {problem.get('msg', 'invalid')}" if place else problem["msg"])
    return error_response(400, "HTTPBadRequest", "; ".join(problems) or "invalid request")


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    error_type = {404: "HTTPNotFound", 405: "HTTPMethodNotAllowed"}.get(
        exc.status_code, "HTTPError"
    )
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and message == "Not Found":
        message = f"no such route: {request.method} {request.url.path}"
    return error_response(exc.status_code, error_type, message)


def _bug(request: Request, exc: Exception) -> JSONResponse:
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        500,
        "InternalServerError",
        f"internal error ({type(exc).__name__}); this is a bug in converge: the server log "
        "has the details",
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(ConvergeError, _converge_error)
    app.add_exception_handler(HeatHTTPError, _heat_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _bug)
