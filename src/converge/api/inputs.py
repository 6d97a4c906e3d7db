"""What a stack call is given: template and environment text (or data) loaded and merged,
and the stack name and drift policy checked before anything is stored."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from converge.core.template import (
    Environment,
    Template,
    environment_from_data,
    load_environment,
    load_template,
    merge_environments,
    template_from_data,
)
from converge.errors import InvalidRequest

_STACK_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.-]{0,254}$")


@dataclass(frozen=True)
class Source:
    """Template or environment text with the name errors should point at."""

    text: str
    filename: str


TemplateInput = str | Source | Mapping[str, Any]


def _load_template(template: TemplateInput) -> Template:
    if isinstance(template, Source):
        return load_template(template.text, template.filename)
    if isinstance(template, str):
        return load_template(template, "<template>")
    return template_from_data(template, filename="<template>")


def _merge(environments: Sequence[TemplateInput]) -> Environment:
    loaded = []
    for index, environment in enumerate(environments):
        if isinstance(environment, Source):
            loaded.append(load_environment(environment.text, environment.filename))
        elif isinstance(environment, str):
            loaded.append(load_environment(environment, f"<environment {index + 1}>"))
        else:
            loaded.append(environment_from_data(environment))
    return merge_environments(loaded)


def _check_stack_name(name: str) -> None:
    if not _STACK_NAME.match(name):
        raise InvalidRequest(
            f"invalid stack name {name!r}: it must start with a letter and contain only "
            "letters, digits, '_', '-' and '.' (at most 255 characters)"
        )


def _check_drift_policy(policy: str) -> None:
    if policy not in ("notify", "heal", "ignore"):
        raise InvalidRequest(f"invalid drift policy {policy!r}: use notify, heal or ignore")
