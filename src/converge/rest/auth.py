"""Who is asking: the ``X-Auth-Token`` header to a project and a role, checked per request.

A token belongs to one project; a request naming another project in its URL is refused
(403, as Heat refuses a tenant that is not the token's), and a stack of another project is
simply not found (404). ``reader`` may only read; ``member`` may change its project's
stacks; ``admin`` may act in any project (Heat's admin context). Without authentication
(``--noauth``, loopback only) every request acts as admin of the project in its URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Path, Request

from converge.api import Converge
from converge.rest.errors import HeatHTTPError

READER, MEMBER, ADMIN = "reader", "member", "admin"


@dataclass(frozen=True)
class Access:
    """A request's rights: the converge handle confined to the URL's project, and a role."""

    cv: Converge
    project_id: str
    role: str

    @property
    def may_write(self) -> bool:
        return self.role in (MEMBER, ADMIN)


def root(request: Request) -> Converge:
    converge: Converge = request.app.state.converge
    return converge


async def access(
    request: Request,
    tenant_id: Annotated[str, Path(description="The project (Heat's tenant) the request acts in.")],
    x_auth_token: Annotated[str | None, Header(description="A converge API token.")] = None,
) -> Access:
    cv = root(request)
    if request.app.state.noauth:
        return Access(cv.for_project(tenant_id), tenant_id, ADMIN)
    if not x_auth_token:
        raise HeatHTTPError(
            401, "HTTPUnauthorized", "authentication required: send a token in X-Auth-Token"
        )
    token = await cv.authenticate(x_auth_token)
    if token is None:
        raise HeatHTTPError(401, "HTTPUnauthorized", "the token is not valid (unknown or revoked)")
    if token.project_id != tenant_id and token.role != ADMIN:
        raise HeatHTTPError(
            403, "Forbidden", f"the token is for another project than {tenant_id!r}"
        )
    return Access(cv.for_project(tenant_id), tenant_id, token.role)


async def writer(found: Annotated[Access, Depends(access)]) -> Access:
    """Access that may change things: ``reader`` tokens are refused (403)."""
    if not found.may_write:
        raise HeatHTTPError(403, "Forbidden", "a reader token cannot change anything")
    return found


Reader = Annotated[Access, Depends(access)]
Writer = Annotated[Access, Depends(writer)]
