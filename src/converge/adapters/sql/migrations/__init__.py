"""Alembic migrations of the store's schema, and the versions this converge knows.

The store compares the stored version with ``SCHEMA_HEAD`` on open and runs Alembic only
when it is behind (loading Alembic's scripts costs more than most commands).
``tests/contract/test_store.py`` checks that these match the scripts in ``versions/``.
"""

SCHEMA_REVISIONS = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005_api_tokens",
    "0006_sync_counter",
    "0007",
    "0008_leases",
    "0009_resource_host",
    "0010_sync_part",
    "0011_ids_never_reused",
)
SCHEMA_HEAD = SCHEMA_REVISIONS[-1]
