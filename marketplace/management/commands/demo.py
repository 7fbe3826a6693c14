"""``manage.py demo``: the whole demo site in one command, until Ctrl-C.

Once it has read its arguments (``demo --help`` starts nothing), the runner starts the
embedded Redis (shared with other demos on the same data folder: the last one to stop
stops it, and only if a demo started it) and runs the system checks, then the web server
(uvicorn, ASGI), the task worker and the scheduler (which also fires the periodic
schedules of marketplace/tasks.py: the counter cleaner, the registry prune, the nightly
backup) as child processes in one process group of their own, apart from the
terminal's: Ctrl-C and a closed terminal reach the runner only, which stops the
children in order (SIGTERM, so the worker finishes its tasks) and then kills whatever
is left in their group (the worker's own children). A child that exits on its own is
started again after a short pause, at most MAX_RESTARTS times a minute; past that the
demo stops with an error.
"""

import collections
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from marketplace.demo_data import ACCOUNTS
from marketplace.mailers import default_mailer
from marketplace.summary import SUMMARY_INTERVAL, refresh_market_summary
from marketplace.tasks import relay_all_sold_emails
from redisparts_app.embedded import EmbeddedRedis
from redisparts_app.exceptions import RedisPartsError

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
# Seconds between two relays of recorded sales by this process.
RELAY_INTERVAL = 1.0
# A child restarted more often than this within RESTART_WINDOW seconds stops the demo.
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
# Pause before a restart: FIRST_BACKOFF seconds, doubled with each recent restart.
FIRST_BACKOFF = 0.5
# Seconds the children have to stop after SIGTERM before they are killed.
STOP_TIMEOUT = 10.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
logger = logging.getLogger("marketplace")


class Command(BaseCommand):
    help = (
        "Run the demo on the embedded Redis until Ctrl-C: migrate, load the demo data "
        "(load_demo), then the web server, a task worker (rp_worker on the site's queues), "
        "and the scheduler (rp_scheduler, which also fires the periodic schedules: the "
        "counter cleaner, the registry prune, the nightly backup), each restarted if it "
        "exits; this process relays recorded sales to the e-mail queue meanwhile (what "
        "market_relay does). Ctrl-C, SIGTERM or SIGHUP stops them all."
    )

    # Run in handle() once the embedded server is up, not before (it would be unreachable).
    requires_system_checks: tuple[str, ...] = ()

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
        parser.add_argument("--port", type=int, default=8000, help="port to serve on")

    def handle(self, *args, host, port, **options):
        if not 0 < port < 65536:
            raise CommandError(f"--port must be between 1 and 65535, got {port}", returncode=2)
        _check_port_free(host, port)
        # The children read the settings anew: the web server's asgi.py would otherwise
        # take DJANGO_DEBUG unset for production.
        os.environ.setdefault("DJANGO_DEBUG", "1" if settings.DEBUG else "0")
        # Each line out at once: the children's lines are copied in between (_relay).
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        self.stop = StopRequest()
        self.stop.install()
        embedded = self._start_embedded()
        children = ChildGroup()
        try:
            if not options.get("skip_checks"):  # call_command() skips them by default
                self.check()
            steps = [
                lambda: call_command("migrate", interactive=False, verbosity=0),
                lambda: call_command("load_demo", verbosity=0),
                # Data kept from an earlier version of the demo predates the registries.
                lambda: call_command("rp_registry", "--rebuild", verbosity=0),
            ]
            for step in steps:
                if self.stop.requested:
                    return
                step()
            for name, argv in self._processes(host, port):
                if self.stop.requested:
                    return
                shown = " ".join(argv).replace(MANAGE, "manage.py").removeprefix("-m ")
                self.stdout.write(f"  starting {name}: {shown}")
                children.start(Child(name, argv))
            self._welcome(host, port)
            self._run(children)
        finally:
            self._shut_down(children, embedded)

    def _processes(self, host: str, port: int) -> list[tuple[str, list[str]]]:
        """Name and Python arguments of each process the demo runs."""
        # The site through uvicorn (ASGI), as in production, so chat pages get their
        # messages pushed; it serves the static files itself with debug on (asgi.py).
        # Open event streams never end: after SIGTERM they get 2 s, then are closed.
        web = ["-m", "uvicorn", "marketplace.asgi:application", "--host", host, "--port",
               str(port), "--timeout-graceful-shutdown", "2"]  # fmt: skip
        return [
            ("web", web),
            (
                "worker",
                [
                    MANAGE,
                    "rp_worker",
                    *settings.MARKETPLACE["WORKER_QUEUES"],
                    *settings.MARKETPLACE["WORKER_OPTIONS"],
                ],
            ),
            ("scheduler", [MANAGE, "rp_scheduler"]),
        ]

    def _welcome(self, host: str, port: int) -> None:
        self.stdout.write(
            self.style.SUCCESS(
                f"\nThe demo runs at http://{host}:{port}/ - press Ctrl-C to stop.\n"
            )
        )
        self.stdout.write("Demo logins (user / password):")
        for account in ACCOUNTS:
            role = "  (staff: /admin/)" if account.staff else ""
            self.stdout.write(f"  {account.username:<8} {account.password}{role}")
        self.stdout.write(f"Sold e-mails are written to {default_mailer()[1]}/\n")

    def _start_embedded(self) -> EmbeddedRedis | None:
        if settings.REDISPARTS.get("EMBEDDED") is None:
            self.stdout.write(f"Using {_redis_described()}")
            return None
        try:
            server = EmbeddedRedis.from_settings()
            started = server.attach()
        except RedisPartsError as exc:
            raise CommandError(str(exc), returncode=3) from exc
        shared = "" if started else " (already running; this demo shares it)"
        self.stdout.write(f"Embedded redis-server at {server.url}{shared}")
        return server

    def _run(self, children: "ChildGroup") -> None:
        """Return when a stop signal arrives; restart a child that exits on its own.

        Meanwhile relay recorded sales every RELAY_INTERVAL seconds: the sold e-mails of
        purchases whose web request died before its own relay (``manage.py market_relay``
        does the same outside the demo); and copy the market's figures into the database
        every SUMMARY_INTERVAL seconds (marketplace.summary).
        """
        next_relay = next_summary = 0.0
        while not self.stop.requested:
            for child, returncode in children.exited():
                delay = child.restarts.next_delay(time.monotonic())
                if delay is None:
                    raise CommandError(
                        f"{child.name} exited {MAX_RESTARTS + 1} times within "
                        f"{RESTART_WINDOW:g}s (last: {_exit_described(returncode)}); "
                        "stopping the demo"
                    )
                child.restart_at = time.monotonic() + delay
                self.stderr.write(
                    f"{child.name} {_exit_described(returncode)}; restarting it in {delay:g}s"
                )
            for child in children.due():
                children.start(child)
                self.stderr.write(f"{child.name} restarted (pid {child.pid})")
            if time.monotonic() >= next_relay:
                self._relay_pass()
                next_relay = time.monotonic() + RELAY_INTERVAL
            if time.monotonic() >= next_summary:
                self._summary_pass()
                next_summary = time.monotonic() + SUMMARY_INTERVAL
            time.sleep(0.2)

    def _shut_down(self, children: "ChildGroup", embedded: EmbeddedRedis | None) -> None:
        if self.stop.signum == signal.SIGHUP:
            _silence_dead_terminal()
        if self.stop.requested:
            self._say("\nStopping...")
        children.stop(self.stop)
        if embedded is not None:
            if embedded.detach():
                self._say(f"Stopped redis-server ({embedded.socket}); its data is kept.")
            else:
                self._say(
                    f"Left redis-server ({embedded.socket}) running: another demo uses it, "
                    "or it was started apart from the demos."
                )

    def _say(self, text: str) -> None:
        """Write a line while stopping; a terminal that went away is no error."""
        try:
            self.stdout.write(text)
            self.stdout.flush()
        except OSError:
            pass

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


class StopRequest:
    """The first stop signal asks the runner to stop; a second one hurries the stop."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0

    @property
    def requested(self) -> bool:
        return self.count > 0

    @property
    def hurried(self) -> bool:
        return self.count > 1

    def install(self) -> None:
        # Set explicitly, SIGINT included: a shell script's background job starts with
        # SIGINT ignored, and Python then raises no KeyboardInterrupt. SIGHUP stays ignored
        # under nohup.
        for signum in STOP_SIGNALS:
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue
            signal.signal(signum, self._received)

    def _received(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        self.count += 1


class Restarts:
    """When to restart a child: FIRST_BACKOFF doubled per recent restart, or never."""

    def __init__(self) -> None:
        self.times: collections.deque[float] = collections.deque()

    def next_delay(self, now: float) -> float | None:
        """Record a restart at ``now`` (monotonic seconds); None past MAX_RESTARTS a window."""
        while self.times and now - self.times[0] >= RESTART_WINDOW:
            self.times.popleft()
        if len(self.times) >= MAX_RESTARTS:
            return None
        delay = FIRST_BACKOFF * 2 ** len(self.times)
        self.times.append(now)
        return delay


@dataclass
class Child:
    """One process of the demo: Python with ``argv``, and its restart record."""

    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restart_at: float | None = None
    restarts: Restarts = field(default_factory=Restarts)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


class ChildGroup:
    """The demo's children, all in one process group apart from the runner's."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.pgid: int | None = None
        self.relays: list[threading.Thread] = []

    def start(self, child: Child) -> None:
        """Start ``child`` in the group (the first child founds it), its output relayed.

        The children write to a pipe this runner copies to its own stdout, never to the
        terminal itself: once the terminal is closed a write there fails, and a child
        stopping would die on its last line.
        """
        options: dict[str, Any] = {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.STDOUT,
            "env": {**os.environ, "PYTHONUNBUFFERED": "1"},  # lines as they come
        }
        command = [sys.executable, *child.argv]
        process = None
        if self.pgid is not None:
            # OSError: every member of the group had exited; this child founds a new one.
            with contextlib.suppress(OSError):
                process = subprocess.Popen(command, process_group=self.pgid, **options)
        if process is None:
            process = subprocess.Popen(command, process_group=0, **options)
            self.pgid = process.pid
        relay = threading.Thread(target=_relay, args=(process.stdout,), daemon=True)
        relay.start()
        self.relays.append(relay)
        child.process, child.restart_at = process, None
        if child not in self.children:
            self.children.append(child)

    def exited(self) -> list[tuple[Child, int]]:
        """The children that exited since the last call, with their return codes."""
        found = []
        for child in self.children:
            if child.process is not None and child.process.poll() is not None:
                found.append((child, child.process.returncode))
                child.process = None
        return found

    def due(self) -> list[Child]:
        """The exited children whose pause before a restart is over."""
        now = time.monotonic()
        return [c for c in self.children if c.restart_at is not None and c.restart_at <= now]

    def stop(self, stop: StopRequest) -> None:
        """SIGTERM every child, wait STOP_TIMEOUT (less after a second signal), then kill
        what is left of the group."""
        # SIGTERM, not SIGINT: a process started in the background of a non-interactive
        # shell inherits SIGINT ignored. The worker and the scheduler finish their current
        # task on SIGTERM.
        running = [c.process for c in self.children if c.process is not None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(p.poll() is None for p in running) and time.monotonic() < deadline:
            if stop.hurried:
                break
            time.sleep(0.05)
        if self.pgid is not None:
            with contextlib.suppress(ProcessLookupError):  # every member is gone
                os.killpg(self.pgid, signal.SIGKILL)
        for process in running:
            process.wait()
        for relay in self.relays:
            relay.join(timeout=2.0)  # the last lines of the children


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


def _relay(pipe: IO[bytes]) -> None:
    """Copy a child's output to this runner's stdout until the child closes it."""
    for line in pipe:
        try:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        except OSError:
            pass  # no terminal any more: keep reading so the child never blocks
    pipe.close()


def _exit_described(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


def _silence_dead_terminal() -> None:
    """Point stdout and stderr at /dev/null if they are the terminal that hung up."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        if os.isatty(fd):
            os.dup2(devnull, fd)
    os.close(devnull)


def _redis_described() -> str:
    """Which Redis the settings name, from the environment (see marketplace/settings.py)."""
    if settings.REDIS_CLUSTER_NODES:
        nodes = ", ".join(f"{host}:{port}" for host, port in settings.REDIS_CLUSTER_NODES)
        return f"the Redis Cluster at {nodes}"
    if settings.REDIS_SENTINELS:
        sentinels = ", ".join(f"{host}:{port}" for host, port in settings.REDIS_SENTINELS)
        return f"the master {settings.REDIS_SENTINEL_MASTER!r} of the sentinels at {sentinels}"
    return f"the Redis at {settings.REDIS_URL}"
