"""A real PostgreSQL server for the tests: started in a temporary directory on a loopback port, then removed.

It comes from the Debian `postgresql` package (`make install` installs it).
`initdb` refuses to run as root, so as root the server runs as the `postgres`
system user, in a directory that user owns; otherwise as the current user.
Authentication is `trust`, and the server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tau2_a2a.protocol.hosting import free_port

SUPERUSER = "postgres"


def binaries() -> Path | None:
    """The directory of initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    """One server; `create_database` gives each test a fresh database on it."""

    def __init__(self) -> None:
        bindir = binaries()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed: `make install` installs the Debian package.")
        self.bindir = bindir
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="tau2-a2a-postgres-"))
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.directory, user=SUPERUSER)
        self.data = self.directory / "data"
        self._run("initdb", "-D", str(self.data), "--auth=trust", f"--username={SUPERUSER}", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.directory / "server.log"), "-w", "start", "-o",
                  f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *arguments: str) -> None:
        command = [str(self.bindir / program), *arguments]
        if self._as_postgres:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.directory, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
