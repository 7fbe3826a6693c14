"""The embedded server autostarted by the demo site's Django processes (manage.py)."""

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from redisparts_app.embedded import EmbeddedRedis


def _manage(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DJANGO_SETTINGS_MODULE="marketplace.settings", REDISPARTS_DATA_DIR=str(data_dir))
    manage = Path(__file__).resolve().parents[2] / "manage.py"
    return subprocess.run(
        [sys.executable, str(manage), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_django_processes_autostart_the_server_but_rp_embedded_does_not(tmp_path):
    data_dir = tmp_path / "auto"
    stopped = _manage("rp_embedded", "status", data_dir=data_dir)
    assert stopped.returncode == 3
    assert "not running" in stopped.stderr
    try:
        checked = _manage("check", data_dir=data_dir)
        assert checked.returncode == 0, checked.stderr
        assert "redisparts.W001" not in checked.stderr
        assert EmbeddedRedis(data_dir).is_running()
    finally:
        stop = _manage("rp_embedded", "stop", data_dir=data_dir)
    assert "Stopped." in stop.stdout
    assert not EmbeddedRedis(data_dir).is_running()


@pytest.mark.parametrize(
    ("args", "returncode"), [(["--help"], 0), (["--port", "x"], 2)], ids=["help", "bad-port"]
)
def test_the_demo_starts_no_server_before_reading_its_arguments(tmp_path, args, returncode):
    data_dir = tmp_path / "redis"
    done = _manage("demo", *args, data_dir=data_dir)
    assert done.returncode == returncode, done.stderr
    servers = [
        process
        for process in psutil.process_iter(["cmdline"])
        if str(data_dir) in " ".join(process.info["cmdline"] or ())
    ]
    for server in servers:  # left by a failure: not past this test
        server.kill()
    assert servers == []
    assert not (data_dir / "redis.sock").exists()
    assert not (data_dir / "redis.pid").exists()
