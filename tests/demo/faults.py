"""Helpers of the fault tests: the site's management commands as real processes configured
through the environment, and workloads that keep going through a Redis outage."""

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[2]
# What a client sees while Redis is down or failing over: the call may or may not have
# taken effect, so the workloads count it as not acknowledged.
OUTAGE = (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError)
BACKOFF_LINE = re.compile(r"Redis unreachable .*; retrying in ([0-9.]+)s")


def start_command(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``manage.py <args>`` with the demo site's settings and ``env`` on top."""
    environment = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    environment.update(DJANGO_SETTINGS_MODULE="marketplace.settings", **env)
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=environment,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def stop_command(process: subprocess.Popen, timeout: float = 60.0) -> int:
    """SIGTERM the process (it finishes its current step) and return its exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def until_stopped(
    stop: Any,
    attempt: Callable[[int], Any],
    *,
    refusals: tuple[type[Exception], ...] = (),
    pause: float = 0.002,
) -> dict:
    """Call ``attempt(n)`` for n = 0, 1, ... until ``stop`` (an Event) is set.

    Return ``acknowledged``, the (n, result) of the attempts that returned, and
    ``failed``, how many met an outage or one of the ``refusals`` (e.g.
    TaskNotReplicated); any other error fails the workload.
    """
    acknowledged, failed, n = [], 0, 0
    while not stop.is_set():
        try:
            result = attempt(n)
        except (*OUTAGE, *refusals):
            failed += 1
            time.sleep(0.05)
        else:
            acknowledged.append((n, result))
            time.sleep(pause)
        n += 1
    return {"acknowledged": acknowledged, "failed": failed}


def retry_through_outage(call: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Return ``call()``, retrying while Redis is unreachable (for reads, which are safe)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except OUTAGE:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def backoff_delays(log: Path) -> list[float]:
    """The delays announced by the worker's or scheduler's back-off lines in ``log``."""
    return [float(delay) for delay in BACKOFF_LINE.findall(log.read_text(errors="replace"))]
