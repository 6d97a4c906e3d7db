"""The REST application: Heat's v1 API and converge's own routes over one ``Converge``.

app = create_app(cv)            # tokens required (``converge token create``)
app = create_app(cv, noauth=True)  # every request acts as admin: loopback only
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Header, Request

from converge import __version__
from converge.api import Converge
from converge.rest import converge_routes, errors, resources, stacks, templates
from converge.rest.errors import HeatHTTPError


def create_app(cv: Converge, *, noauth: bool = False) -> FastAPI:
    app = FastAPI(
        title="converge",
        version=__version__,
        description=(
            "OpenStack Heat's orchestration API v1 (python-heatclient and `openstack stack` "
            "work against it) and converge's own routes: drift, snapshots, a change stream. "
            "Every request names its project in the URL and carries a token (X-Auth-Token)."
        ),
    )
    app.state.converge = cv
    app.state.noauth = noauth
    errors.install(app)
    app.include_router(stacks.router)
    app.include_router(resources.router)
    app.include_router(templates.router)
    app.include_router(converge_routes.router)

    @app.get("/v1/converge/token", tags=["converge"], summary="The token's project and role")
    async def whoami(
        request: Request,
        x_auth_token: Annotated[str | None, Header(description="A converge API token.")] = None,
    ) -> dict[str, Any]:
        if app.state.noauth:
            return {"project_id": None, "role": "admin"}
        token = await cv.authenticate(x_auth_token) if x_auth_token else None
        if token is None:
            raise HeatHTTPError(401, "HTTPUnauthorized", "no valid token in X-Auth-Token")
        return {"project_id": token.project_id, "role": token.role, "id": token.id}

    @app.get("/", tags=["versions"], summary="API versions")
    async def versions() -> dict[str, Any]:
        return {
            "versions": [
                {"id": "v1.0", "status": "CURRENT", "links": [{"href": "/v1/", "rel": "self"}]}
            ]
        }

    return app
