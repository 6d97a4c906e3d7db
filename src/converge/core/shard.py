"""Which of the live processes is responsible for a key (pure; rendezvous hashing).

Several engines (or observers) share one database; each sweeps only the stacks that hash
to it. Rendezvous (highest random weight) hashing gives every member a score for the key
and picks the highest: every process computes the same owner from the same member set, and
when a member joins or dies only the keys it wins or held move — nobody else's share is
reshuffled, so a survivor does not re-sweep what another survivor already looks after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection


def owner(key: str, members: Collection[str]) -> str:
    """The member responsible for ``key``; ``ValueError`` when there is none."""
    if not members:
        raise ValueError(f"no live member to own {key!r}")
    return max(members, key=lambda member: (_score(member, key), member))


def share(keys: Collection[str], member: str, members: Collection[str]) -> set[str]:
    """The keys ``member`` is responsible for among ``members``."""
    return {key for key in keys if owner(key, members) == member}


def _score(member: str, key: str) -> int:
    digest = hashlib.blake2b(f"{member}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")
