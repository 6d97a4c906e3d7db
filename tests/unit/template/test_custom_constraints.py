"""custom_constraint: Heat's checks that need no cloud, and the OpenStack look-ups noted."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge.core.custom_constraints import (
    ConstraintContext,
    custom_constraint_problem,
    parse_iso_8601,
)
from converge.core.schema import (
    Constraint,
    PropertySchema,
    PropertyType,
    StaticTypeSchemas,
    validate_properties,
)
from converge.core.template import StackDefinition, StackIdentity, load_template, prepare_stack
from converge.errors import TemplateError, TemplateErrors

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)


def problem(name: str, value: Any, **kwargs: Any) -> str | None:
    return custom_constraint_problem(name, value, **kwargs)


@pytest.mark.parametrize(
    ("name", "good", "bad", "message"),
    [
        (
            "ip_addr",
            ["10.0.0.1", "::1", "2001:db8::8a2e:370:7334"],
            "10.0.0.256",
            "Invalid IP address",
        ),
        ("ip_addr", [], "010.0.0.1", "Invalid IP address"),
        ("ip_addr", [], "fe80::1%eth0", "Invalid IP address"),
        (
            "net_cidr",
            ["10.0.0.0/24", "10.0.0.1/24", "2001:db8::/32"],
            "10.0.0/24",
            "'10.0.0/24' is not a valid IP subnet",
        ),
        (
            "net_cidr",
            [],
            "10.0.0.0",
            "'10.0.0.0' isn't a recognized IP subnet cidr, '10.0.0.0/32' is recommended",
        ),
        (
            "net_cidr",
            [],
            "10.0.0.0/255.255.255.0",
            "'10.0.0.0/255.255.255.0' isn't a recognized IP subnet cidr, '10.0.0.0/24' is recommended",
        ),
        (
            "ip_or_cidr",
            ["10.0.0.1", "10.0.0.0/8", "::1"],
            "10.0.0.0/33",
            "'10.0.0.0/33' is not a valid IP subnet",
        ),
        (
            "ip_or_cidr",
            [],
            "10.0.0.01",
            "'10.0.0.01' is not an accepted IP address, '10.0.0.1' is recommended",
        ),
        ("ip_or_cidr", [], "a.b", "'a.b' is not a valid IP address"),
        (
            "mac_addr",
            [
                "00:1b:77:49:54:fd",
                "00-1B-77-49-54-FD",
                "001b.7749.54fd",
                "001b774954fd",
                "001b77:4954fd",
            ],
            "00:1b:77:49:54",
            "Invalid MAC address.",
        ),
        ("mac_addr", [], "00:1b-77:49:54:fd", "Invalid MAC address."),
        (
            "iso_8601",
            [
                "2015-03-12T12:00:00Z",
                "2015-03-12",
                "2015-3-1",
                "20150312T1200+0100",
                "2015-03-12 12:00:00.5-05:00",
                "2015",
            ],
            "2015-13-12",
            "not an ISO 8601 date and time",
        ),
        ("iso_8601", [], "2015-03-12T25:00", "not an ISO 8601 date and time"),
        ("iso_8601", [], "12:00", "not an ISO 8601 date and time"),
        (
            "timezone",
            ["Europe/Paris", "utc", "america/new_york", ""],
            "Mars/Olympus",
            "Invalid timezone: 'Mars/Olympus'",
        ),
        (
            "cron_expression",
            ["*/5 * * * *", "0 12 * * MON-FRI", "@daily", ""],
            "61 * * * *",
            "Invalid CRON expression: [61 * * * *] is not acceptable, out of range",
        ),
        (
            "cron_expression",
            [],
            "* * *",
            "Invalid CRON expression: Exactly 5, 6 or 7 columns has to be specified for iterator expression.",
        ),
        (
            "dns_name",
            ["web", "web.example.com", "web.example.com.", "x-1.y", ""],
            "web..example",
            "'web..example' not in valid format. Reason: Encountered an empty component.",
        ),
        (
            "dns_name",
            [],
            "-web.example",
            "'-web.example' not in valid format. Reason: Name '-web' must not start or end with a hyphen.",
        ),
        (
            "dns_name",
            [],
            "Web.example",
            "'Web.example' not in valid format. Reason: Name 'Web' must be 1-63 characters long, each of which can only be alphanumeric or a hyphen.",
        ),
        (
            "dns_name",
            [],
            "web.example.123.",
            "'web.example.123.' not in valid format. Reason: TLD '123' must not be all numeric.",
        ),
        (
            "dns_name",
            [],
            "a." * 129,
            f"'{'a.' * 129}' not in valid format. Reason: '{'a.' * 128}a' exceeds the 255 character FQDN limit",
        ),
        ("dns_domain", ["example.com.", ""], "example.com", "'example.com' must end with '.'."),
        (
            "rel_dns_name",
            ["web", "web.internal", ""],
            "web.example.com.",
            "'web.example.com.' is a FQDN. It should be a relative domain name.",
        ),
        (
            "rel_dns_name",
            [],
            "a" * 253,
            f"'{'a' * 253}' contains '253' characters. Adding a domain name will cause it to exceed the maximum length of a FQDN of '255'.",
        ),
        (
            "expiration",
            ["2031-01-01T00:00:00Z", "2030-06-01T12:00:01", ""],
            "2030-06-01T12:00:00Z",
            "Expiration 2030-06-01T12:00:00Z is invalid: Expiration time is out of date.",
        ),
        ("expiration", [], "soon", "Expiration soon is invalid: not an ISO 8601 date and time"),
        (
            "json_string",
            ['{"a": 1}', "[]", "3"],
            "{a",
            "JSON string is not valid: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            "json_string",
            ["[" * 100 + "]" * 100],
            "[" * 100_000 + "]" * 100_000,  # was a RecursionError
            "JSON string is not valid: nesting is deeper than 100 levels",
        ),
    ],
)
def test_each_constraint_by_heats_rule(name: str, good: list[str], bad: str, message: str) -> None:
    context = ConstraintContext(now=NOW)
    for value in good:
        assert problem(name, value, context=context) is None, value
    assert problem(name, bad, context=context) == f"Error validating value '{bad}': {message}"


def test_lists_are_checked_item_by_item_and_hidden_values_never_shown() -> None:
    assert problem("ip_addr", ["10.0.0.1", "::1"]) is None
    assert problem("ip_addr", ["10.0.0.1", "x"]) == "Error validating value 'x': Invalid IP address"
    assert problem("ip_addr", "S3CRET", show_value=False) == "the value does not validate ip_addr"
    assert problem("ip_addr", 5) == "Error validating value '5': Invalid IP address"


def test_checks_that_need_a_context_pass_without_one() -> None:
    assert problem("expiration", "2001-01-01T00:00:00Z") is None
    assert problem("heat.resource_type", "Any::Thing") is None
    assert problem("nova.flavor", "anything") is None
    known = ConstraintContext(resource_type_exists=lambda name: name == "A::B")
    assert problem("heat.resource_type", "A::B", context=known) is None
    assert problem("heat.resource_type", ["A::B", "A::C"], context=known) == (
        "Error validating value 'A::C': The following resource types could not be found: A::C"
    )


@given(st.ip_addresses())
def test_every_ip_address_passes_ip_addr_and_ip_or_cidr(address: Any) -> None:
    assert problem("ip_addr", str(address)) is None
    assert problem("ip_or_cidr", str(address)) is None


@given(st.ip_addresses(), st.integers(0, 128))
def test_networks_pass_net_cidr_in_their_written_form(address: Any, prefix: int) -> None:
    prefix = min(prefix, address.max_prefixlen)
    network = ipaddress.ip_interface(f"{address}/{prefix}")
    assert problem("net_cidr", str(network)) is None


@given(st.datetimes(timezones=st.just(UTC)), st.sampled_from(["T", " "]))
def test_iso_8601_reads_what_python_writes(moment: datetime, separator: str) -> None:
    assert parse_iso_8601(moment.isoformat(sep=separator)) == moment


# --- in templates -------------------------------------------------------------------------

HEAD = "heat_template_version: 2018-08-31\n"


def prepare(
    text: str, schemas: StaticTypeSchemas, identity: StackIdentity, **kwargs: Any
) -> StackDefinition:
    return prepare_stack(
        load_template(HEAD + text, "t.yaml"), identity=identity, schemas=schemas, **kwargs
    )


def messages(error: TemplateError) -> list[str]:
    errors = error.errors if isinstance(error, TemplateErrors) else [error]
    return [e.format() for e in errors]


PARAMETERS = """\
parameters:
  address:
    type: string
    constraints:
      - custom_constraint: ip_addr
  servers:
    type: comma_delimited_list
    default: 10.0.0.1,10.0.0.2
    constraints:
      - custom_constraint: ip_addr
        description: every server must be an IP address
  flavor:
    type: string
    default: m1.small
    constraints: [{custom_constraint: nova.flavor}]
  until:
    type: string
    default: '2030-07-01T00:00:00Z'
    constraints: [{custom_constraint: expiration}]
"""


def test_a_failing_value_is_reported_at_the_parameter(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    with pytest.raises(TemplateError) as info:
        prepare(PARAMETERS, schemas, identity, parameters={"address": "10.0.0", "servers": "a"})
    assert messages(info.value) == [
        "t.yaml:3: parameters.address: invalid value given for parameter 'address': "
        "Error validating value '10.0.0': Invalid IP address",
        "t.yaml:7: parameters.servers: invalid value given for parameter 'servers': "
        "every server must be an IP address",
    ]


def test_unchecked_constraints_are_noted(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    definition = prepare(PARAMETERS, schemas, identity, parameters={"address": "::1"})
    assert definition.parameters["servers"] == ["10.0.0.1", "10.0.0.2"]
    assert definition.notes == (
        "parameter 'flavor': custom_constraint nova.flavor was not checked: it looks the value "
        "up in OpenStack, and there is no OpenStack here",
        "parameter 'until': custom_constraint expiration was checked for its form only: no "
        "current time was given to compare it with",
    )
    timed = prepare(PARAMETERS, schemas, identity, parameters={"address": "::1"}, now=NOW)
    assert len(timed.notes) == 1


def test_expiration_is_compared_with_the_time_given(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    later = NOW + timedelta(days=60)
    with pytest.raises(TemplateError) as info:
        prepare(PARAMETERS, schemas, identity, parameters={"address": "::1"}, now=later)
    assert messages(info.value) == [
        "t.yaml:19: parameters.until.default: invalid default: Error validating value "
        "'2030-07-01T00:00:00Z': Expiration 2030-07-01T00:00:00Z is invalid: Expiration time "
        "is out of date."
    ]


def test_resource_types_are_looked_up_through_the_registry(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = "parameters:\n  kind:\n    type: string\n    constraints: [{custom_constraint: heat.resource_type}]\n"
    assert prepare(text, schemas, identity, parameters={"kind": "Test::Server"})
    with pytest.raises(TemplateError) as info:
        prepare(text, schemas, identity, parameters={"kind": "Test::Sever"})
    assert messages(info.value) == [
        "t.yaml:3: parameters.kind: invalid value given for parameter 'kind': Error validating "
        "value 'Test::Sever': The following resource types could not be found: Test::Sever"
    ]


def test_property_schemas_check_custom_constraints() -> None:
    schema = {
        "address": PropertySchema(
            PropertyType.STRING, constraints=(Constraint("custom_constraint", "ip_addr"),)
        )
    }
    _, problems = validate_properties({"address": "::1"}, schema)
    assert problems == []
    _, problems = validate_properties({"address": "nope"}, schema)
    assert [(p.path, p.message) for p in problems] == [
        (("address",), "Error validating value 'nope': Invalid IP address")
    ]


def test_provider_template_properties_keep_their_parameters_custom_constraints(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    box = "heat_template_version: 2018-08-31\nparameters:\n  ip: {type: string, constraints: [{custom_constraint: ip_addr}]}\n"
    text = "resources:\n  b:\n    type: box.yaml\n    properties: {ip: nope}\n"
    with pytest.raises(TemplateError) as info:
        prepare(text, schemas, identity, files={"box.yaml": box})
    assert messages(info.value) == [
        "t.yaml:5: resources.b.properties.ip: Error validating value 'nope': Invalid IP address"
    ]
