"""Session-token updates per second, without and with a pipeline (Redis in Action 4.5).

    python bench/pipelining.py [--seconds 2]

Runs against throwaway redis-servers, over TCP loopback and over a unix socket,
with the same client, side by side with the limit of one round trip per call
(PING, i.e. what the pipelined variant could reach if its six commands cost
nothing). Absolute figures are noise on a shared machine; compare the ratios.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import django
from django.conf import settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
settings.configure(INSTALLED_APPS=[], REDISPARTS={})
django.setup()

from redisparts_app.services.sessions import update_token, update_token_pipelined  # noqa: E402
from redisparts_app.testing import RedisServer  # noqa: E402


def rate(function, seconds: float) -> float:
    """Calls per second of ``function`` over ``seconds`` of wall time."""
    count, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        for _ in range(100):
            function()
        count += 100
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each run")
    seconds = parser.parse_args().seconds
    print(
        f"{'transport':<10} {'update_token':>14} {'pipelined':>14} {'PING (limit)':>14} {'gain':>6}"
    )
    for transport in ("tcp", "unix"):
        with (
            tempfile.TemporaryDirectory() as directory,
            RedisServer(directory, unix_socket=transport == "unix") as server,
        ):
            client = server.client()
            plain = rate(lambda c=client: update_token("token", "user", "item", client=c), seconds)
            piped = rate(
                lambda c=client: update_token_pipelined("token", "user", "item", client=c), seconds
            )
            ping = rate(client.ping, seconds)
        gain = piped / plain
        print(f"{transport:<10} {plain:>12.0f}/s {piped:>12.0f}/s {ping:>12.0f}/s {gain:>5.1f}x")


if __name__ == "__main__":
    main()
