"""Throwaway redis-server processes for test suites (this project's and yours).

Each server is a child process bound to loopback (or a unix socket only), with
its files in a directory the caller owns; nothing is daemonized, so a crashed
test run leaves no server behind once its process group is gone.
"""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from .server import find_redis_server


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (never 6379)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port != 6379:
            return port


class RedisServer:
    """One redis-server child process.

    ``unix_socket=True`` listens on ``<directory>/redis.sock`` with no TCP port;
    otherwise on 127.0.0.1:``port`` (a free port when None). ``args`` are extra
    command-line options, e.g. ``["--appendonly", "yes"]``.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        port: int | None = None,
        unix_socket: bool = False,
        args: Sequence[str] = (),
        binary: str | os.PathLike | None = None,
    ) -> None:
        self.directory = Path(directory).absolute()
        self.binary = Path(binary) if binary else find_redis_server()
        self.unix_socket = unix_socket
        self.port = 0 if unix_socket else (port or free_port())
        self.host = "127.0.0.1"
        self.socket = self.directory / "redis.sock" if unix_socket else None
        self.args = list(args)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        if self.socket is not None:
            return f"unix://{self.socket}?db=0"
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command_line(self) -> list[str]:
        args = [str(self.binary), "--port", str(self.port), "--bind", self.host,
                "--dir", str(self.directory), "--save", "", "--appendonly", "no",
                "--logfile", str(self.directory / "redis.log")]  # fmt: skip
        if self.socket is not None:
            args += ["--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        return args + self.args

    def start(self, timeout: float = 10.0) -> "RedisServer":
        """Start the process and wait until it answers PING."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.command_line(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.stderr
                    else ""
                )
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode}: {err}{self.log_tail()}"
                )
            try:
                with self.client(socket_timeout=1) as client:
                    if client.ping():
                        return self
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"redis-server did not answer within {timeout}s: {self.log_tail()}"
                )
            time.sleep(0.02)

    def client(self, **kwargs: Any) -> redis.Redis:
        """Return a new client for this server (bytes, like the services use)."""
        if self.socket is not None:
            return redis.Redis(unix_socket_path=str(self.socket), **kwargs)
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the process (SIGTERM) and wait for it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Kill the process at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 10) -> str:
        try:
            text = (self.directory / "redis.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
