"""Heat's template routes: validate, template versions and their functions, resource types,
their schemas and generated templates."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from converge import catalog
from converge.errors import InvalidRequest
from converge.rest.auth import Reader
from converge.rest.bodies import Validate
from converge.rest.inputs import environments_of, template_of
from converge.rest.stacks import flag

router = APIRouter(prefix="/v1/{tenant_id}", tags=["templates"])


@router.post("/validate", summary="Validate a template")
async def validate_template(
    access: Reader,
    body: Validate,
    show_nested: str | None = None,
    ignore_errors: str | None = None,
) -> dict[str, Any]:
    """Errors answer 400 with every problem as ``file:line: path: message``.

    ``ignore_errors`` takes Heat's comma-separated error codes; converge's template errors
    carry no such codes, so none of them is ignored.
    """
    if ignore_errors is not None and not all(
        code.strip().isdigit() for code in ignore_errors.split(",") if code.strip()
    ):
        raise InvalidRequest(
            f"ignore_errors must be comma-separated error codes, got {ignore_errors!r}"
        )
    template = template_of(body)
    if template is None:
        raise InvalidRequest("No template specified")
    return await access.cv.validate(
        template,
        environments=environments_of(body),
        files=body.files,
        parameters=body.parameters,
        show_nested=flag("show_nested", show_nested),
    )


@router.get("/template_versions", summary="List template versions")
async def list_template_versions(access: Reader) -> dict[str, Any]:
    return {"template_versions": catalog.template_versions()}


@router.get(
    "/template_versions/{template_version}/functions",
    summary="List the intrinsic functions of a template version",
)
async def list_template_functions(
    access: Reader, template_version: str, with_condition_func: str | None = None
) -> dict[str, Any]:
    return {
        "template_functions": catalog.template_functions(
            template_version,
            with_condition_func=flag("with_condition_func", with_condition_func),
        )
    }


@router.get("/resource_types", summary="List resource types")
async def list_resource_types(
    access: Reader,
    support_status: str | None = None,
    name: str | None = None,
    version: str | None = None,
    with_description: str | None = None,
) -> dict[str, Any]:
    return {
        "resource_types": access.cv.resource_types(
            support_status=support_status,
            name=name,
            with_description=flag("with_description", with_description),
        )
    }


@router.get("/resource_types/{type_name}", summary="Show a resource type's schema")
async def resource_schema(
    access: Reader, type_name: str, with_description: str | None = None
) -> dict[str, Any]:
    return catalog.resource_schema(
        access.cv.resource_type(type_name),
        with_description=flag("with_description", with_description),
    )


@router.get("/resource_types/{type_name}/template", summary="A template using the resource type")
async def generate_template(
    access: Reader, type_name: str, template_type: str = "hot"
) -> dict[str, Any]:
    return catalog.generate_template(access.cv.resource_type(type_name), template_type)
