"""The demo in production: settings from the environment, gunicorn, whitenoise."""

import gzip
import http.client
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.load import scenario
from redisparts_app.services import chat, market
from redisparts_app.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
MANAGE = str(ROOT / "manage.py")


def production_env(tmp_path: Path, redis_url: str, **extra: str) -> dict[str, str]:
    """What a production host sets, on the session's Redis and a throwaway database.

    DJANGO_DEBUG is left unset: manage.py gets it from ``extra``, gunicorn from its default.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "REDIS"))}
    env.update(
        DJANGO_SETTINGS_MODULE="marketplace.settings",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(60),
        DJANGO_ALLOWED_HOSTS="127.0.0.1, market.example.com",
        REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        DJANGO_STATIC_ROOT=str(tmp_path / "static"),
        **extra,
    )
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, MANAGE, *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_production_settings(redis_url, tmp_path):
    env = production_env(tmp_path, redis_url, DJANGO_DEBUG="0")
    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_check_deploy_reports_plain_http(redis_url, tmp_path):
    env = production_env(tmp_path, redis_url, DJANGO_DEBUG="0", DJANGO_HTTPS="0")
    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 1
    for warning in ("security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


@pytest.mark.parametrize("missing", ["DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS"])
@pytest.mark.parametrize(
    "command",
    [[MANAGE, "check"], ["-c", "import marketplace.wsgi"]],
    ids=["manage.py", "wsgi"],
)
def test_production_refuses_to_start_without_a_required_variable(
    redis_url, tmp_path, missing, command
):
    # marketplace.wsgi is production without being told; manage.py is told.
    env = production_env(tmp_path, redis_url, DJANGO_DEBUG="0", PYTHONPATH=str(ROOT))
    if "-c" in command:
        del env["DJANGO_DEBUG"]
    env[missing] = " "
    result = subprocess.run(
        [sys.executable, *command], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    message = f"{missing} must be set when DJANGO_DEBUG=0 (production)"
    assert message in result.stderr
    if command[0] == MANAGE:
        assert "Traceback" not in result.stderr


def test_production_refuses_hsts_seconds_that_are_no_number(redis_url, tmp_path):
    env = production_env(tmp_path, redis_url, DJANGO_DEBUG="0", DJANGO_HSTS_SECONDS="1h")
    result = manage(env, "check")
    assert result.returncode == 1
    assert "DJANGO_HSTS_SECONDS must be whole seconds, got '1h'" in result.stderr


def _get(port: int, path: str, **headers: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    response.body = response.read()
    connection.close()
    return response


def _wait_until_serving(port: int, server: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            output, _ = server.communicate()
            pytest.fail(f"gunicorn exited with {server.returncode}:\n{output}")
        try:
            _get(port, "/static/none")
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"gunicorn did not answer within {timeout}s")


@pytest.mark.slow
def test_gunicorn_serves_the_site_and_whitenoise_its_static_files(redis_url, tmp_path):
    env = production_env(tmp_path, redis_url)
    collected = manage({**env, "DJANGO_DEBUG": "0"}, "collectstatic", "--noinput")
    assert collected.returncode == 0, collected.stderr
    port = free_port()
    # No control socket: it would go to the home folder, shared by every gunicorn there.
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "marketplace.wsgi",
         "--bind", f"127.0.0.1:{port}", "--workers", "2", "--no-control-socket"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait_until_serving(port, server)
        # Plain HTTP is sent to HTTPS; behind the proxy (X-Forwarded-Proto) the page is served.
        redirect = _get(port, "/", Host="market.example.com")
        assert redirect.status == 301
        assert redirect.getheader("Location") == "https://market.example.com/"
        proxied = {"Host": "market.example.com", "X-Forwarded-Proto": "https"}
        page = _get(port, "/", **proxied)
        assert page.status == 200
        body = page.body.decode()
        assert "<code>alice-demo</code>" in body
        assert redis_url.removeprefix("unix://").split("?")[0] in body
        assert "max-age=3600" in page.getheader("Strict-Transport-Security")

        # The stylesheet by its hashed name, compressed, cached for good.
        stylesheet = re.search(r'href="(/static/marketplace/site\.[0-9a-f]{12}\.css)"', body)
        assert stylesheet, body[:2000]
        css = _get(port, stylesheet[1], **proxied, **{"Accept-Encoding": "gzip"})
        assert css.status == 200
        assert css.getheader("Content-Type").startswith("text/css")
        assert css.getheader("Content-Encoding") == "gzip"
        assert "immutable" in css.getheader("Cache-Control")
        original = (ROOT / "marketplace" / "static" / "marketplace" / "site.css").read_bytes()
        assert gzip.decompress(css.body) == original
        assert _get(port, "/static/marketplace/nothing-here.css", **proxied).status == 404
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert "Traceback" not in output, output


def test_load_scenario_gives_each_simulated_user_an_account_and_a_chat(client, db):
    scenario.seed(6)
    assert market.count_listings() == 6 * scenario.LISTED_PER_ACCOUNT
    for number in range(1, 7):
        name = scenario.username(number)
        assert client.login(username=name, password=scenario.PASSWORD)
        assert market.get_funds(name) == scenario.FUNDS
        held = scenario.ITEMS_PER_ACCOUNT - scenario.LISTED_PER_ACCOUNT
        assert len(market.get_inventory(name)) == held
        members = chat.chat_members(scenario.chat_id(number))
        assert name in members
    assert sorted(chat.chat_members("load-1")) == [f"load0{n}" for n in range(1, 6)]
    assert list(chat.chat_members("load-2")) == ["load06"]
