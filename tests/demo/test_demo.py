"""The README's front door: `manage.py demo` serves the site with a worker and a scheduler on
the demo data, a purchase's sold e-mail is delivered, and Ctrl-C leaves nothing behind."""

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.test import override_settings

from redisparts_app.testing import free_port

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(line) for line in out.split()]


def _command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.slow
def test_demo_serves_the_landing_page_and_ctrl_c_stops_every_process(tmp_path):
    port = free_port()
    outbox = tmp_path / "outbox"
    demo = subprocess.Popen(
        demo_command(port),
        env=demo_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        page = _wait_for_page(f"{base}/", demo)
        assert "Redis server" in page
        assert str(tmp_path / "redis" / "redis.sock") in page
        assert "<code>alice-demo</code>" in page
        redis_pid = int((tmp_path / "redis" / "redis.pid").read_text())
        child_pids = _children(demo.pid)
        commands = " | ".join(_command_line(pid) for pid in child_pids)
        assert len(child_pids) == 3, commands
        for part in ("uvicorn marketplace.asgi", "rp_worker email", "rp_scheduler"):
            assert part in commands
        assert _alive(redis_pid)
        _buy_as_bob(base)
        sold = _wait_for_email(outbox)
        assert "Subject: Your Lantern sold for 12.50" in sold
        assert "To: alice@redisparts.test" in sold
        demo.send_signal(signal.SIGINT)
        output, _ = demo.communicate(timeout=30)
    finally:
        if demo.poll() is None:
            # After a failed assertion: stop the demo as a person would, so that its
            # processes and its redis-server do not outlive the test.
            demo.send_signal(signal.SIGTERM)
            try:
                demo.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.communicate()
    assert demo.returncode == 0, output
    assert "Traceback" not in output
    assert "Stopped redis-server" in output
    assert not _alive(redis_pid)
    assert not any(_alive(pid) for pid in child_pids)
    assert "alice    alice-demo" in output


def demo_command(port: int) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), "demo", "--port", str(port)]


def demo_env(folder: Path) -> dict[str, str]:
    """The environment of a demo keeping its Redis, database and outbox in ``folder``."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="marketplace.settings",
        REDISPARTS_DATA_DIR=str(folder / "redis"),
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        DJANGO_EMAIL_FILE_PATH=str(folder / "outbox"),
    )
    return env


def _buy_as_bob(base: str) -> None:
    """Log in as the demo's bob and buy alice's lantern, as a browser would."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def post(path: str, fields: dict[str, str]) -> str:
        token = next(c.value for c in jar if c.name == "csrftoken")
        data = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": token}).encode()
        referer = {"Referer": base + path}
        request = urllib.request.Request(base + path, data, headers=referer)  # noqa: S310
        with opener.open(request, timeout=10) as response:
            return response.read().decode()

    with opener.open(f"{base}/login/", timeout=10):
        pass
    market = post("/login/", {"username": "bob", "password": "bob-demo"})
    assert re.search(r'id="funds">300\.00<', market)
    market = post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert "You bought Lantern from alice for 12.50" in market


def _wait_for_email(folder: Path, timeout: float = 30.0) -> str:
    """The first e-mail file the file backend finished writing (it ends with a rule)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in folder.glob("*.log") if folder.is_dir() else []:
            text = path.read_text()
            if text.endswith("-" * 79 + "\n"):
                return text
        time.sleep(0.2)
    pytest.fail(f"the worker did not send the sold e-mail within {timeout}s")


def _wait_for_page(url: str, demo: subprocess.Popen, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if demo.poll() is not None:
            pytest.fail(f"demo exited early:\n{demo.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (http only)
                return response.read().decode()
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"{url} did not answer within {timeout}s")


def test_unreachable_redis_gives_a_friendly_503_page(client, tmp_path):
    dead = {"default": {"BACKEND": "django_redis.cache.RedisCache",
                        "LOCATION": f"unix://{tmp_path}/nobody-home.sock"}}  # fmt: skip
    with override_settings(CACHES=dead):
        response = client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    body = response.content.decode()
    assert "right back" in body
    assert "Traceback" not in body
    assert "ConnectionError" not in body


def test_landing_page_shows_the_server(client, redis_client):
    response = client.get("/")
    assert response.status_code == 200
    assert redis_client.info("server")["redis_version"] in response.content.decode()
