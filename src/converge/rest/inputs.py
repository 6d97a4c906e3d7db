"""From a request body to the Python API's inputs: template, environments, tags."""

from __future__ import annotations

from converge.api import Source, TemplateInput
from converge.errors import InvalidRequest, TemplateError
from converge.rest.bodies import Document, StackInputs, Validate
from converge.rest.errors import HeatHTTPError


def template_of(body: StackInputs | Validate) -> TemplateInput | None:
    if body.template_url is not None:
        raise HeatHTTPError(
            400,
            "HTTPBadRequest",
            "template_url is not supported: converge fetches nothing from URLs; send the "
            "template itself in 'template'",
        )
    return _document(body.template, "template")


def environments_of(body: StackInputs | Validate) -> list[TemplateInput]:
    """``environment`` first, then each of ``environment_files`` from ``files``, in order."""
    environments: list[TemplateInput] = []
    environment = _document(body.environment, "environment")
    if environment is not None:
        environments.append(environment)
    for name in body.environment_files:
        if name not in body.files:
            raise TemplateError(f"environment file {name!r} is not in 'files'")
        environments.append(Source(body.files[name], name))
    return environments


def has_environment(body: StackInputs) -> bool:
    return body.environment is not None or bool(body.environment_files)


def _document(value: Document | None, name: str) -> TemplateInput | None:
    if value is None:
        return None
    if isinstance(value, str):
        return Source(value, name)
    return value


def tags_of(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    tags = value.split(",") if isinstance(value, str) else list(value)
    tags = [tag.strip() for tag in tags if tag.strip()]
    for tag in tags:
        if len(tag) > 80:
            raise InvalidRequest(f"tag {tag[:20]!r}… is longer than 80 characters")
    return tags
