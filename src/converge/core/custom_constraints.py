"""Heat's custom constraints (``custom_constraint: ip_addr``): value checks known by name.

Heat registers each one as a plugin (the ``heat.constraints`` entry points of its
setup.cfg). Those that need no cloud are checked here by Heat's rules, with its messages.
The others look the value up in an OpenStack service (``nova.flavor``, ``glance.image`` …):
there is no OpenStack here, so they are accepted unchecked and the stack's notes say so.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import cache
from typing import Any

from converge.core.bounded_json import parse_json


@dataclass(frozen=True)
class ConstraintContext:
    """What two checks need beyond the value; without it they check only what they can."""

    now: datetime | None = None  # aware; ``expiration`` must lie after it
    resource_type_exists: Callable[[str], bool] | None = None  # for ``heat.resource_type``


NO_CONTEXT = ConstraintContext()
Check = Callable[[str, ConstraintContext], str | None]  # the reason a text fails, or None


# --- addresses (Heat uses neutron-lib's validators: no whitespace, no IPv4 leading zeros) --


def _is_ip_address(text: str) -> bool:
    if "%" in text:  # the standard library takes IPv6 scope ids; neutron does not
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ip_address(text: str, context: ConstraintContext) -> str | None:
    return None if _is_ip_address(text) else "Invalid IP address"


def _ip_address_problem(text: str) -> str | None:
    """neutron-lib's message, which names the form without leading zeros when there is one."""
    if _is_ip_address(text):
        return None
    octets = text.split(".")
    if len(octets) == 4 and all(re.fullmatch(r"[0-9]{1,3}", o) and int(o) < 256 for o in octets):
        plain = ".".join(str(int(octet)) for octet in octets)
        return f"'{text}' is not an accepted IP address, '{plain}' is recommended"
    return f"'{text}' is not a valid IP address"


def _subnet_problem(text: str) -> str | None:
    try:
        interface = ipaddress.ip_interface(text)
    except ValueError:
        return f"'{text}' is not a valid IP subnet"
    if "/" not in text or (interface.version == 4 and str(interface) != text):
        return f"'{text}' isn't a recognized IP subnet cidr, '{interface.network}' is recommended"
    return None


def _net_cidr(text: str, context: ConstraintContext) -> str | None:
    return _subnet_problem(text)


def _ip_or_cidr(text: str, context: ConstraintContext) -> str | None:
    return _subnet_problem(text) if "/" in text else _ip_address_problem(text)


# netaddr's EUI-48 spellings: six groups, three (Cisco), two halves (PostgreSQL), bare
_MAC_FORMS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"[0-9a-f]{1,2}([:-])(?:[0-9a-f]{1,2}\1){4}[0-9a-f]{1,2}",
        r"[0-9a-f]{1,4}([:.-])[0-9a-f]{1,4}\1[0-9a-f]{1,4}",
        r"[0-9a-f]{5,6}[:-][0-9a-f]{5,6}",
        r"[0-9a-f]{11,12}",
    )
)


def _mac_address(text: str, context: ConstraintContext) -> str | None:
    return None if any(form.fullmatch(text) for form in _MAC_FORMS) else "Invalid MAC address."


# --- DNS names (heat/common/netutils.py validate_dns_format: lower case only, as Heat) ----

_FQDN_MAX_LEN = 255
_DNS_LABEL = re.compile(r"[a-z0-9-]{1,63}")


def _dns_format_problem(text: str) -> str | None:
    trimmed = text.removesuffix(".")
    if len(trimmed) > _FQDN_MAX_LEN:
        return f"'{trimmed}' exceeds the {_FQDN_MAX_LEN} character FQDN limit"
    labels = trimmed.split(".")
    for label in labels:
        if not label:
            return "Encountered an empty component."
        if label.startswith("-") or label.endswith("-"):
            return f"Name '{label}' must not start or end with a hyphen."
        if not _DNS_LABEL.fullmatch(label):
            return (
                f"Name '{label}' must be 1-63 characters long, each of which can only be "
                "alphanumeric or a hyphen."
            )
    if text.endswith(".") and len(labels) > 1 and re.fullmatch(r"[0-9]+", labels[-1]):
        return f"TLD '{labels[-1]}' must not be all numeric."
    return None


def _dns_name(text: str, context: ConstraintContext) -> str | None:
    problem = _dns_format_problem(text) if text else None
    return None if problem is None else f"'{text}' not in valid format. Reason: {problem}"


def _relative_dns_name(text: str, context: ConstraintContext) -> str | None:
    if not text:
        return None
    if text.endswith("."):
        return f"'{text}' is a FQDN. It should be a relative domain name."
    if len(text) > _FQDN_MAX_LEN - 3:
        return (
            f"'{text}' contains '{len(text)}' characters. Adding a domain name will cause it "
            f"to exceed the maximum length of a FQDN of '{_FQDN_MAX_LEN}'."
        )
    return _dns_name(text, context)


def _dns_domain(text: str, context: ConstraintContext) -> str | None:
    if not text:
        return None
    problem = _dns_name(text, context)
    if problem is None and not text.endswith("."):
        problem = f"'{text}' must end with '.'."
    return problem


# --- times --------------------------------------------------------------------------------

# The forms the iso8601 library (Heat's parser) reads: a year, a month or a day, then
# optionally a time with seconds, fraction and zone; dashes and colons may be left out.
_ISO_8601 = re.compile(
    r"""(?P<year>[0-9]{4})
        (?: -(?P<month>[0-9]{1,2}) (?:-(?P<day>[0-9]{1,2}))?
          | (?P<compact_month>[0-9]{2})(?P<compact_day>[0-9]{2}) )?
        (?: [T\ ](?P<hour>[0-9]{2})
            (?: :?(?P<minute>[0-9]{2})
                (?: :?(?P<second>[0-9]{1,2}) (?:[.,](?P<fraction>[0-9]+))? )? )?
            (?P<zone> Z | (?P<sign>[-+])(?P<zone_hour>[0-9]{2}) (?::?(?P<zone_minute>[0-9]{2}))? )?
        )?""",
    re.VERBOSE,
)


def parse_iso_8601(text: str) -> datetime | None:
    """The moment ``text`` names (UTC when it names no zone), or None if it is not ISO 8601."""
    match = _ISO_8601.fullmatch(text)
    if match is None:
        return None
    part = match.groupdict()
    day = part["day"] or part["compact_day"]
    if part["hour"] is not None and day is None:
        return None  # a time needs a whole date
    zone = UTC
    if part["sign"] is not None:
        offset = timedelta(hours=int(part["zone_hour"]), minutes=int(part["zone_minute"] or 0))
        try:
            zone = timezone(-offset if part["sign"] == "-" else offset)
        except ValueError:
            return None
    try:
        return datetime(
            int(part["year"]),
            int(part["month"] or part["compact_month"] or 1),
            int(day or 1),
            int(part["hour"] or 0),
            int(part["minute"] or 0),
            int(part["second"] or 0),
            int((part["fraction"] or "0")[:6].ljust(6, "0")),
            tzinfo=zone,
        )
    except ValueError:
        return None


def _iso_8601(text: str, context: ConstraintContext) -> str | None:
    return None if parse_iso_8601(text) else "not an ISO 8601 date and time"


def _expiration(text: str, context: ConstraintContext) -> str | None:
    if not text:
        return None
    moment = parse_iso_8601(text.strip())
    if moment is None:
        reason = "not an ISO 8601 date and time"
    elif context.now is not None and moment <= context.now:
        reason = "Expiration time is out of date."
    else:
        return None
    return f"Expiration {text} is invalid: {reason}"


def _cron_expression(text: str, context: ConstraintContext) -> str | None:
    if not text:
        return None
    # imported on first use: it brings python-dateutil, and few templates need it
    from croniter import croniter

    try:
        croniter(text)
    except ValueError as exc:  # croniter's errors are ValueErrors
        return f"Invalid CRON expression: {exc}"
    return None


@cache
def _time_zones() -> dict[str, str]:
    """Every IANA zone name by its lower-case form (read once, from the system's tz data)."""
    import zoneinfo

    return {name.lower(): name for name in zoneinfo.available_timezones()}


def _timezone(text: str, context: ConstraintContext) -> str | None:
    # pytz, which Heat asks, finds zones whatever their case
    if not text or text.lower() in _time_zones():
        return None
    return f"Invalid timezone: '{text}'"


# --- the rest -----------------------------------------------------------------------------


def _json_string(text: str, context: ConstraintContext) -> str | None:
    try:
        parse_json(text)
    except ValueError as exc:
        return f"JSON string is not valid: {exc}"
    return None


def _resource_type(text: str, context: ConstraintContext) -> str | None:
    exists = context.resource_type_exists
    if exists is None or exists(text):
        return None
    return f"The following resource types could not be found: {text}"


_CHECKS: dict[str, Check] = {
    "cron_expression": _cron_expression,
    "dns_domain": _dns_domain,
    "dns_name": _dns_name,
    "expiration": _expiration,
    "heat.resource_type": _resource_type,
    "ip_addr": _ip_address,
    "ip_or_cidr": _ip_or_cidr,
    "iso_8601": _iso_8601,
    "json_string": _json_string,
    "mac_addr": _mac_address,
    "net_cidr": _net_cidr,
    "rel_dns_name": _relative_dns_name,
    "timezone": _timezone,
}

# Heat's constraints that look a value up in an OpenStack service, by service (its setup.cfg
# and the constraints its resource types declare, old names included).
_CLOUD_LOOKUPS = {
    "barbican": "container secret",
    "blazar": "reservation",
    "cinder": "backup qos_specs snapshot volume vtype",
    "designate": "domain zone",
    "glance": "image",
    "ironic": "node portgroup",
    "keystone": "domain group project region role service user",
    "magnum": "baymodel cluster_template",
    "manila": "share_network share_snapshot share_type",
    "mistral": "workflow",
    "monasca": "notification",
    "neutron": "address_scope bgpvpn flow_classifier lb.provider lbaas.listener "
    "lbaas.loadbalancer lbaas.pool lbaas.provider network port port_pair port_pair_group "
    "qos_policy router security_group segment subnet subnetpool taas.tap_flow "
    "taas.tap_service",
    "nova": "flavor host keypair network server",
    "octavia": "availabilityzoneprofile flavor flavorprofile l7policy listener loadbalancer pool",
    "sahara": "cluster cluster_template data_source image job_binary job_type plugin",
    "senlin": "cluster policy policy_type profile profile_type",
    "trove": "flavor",
    "zaqar": "queue",
}
CLOUD_CONSTRAINTS = frozenset(
    f"{service}.{name}" for service, names in _CLOUD_LOOKUPS.items() for name in names.split()
)
KNOWN_CONSTRAINTS = frozenset(_CHECKS) | CLOUD_CONSTRAINTS


def custom_constraint_name_problem(name: Any) -> str | None:
    """What is wrong with a ``custom_constraint:`` name, or None for one Heat knows."""
    if not isinstance(name, str):
        return "custom_constraint needs a constraint name"
    if name in KNOWN_CONSTRAINTS:
        return None
    close = difflib.get_close_matches(name, sorted(KNOWN_CONSTRAINTS), n=1)
    if close:
        return f"unknown custom_constraint {name!r} (did you mean {close[0]!r}?)"
    return (
        f"unknown custom_constraint {name!r}; Heat's are {', '.join(sorted(_CHECKS))} and "
        "OpenStack look-ups such as nova.flavor"
    )


def _text(item: Any) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    return item if isinstance(item, str) else str(item)


def custom_constraint_problem(
    name: str, value: Any, *, show_value: bool = True, context: ConstraintContext = NO_CONTEXT
) -> str | None:
    """Heat's message when ``value`` fails the constraint ``name``, else None.

    A list (comma_delimited_list) is checked item by item. Constraints not checked here
    (OpenStack look-ups, names a plugin made up) pass.
    """
    check = _CHECKS.get(name)
    if check is None:
        return None
    for item in value if isinstance(value, list | tuple) else (value,):
        text = _text(item)
        reason = check(text, context)
        if reason is not None:
            if not show_value:
                return f"the value does not validate {name}"
            return f"Error validating value '{text}': {reason}"
    return None


def unchecked_note(name: str, subject: str, context: ConstraintContext) -> str | None:
    """A note for the stack when ``subject``'s constraint ``name`` is not (fully) checked."""
    if name in CLOUD_CONSTRAINTS:
        return (
            f"{subject}: custom_constraint {name} was not checked: it looks the value up in "
            "OpenStack, and there is no OpenStack here"
        )
    if name == "expiration" and context.now is None:
        return (
            f"{subject}: custom_constraint expiration was checked for its form only: no "
            "current time was given to compare it with"
        )
    return None
