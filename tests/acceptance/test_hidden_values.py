"""A hidden parameter's value never appears in a validation message, at validate time or at
apply time, whichever property it flows into: a real type's (PostgreSQL::Role) or a
built-in one's (OS::Heat::RandomString), nor in what a plugin's check or failure says."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from converge.api import Converge
from converge.core.template import StackIdentity, load_template, prepare_stack
from converge.errors import TemplateError
from converge.resources.registry import default_registry

SECRET = "hunter2SECRET"


def template(value: Any, *, resource: str = "role") -> dict[str, Any]:
    types = {
        "role": ("PostgreSQL::Role", "connection_limit"),
        "random": ("OS::Heat::RandomString", "length"),
    }
    type_name, prop = types[resource]
    return {
        "heat_template_version": "2021-04-16",
        "parameters": {"secret": {"type": "string", "hidden": True}},
        "resources": {
            # Its value is known only once it exists: what refers to it is checked at apply.
            "blank": {"type": "OS::Heat::Value", "properties": {"value": ""}},
            resource: {
                "type": type_name,
                "properties": {prop: value, "server_url": "postgresql://127.0.0.1:1/x"}
                if resource == "role"
                else {prop: value},
            },
        },
    }


DIRECT = {"get_param": "secret"}
WRAPPED = {"str_replace": {"template": "limit=$s", "params": {"$s": {"get_param": "secret"}}}}
AT_APPLY = {"list_join": ["", [{"get_param": "secret"}, {"get_attr": ["blank", "value"]}]]}


@pytest.mark.parametrize("resource", ["role", "random"])
@pytest.mark.parametrize("value", [DIRECT, WRAPPED], ids=["get_param", "str_replace"])
def test_validation_says_a_hidden_value_instead_of_the_value(resource: str, value: Any) -> None:
    with pytest.raises(TemplateError) as caught:
        prepare_stack(
            load_template(_yaml(template(value, resource=resource)), "stack.yaml"),
            parameters={"secret": SECRET},
            identity=StackIdentity("s", "s-id", "p"),
            schemas=default_registry(),
        )
    message = str(caught.value)
    assert "expected an integer, got a hidden value" in message
    assert SECRET not in message


def test_a_value_that_is_not_hidden_is_still_quoted() -> None:
    body = template(DIRECT)
    body["parameters"]["secret"]["hidden"] = False
    with pytest.raises(TemplateError, match=f"expected an integer, got '{SECRET}'"):
        prepare_stack(
            load_template(_yaml(body), "stack.yaml"),
            parameters={"secret": SECRET},
            identity=StackIdentity("s", "s-id", "p"),
            schemas=default_registry(),
        )


@pytest.mark.parametrize("resource", ["role", "random"])
async def test_apply_time_failures_say_a_hidden_value(cv: Converge, resource: str) -> None:
    created = await asyncio.wait_for(
        cv.create_stack(
            "hidden",
            template(AT_APPLY, resource=resource),
            parameters={"secret": SECRET},
            disable_rollback=True,
        ),
        timeout=60,  # a property refused at apply time once left the stack unsettled
    )
    assert created.stack_status == "CREATE_FAILED"
    assert "expected an integer, got a hidden value" in created.stack_status_reason
    shown = [created.stack_status_reason]
    shown += [event.resource_status_reason for event in await cv.list_events("hidden")]
    shown += [row.resource_status_reason for row in await cv.list_resources("hidden")]
    assert not [text for text in shown if SECRET in text]


def _yaml(body: dict[str, Any]) -> str:
    return json.dumps(body)  # JSON is YAML


async def test_a_plugin_check_does_not_quote_a_hidden_value(cv: Converge) -> None:
    body = template(3)
    body["resources"]["role"]["properties"]["server_url"] = {"get_param": "secret"}
    url = f"mysql://admin@{SECRET}/db"
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack("hidden", body, parameters={"secret": url})
    message = str(caught.value)
    assert "server_url: expected a postgresql:// URL, got a hidden value" in message
    assert SECRET not in message


async def test_a_plugin_failure_does_not_quote_a_hidden_value(
    cv: Converge, postgres_server: str
) -> None:
    name = f"cvh_{uuid.uuid4().hex[:10]}"
    body = template(3)
    body["resources"]["role"]["properties"].update(
        server_url=postgres_server, name=name, member_of=[{"get_param": "secret"}]
    )
    try:
        created = await cv.create_stack(
            "hidden", body, parameters={"secret": SECRET}, disable_rollback=True
        )
        assert created.stack_status == "CREATE_FAILED"
        assert 'role "a hidden value" does not exist' in created.stack_status_reason
        shown = [created.stack_status_reason]
        shown += [event.resource_status_reason for event in await cv.list_events("hidden")]
        assert not [text for text in shown if SECRET in text]
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


async def test_drift_of_a_value_from_a_hidden_parameter_is_masked(
    cv: Converge, postgres_server: str
) -> None:
    group, name = (f"cvh_{uuid.uuid4().hex[:10]}" for _ in range(2))
    body = template(3)
    body["resources"]["role"]["properties"].update(
        server_url=postgres_server, name=name, member_of=[{"get_param": "secret"}]
    )
    try:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(group)))
        created = await cv.create_stack("hidden", body, parameters={"secret": group})
        assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), sql.Identifier(name))
            )
        await cv.check_stack("hidden")
        drift = {view.resource_name: view for view in await cv.drift("hidden")}["role"]
        assert drift.drift_status == "MODIFIED"
        assert drift.drift_detail == {"member_of": {"wanted": "******", "found": "******"}}
        reasons = [event.resource_status_reason for event in await cv.list_events("hidden")]
        assert not [text for text in reasons if group in text]
        await cv.delete_stack("hidden")
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            for role in (name, group):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
