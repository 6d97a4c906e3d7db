"""Request bodies of Heat's v1 API as pydantic models (what the OpenAPI description shows)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Document = dict[str, Any] | str


class StackInputs(BaseModel):
    """What create, update and their previews share: the template and what goes with it."""

    model_config = ConfigDict(extra="ignore")

    template: Document | None = Field(
        default=None, description="The HOT template, as a JSON object or as YAML/JSON text."
    )
    template_url: str | None = Field(
        default=None, description="Refused: converge fetches nothing; send `template`."
    )
    files: dict[str, str] = Field(
        default_factory=dict, description="Files by name: get_file contents, provider templates."
    )
    environment: Document | None = Field(default=None, description="An environment.")
    environment_files: list[str] = Field(
        default_factory=list,
        description="Names in `files` of environments, merged in order over `environment`.",
    )
    parameters: dict[str, Any] = Field(default_factory=dict)
    timeout_mins: int | None = Field(default=None, ge=1)
    disable_rollback: bool | None = None
    tags: str | list[str] | None = Field(default=None, description="'a,b' or a list.")
    drift_policy: str | None = Field(
        default=None, description="converge: notify (default), heal or ignore."
    )


class StackCreate(StackInputs):
    stack_name: str | None = None
    adopt_stack_data: Any = Field(default=None, description="Refused: adopt is not enabled.")
    converge: bool | None = Field(default=None, description="Refused on create (update only).")


class StackUpdate(StackInputs):
    converge: bool = Field(
        default=False, description="Compare with observed reality (Heat's converge)."
    )
    clear_parameters: list[str] = Field(
        default_factory=list, description="PATCH: parameters to reset to their defaults."
    )
    existing: bool | None = None


class MarkUnhealthy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mark_unhealthy: bool
    resource_status_reason: str = ""


class Validate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    template: Document | None = None
    template_url: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    environment: Document | None = None
    environment_files: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
