"""The SQL database: one that cannot be used is named without its password."""

from __future__ import annotations

import pytest

from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.service.jobs.database import Database, StoreError


def test_a_database_that_cannot_be_used_is_named_without_its_password() -> None:
    port = free_port()
    with pytest.raises(StoreError) as refused:
        Database(f"postgresql://tau2:s3cret-pw@127.0.0.1:{port}/evaluations").open()
    message = str(refused.value)
    assert message.startswith(f"Cannot use the database postgresql://tau2:***@127.0.0.1:{port}/evaluations: "
                              "OperationalError: ")
    assert message.endswith("Check that it runs and the URL is right.") and "s3cret-pw" not in message
    with pytest.raises(StoreError, match=r"^--database 'mysql://db/x' is neither a SQLite file nor a "
                                         r"postgresql:// URL\.$"):
        Database("mysql://db/x")
