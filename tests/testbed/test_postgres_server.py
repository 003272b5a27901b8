"""The tests' PostgreSQL server is real: a driver connects, and each database is fresh."""

from __future__ import annotations

from typing import Any

import psycopg


def test_the_server_answers_queries_and_gives_fresh_databases(postgres: Any) -> None:
    first, second = postgres.create_database("fresh_one"), postgres.create_database("fresh_two")
    with psycopg.connect(first, autocommit=True) as connection:
        connection.execute("CREATE TABLE marks (n integer)")
        connection.execute("INSERT INTO marks VALUES (41), (1)")
        assert connection.execute("SELECT sum(n) FROM marks").fetchone() == (42,)
        assert connection.execute("SELECT current_setting('listen_addresses')").fetchone() == ("127.0.0.1",)
    with psycopg.connect(second) as connection:
        assert connection.execute("SELECT to_regclass('marks')").fetchone() == (None,)
