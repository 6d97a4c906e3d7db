"""``make_url``: a correctly escaped URL from its parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlunsplit

from converge.core.template.functions.common import describe, is_dynamic
from converge.core.template.nodes import EvalContext, Function, resolve

_KEYS = ("scheme", "username", "password", "host", "port", "path", "query", "fragment")


class MakeUrl(Function):
    """``make_url: {scheme, username, password, host, port, path, query, fragment}``."""

    def validate_args(self) -> None:
        if not isinstance(self.args, Mapping):
            raise self.where.error(
                f"make_url expects a map with keys {', '.join(_KEYS)}, not {describe(self.args)}"
            )
        unknown = [key for key in self.args if key not in _KEYS]
        if unknown:
            raise self.where.error(
                f"make_url: unknown argument(s) {', '.join(map(str, unknown))}; "
                f"allowed: {', '.join(_KEYS)}"
            )
        self._check(self.args)

    def _check(self, args: Mapping[str, Any]) -> None:
        for key, value in args.items():
            if is_dynamic(value):
                continue
            if key == "query":
                if not isinstance(value, Mapping):
                    raise self.where.error(
                        f"make_url: 'query' must be a map, not {describe(value)}"
                    )
            elif key == "port":
                self._port(value)
            elif not isinstance(value, str):
                raise self.where.error(f"make_url: {key!r} must be a string, not {describe(value)}")

    def _port(self, value: Any) -> int:
        try:
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError
            port = int(value)
        except ValueError:
            raise self.where.error(f"make_url: invalid port {value!r}") from None
        if not 0 < port <= 65535:
            raise self.where.error(f"make_url: invalid port {port}; it must be in 1-65535")
        return port

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not isinstance(args, Mapping):
            raise self.where.error(f"make_url expects a map, not {describe(args)}")
        self._check(args)
        scheme = args.get("scheme", "")
        if ":" in scheme:
            raise self.where.error(f"make_url: the scheme must not contain ':' ({scheme!r})")
        netloc = ""
        username = quote(args.get("username", ""), safe="")
        password = quote(args.get("password", ""), safe="")
        if username or password:
            netloc = username + (":" + password if password else "") + "@"
        host = args.get("host", "")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        host = quote(host, safe=":")
        netloc += f"[{host}]" if ":" in host else host  # an IPv6 address goes in brackets
        port = args.get("port", "")
        if port:
            netloc += f":{self._port(port)}"
        path = quote(args.get("path", ""))
        query = urlencode(args.get("query", {})).replace("%2F", "/")
        fragment = quote(args.get("fragment", ""))
        return urlunsplit((scheme, netloc, path, query, fragment))
