import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from marketplace.demo_data import ACCOUNTS
from marketplace.summary import SUMMARY_INTERVAL, refresh_market_summary
from marketplace.tasks import relay_all_sold_emails
from redisparts_app.embedded import EmbeddedRedis
from redisparts_app.exceptions import RedisPartsError

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
# Seconds between two relays of recorded sales by this process.
RELAY_INTERVAL = 1.0
logger = logging.getLogger("marketplace")


class Command(BaseCommand):
    help = (
        "Run the demo on the embedded Redis until Ctrl-C: migrate, load the demo data "
        "(load_demo), then the web server, a task worker (rp_worker on the site's queues) "
        "and the scheduler (rp_scheduler); this process relays recorded sales to the e-mail "
        "queue meanwhile (what market_relay does). Ctrl-C or SIGTERM stops them all."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
        parser.add_argument("--port", type=int, default=8000, help="port to serve on")

    def handle(self, *args, host, port, **options):
        if not 0 < port < 65536:
            raise CommandError(f"--port must be between 1 and 65535, got {port}", returncode=2)
        _check_port_free(host, port)
        embedded = self._start_embedded()
        children: list[subprocess.Popen] = []
        # SIGTERM (from a service manager or `kill`) stops the demo like Ctrl-C.
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            call_command("migrate", interactive=False, verbosity=0)
            call_command("load_demo", verbosity=0)
            # Data kept from an earlier version of the demo predates the registries.
            call_command("rp_registry", "--rebuild", verbosity=0)
            for name, argv in self._processes(host, port):
                self.stdout.write(f"  starting {name}: manage.py {' '.join(argv)}")
                # Own session: Ctrl-C reaches only this runner, which then stops each child once.
                children.append(
                    subprocess.Popen([sys.executable, MANAGE, *argv], start_new_session=True)
                )
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nThe demo runs at http://{host}:{port}/ - press Ctrl-C to stop.\n"
                )
            )
            self.stdout.write("Demo logins (user / password):")
            for account in ACCOUNTS:
                role = "  (staff: /admin/)" if account.staff else ""
                self.stdout.write(f"  {account.username:<8} {account.password}{role}")
            self.stdout.write(f"Sold e-mails are written to {settings.EMAIL_FILE_PATH}/\n")
            self._wait(children)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping...")
        finally:
            _stop_all(children)
            if embedded is not None:
                embedded.stop()
                self.stdout.write(f"Stopped redis-server ({embedded.socket}); its data is kept.")

    def _processes(self, host: str, port: int) -> list[tuple[str, list[str]]]:
        """Name and manage.py arguments of each process the demo runs."""
        return [
            ("web", ["runserver", f"{host}:{port}", "--noreload"]),
            (
                "worker",
                [
                    "rp_worker",
                    *settings.MARKETPLACE["WORKER_QUEUES"],
                    *settings.MARKETPLACE["WORKER_OPTIONS"],
                ],
            ),
            ("scheduler", ["rp_scheduler"]),
            ("counter cleaner", ["rp_clean_counters"]),
        ]

    def _start_embedded(self) -> EmbeddedRedis | None:
        if settings.REDISPARTS.get("EMBEDDED") is None:
            self.stdout.write(f"Using {_redis_described()}")
            return None
        try:
            server = EmbeddedRedis.from_settings()
            server.start()
        except RedisPartsError as exc:
            raise CommandError(str(exc), returncode=3) from exc
        self.stdout.write(f"Embedded redis-server at {server.url}")
        return server

    def _wait(self, children: list[subprocess.Popen]) -> None:
        """Return when Ctrl-C arrives; fail when a child exits on its own.

        Meanwhile relay recorded sales every RELAY_INTERVAL seconds: the sold e-mails of
        purchases whose web request died before its own relay (``manage.py market_relay``
        does the same outside the demo); and copy the market's figures into the database
        every SUMMARY_INTERVAL seconds (marketplace.summary).
        """
        next_relay = next_summary = 0.0
        while True:
            for child in children:
                if child.poll() is not None:
                    command = " ".join(map(str, child.args[2:]))
                    raise CommandError(f"process {command} exited with {child.returncode}")
            if time.monotonic() >= next_relay:
                self._relay_pass()
                next_relay = time.monotonic() + RELAY_INTERVAL
            if time.monotonic() >= next_summary:
                self._summary_pass()
                next_summary = time.monotonic() + SUMMARY_INTERVAL
            time.sleep(0.2)

    def _relay_pass(self) -> int:
        """Relay the recorded sales; log a failure (the next pass retries) and return 0."""
        try:
            return relay_all_sold_emails()
        except (redis.RedisError, RedisPartsError, ValueError) as exc:
            logger.warning("relaying sold e-mails failed: %s", exc)
            return 0

    def _summary_pass(self) -> None:
        """Refresh the market summary; log a failure (the next pass retries)."""
        try:
            refresh_market_summary()
        except (redis.RedisError, RedisPartsError, DatabaseError) as exc:
            logger.warning("refreshing the market summary failed: %s", exc)


def _check_port_free(host: str, port: int) -> None:
    """Fail before starting anything when the web server could not listen."""
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise CommandError(
            f"cannot serve on {host}:{port} ({exc.strerror}); choose another with --port",
            returncode=2,
        ) from exc


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def _stop_all(children: list[subprocess.Popen], timeout: float = 10.0) -> None:
    # SIGTERM, not SIGINT: a process started in the background of a non-interactive shell
    # inherits SIGINT ignored, and the web server would then never hear it. The worker and
    # the scheduler finish their current task on SIGTERM.
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _redis_described() -> str:
    """Which Redis the settings name, from the environment (see marketplace/settings.py)."""
    if settings.REDIS_CLUSTER_NODES:
        nodes = ", ".join(f"{host}:{port}" for host, port in settings.REDIS_CLUSTER_NODES)
        return f"the Redis Cluster at {nodes}"
    if settings.REDIS_SENTINELS:
        sentinels = ", ".join(f"{host}:{port}" for host, port in settings.REDIS_SENTINELS)
        return f"the master {settings.REDIS_SENTINEL_MASTER!r} of the sentinels at {sentinels}"
    return f"the Redis at {settings.REDIS_URL}"
