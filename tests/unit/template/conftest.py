"""A small registry of resource types for template tests (no plugins involved)."""

from __future__ import annotations

import pytest

from converge.core.schema import (
    AttributeSchema,
    Constraint,
    PropertySchema,
    PropertyType,
    ResourceTypeSchema,
    StaticTypeSchemas,
)
from converge.core.template import StackIdentity

SERVER = ResourceTypeSchema(
    "Test::Server",
    properties={
        "image": PropertySchema(PropertyType.STRING, required=True),
        "flavor": PropertySchema(
            PropertyType.STRING,
            default="small",
            constraints=(Constraint("allowed_values", ["small", "large"]),),
        ),
        "count": PropertySchema(PropertyType.INTEGER, default=1),
        "networks": PropertySchema(PropertyType.LIST),
        "tags": PropertySchema(PropertyType.MAP),
    },
    attributes={"address": AttributeSchema(), "name": AttributeSchema()},
)
VALUE = ResourceTypeSchema(
    "Test::Value",
    properties={"value": PropertySchema(PropertyType.ANY)},
    attributes={"value": AttributeSchema()},
)
NONE = ResourceTypeSchema("OS::Heat::None", open_properties=True)


@pytest.fixture
def schemas() -> StaticTypeSchemas:
    return StaticTypeSchemas([SERVER, VALUE, NONE])


@pytest.fixture
def identity() -> StackIdentity:
    return StackIdentity("mystack", "stack-id-1", "project-1")
