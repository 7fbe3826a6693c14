"""The demo's process runner (`manage.py demo`), run for real: every way of stopping it
leaves no process behind, a killed worker or scheduler is started again, and two demos on
one data folder share its Redis until the last of them stops.

What is left is checked from the outside (psutil and the process group of the children),
not from what the runner says.
"""

import contextlib
import fcntl
import http.cookiejar
import os
import pty
import re
import select
import signal
import socket
import subprocess
import termios
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from marketplace.management.commands.demo import (
    FIRST_BACKOFF,
    MAX_RESTARTS,
    RESTART_WINDOW,
    Restarts,
)
from redisparts_app.testing import free_port
from tests.demo.test_demo import _buy_as_bob, _wait_for_email, demo_command, demo_env

START_TIMEOUT = 90.0


@dataclass
class Demo:
    """A running `manage.py demo` and the processes it started."""

    process: subprocess.Popen
    port: int
    folder: Path
    log: Path  # stderr (and stdout unless a terminal takes it)
    from_script: bool = False

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def runner(self) -> psutil.Process:
        """The runner itself (a shell's child when started from a script)."""
        started = psutil.Process(self.process.pid)
        return started.children()[0] if self.from_script else started

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> dict[str, psutil.Process]:
        """The runner's direct children by role: web, worker, scheduler."""
        roles = {"uvicorn": "web", "rp_worker": "worker", "rp_scheduler": "scheduler"}
        found = {}
        for child in self.runner.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                line = child.cmdline()
                found.update({roles[word]: child for word in line if word in roles})
        return found

    def redis_pid(self) -> int:
        return int((self.folder / "redis" / "redis.pid").read_text())

    def wait_until_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the demo exited early:\n{self.output()}")
            # The worker's pool too: uvicorn may answer before the worker has forked it.
            if _answers(self.base + "/") and _all_up(self.children()):
                return
            time.sleep(0.3)
        pytest.fail(f"the demo did not answer within {START_TIMEOUT}s:\n{self.output()}")

    def everything(self) -> tuple[set[int], int]:
        """Every process of the demo (runner, children, their children, Redis) and the
        children's process group."""
        runner = self.runner
        processes = {runner.pid, self.redis_pid()}
        processes |= {p.pid for p in runner.children(recursive=True)}
        groups = {os.getpgid(p.pid) for p in runner.children()}
        assert len(groups) == 1, f"the children are in several process groups: {groups}"
        [group] = groups
        assert group != os.getpgid(runner.pid), "the children share the runner's group"
        return processes, group

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.runner.send_signal(signum)
        return self.process.wait(timeout=60)


def _start(folder: Path, *, from_script: bool = False, **popen) -> Demo:
    """Start a demo keeping its data in ``folder``; ``from_script``: as a background job
    of a non-interactive shell, which starts it with SIGINT ignored."""
    port = free_port()
    folder.mkdir(exist_ok=True)
    log = folder / f"demo-{port}.log"
    command = demo_command(port)
    if from_script:
        command = ["sh", "-c", '"$@" & wait $!', "sh", *command]
    with open(log, "w") as stream:
        popen = {"stdout": stream, "stdin": subprocess.DEVNULL, **popen}
        process = subprocess.Popen(command, env=demo_env(folder), stderr=stream, **popen)
    return Demo(process, port, folder, log, from_script)


@pytest.fixture
def demos() -> Iterator[list[Demo]]:
    """Demos a test started; any left running at its end are stopped and killed."""
    started: list[Demo] = []
    yield started
    for demo in started:
        if demo.process.poll() is None:
            with contextlib.suppress(psutil.Error, subprocess.TimeoutExpired):
                demo.stop()
        if demo.process.poll() is None:
            demo.process.kill()
            demo.process.wait()


def _running(pids: set[int]) -> list[str]:
    """The processes of ``pids`` still running (a zombie has ended)."""
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {' '.join(process.cmdline())}")
    return left


def _in_group(group: int) -> list[int]:
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
    return found


def _assert_nothing_left(demo: Demo, pids: set[int], group: int) -> None:
    deadline = time.monotonic() + 10
    while (_running(pids) or _in_group(group)) and time.monotonic() < deadline:
        time.sleep(0.2)  # the kernel may take a moment to reap
    assert _running(pids) == [], demo.output()
    assert _in_group(group) == []
    with socket.create_server(("127.0.0.1", demo.port)):
        pass  # the next demo can serve on the same port
    assert "Traceback" not in demo.output()
    assert "redisparts.W001" not in demo.output()  # checked once its Redis was up


def _all_up(children: dict[str, psutil.Process]) -> bool:
    """The three children are there, and the worker's own."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return len(children) == 3 and bool(children["worker"].children())
    return False


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (http only)
            return response.status == 200
    except OSError:
        return False


# -- stopping ---------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_stops_every_process_without_a_traceback(tmp_path, demos):
    demos.append(demo := _start(tmp_path))
    demo.wait_until_up()
    pids, group = demo.everything()
    assert len(pids) >= 7  # runner, Redis, three children, the worker's two
    assert demo.stop(signal.SIGTERM) == 0
    _assert_nothing_left(demo, pids, group)
    assert "Stopped redis-server" in demo.output()


@pytest.mark.slow
def test_sigint_stops_a_demo_started_in_the_background_of_a_script(tmp_path, demos):
    demos.append(demo := _start(tmp_path, from_script=True))
    demo.wait_until_up()
    pids, group = demo.everything()
    demo.runner.send_signal(signal.SIGINT)
    assert demo.process.wait(timeout=60) == 0  # the shell's wait returns the demo's code
    _assert_nothing_left(demo, pids, group)


@pytest.mark.slow
def test_closing_the_terminal_stops_every_process(tmp_path, demos):
    # The demo runs in a terminal of its own (a pseudo-terminal it controls, as a shell
    # started by a terminal window would); closing the terminal's side hangs it up, which
    # sends SIGHUP. Its stderr goes to a file, to look for tracebacks afterwards.
    master, terminal = pty.openpty()

    def take_the_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    demos.append(
        demo := _start(
            tmp_path,
            stdin=terminal,
            stdout=terminal,
            start_new_session=True,
            preexec_fn=take_the_terminal,
        )
    )
    os.close(terminal)
    screen = bytearray()
    reading = threading.Event()
    reading.set()

    def read_the_screen() -> None:  # a full terminal would block the demo's writes
        while reading.is_set():
            if select.select([master], [], [], 0.1)[0]:
                with contextlib.suppress(OSError):
                    screen.extend(os.read(master, 4096))

    reader = threading.Thread(target=read_the_screen, daemon=True)
    reader.start()
    try:
        demo.wait_until_up()
        pids, group = demo.everything()
    finally:
        reading.clear()
        reader.join()
        os.close(master)  # the window closes
    assert b"The demo runs at" in screen
    assert demo.process.wait(timeout=60) == 0
    _assert_nothing_left(demo, pids, group)


# -- restarts ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_worker_and_scheduler_are_restarted_and_the_site_stays_up(tmp_path, demos):
    demos.append(demo := _start(tmp_path))
    demo.wait_until_up()
    before = demo.children()
    before["worker"].kill()
    before["scheduler"].kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = demo.children()
        if {"worker", "scheduler"} <= set(after) and all(
            after[role].pid != before[role].pid for role in ("worker", "scheduler")
        ):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the worker and the scheduler were not restarted:\n{demo.output()}")
    assert after["web"].pid == before["web"].pid
    assert _answers(demo.base + "/")
    assert "worker was killed by SIGKILL; restarting it in" in demo.output()
    assert "scheduler was killed by SIGKILL; restarting it in" in demo.output()
    # A task enqueued now (the sold e-mail of a purchase) is run by the new worker.
    _buy_as_bob(demo.base)
    assert "Subject: Your Lantern sold for 12.50" in _wait_for_email(tmp_path / "outbox")
    # The admin lists the new worker, known by its process id.
    admin = _logged_in(demo.base, "/admin/login/", "admin", "admin-demo")
    page = admin.open(demo.base + "/admin/redisparts_app/redisparts/queues/", timeout=10)
    assert re.search(rf">[^<]*-{after['worker'].pid}-[0-9a-f]+</td>", page.read().decode())
    pids, group = demo.everything()
    assert demo.stop() == 0
    _assert_nothing_left(demo, pids, group)


def test_restarts_back_off_and_stop_past_the_limit_a_minute():
    restarts = Restarts()
    delays = [restarts.next_delay(now=100.0 + n) for n in range(MAX_RESTARTS)]
    assert delays == [FIRST_BACKOFF * 2**n for n in range(MAX_RESTARTS)]
    assert restarts.next_delay(now=100.0 + MAX_RESTARTS) is None
    # A restart older than the window no longer counts: one more is allowed, long paused.
    assert restarts.next_delay(now=100.5 + RESTART_WINDOW) == FIRST_BACKOFF * 2 ** (
        MAX_RESTARTS - 1
    )
    # A quiet window later the pause is short again.
    assert restarts.next_delay(now=200.0 + 2 * RESTART_WINDOW) == FIRST_BACKOFF


def _logged_in(base: str, path: str, username: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(base + path, timeout=10).close()
    token = next(c.value for c in jar if c.name == "csrftoken")
    fields = {"username": username, "password": password, "csrfmiddlewaretoken": token}
    request = urllib.request.Request(  # noqa: S310 (http only)
        base + path, urllib.parse.urlencode(fields).encode(), headers={"Referer": base + path}
    )
    opener.open(request, timeout=10).close()
    return opener


# -- two demos --------------------------------------------------------------------------


@pytest.mark.slow
def test_two_demos_share_the_redis_until_the_last_one_stops(tmp_path, demos):
    demos.append(first := _start(tmp_path))
    first.wait_until_up()
    redis_pid = first.redis_pid()
    demos.append(second := _start(tmp_path))
    second.wait_until_up()
    assert second.redis_pid() == redis_pid
    pids, group = second.everything()
    assert second.stop() == 0
    _assert_nothing_left(second, pids - {redis_pid}, group)
    assert "Left redis-server" in second.output()
    assert psutil.pid_exists(redis_pid)
    assert _answers(first.base + "/")
    # The first one, which started the server, stops while a third one still uses it.
    demos.append(third := _start(tmp_path))
    third.wait_until_up()
    pids, group = first.everything()
    assert first.stop() == 0
    _assert_nothing_left(first, pids - {redis_pid}, group)
    assert psutil.pid_exists(redis_pid)
    assert _answers(third.base + "/")
    pids, group = third.everything()
    assert third.stop() == 0
    _assert_nothing_left(third, pids, group)
    assert "Stopped redis-server" in third.output()
