"""Service URLs as they may be shown: a password in a URL never reaches a log or a terminal."""

from __future__ import annotations


def without_password(url: str) -> str:
    """``scheme://user@host/…`` for ``scheme://user:secret@host/…``; other text unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    location, slash, path = rest.partition("/")
    if "@" not in location:
        return url
    credentials, _, host = location.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}@{host}{slash}{path}"
