"""The demo in production: settings from the environment, gunicorn with uvicorn workers
(ASGI), whitenoise, and the chat's event stream served by them."""

import asyncio
import gzip
import http.client
import json
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
    [[MANAGE, "check"], ["-c", "import marketplace.wsgi"], ["-c", "import marketplace.asgi"]],
    ids=["manage.py", "wsgi", "asgi"],
)
def test_production_refuses_to_start_without_a_required_variable(
    redis_url, tmp_path, missing, command
):
    # marketplace.wsgi and marketplace.asgi are production without being told; manage.py
    # is told.
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


# The production command of docs/howto/production.md, on a free port, 2 workers.
SERVE = [sys.executable, "-m", "gunicorn", "marketplace.asgi:application",
         "-k", "uvicorn_worker.UvicornWorker", "--graceful-timeout", "5"]  # fmt: skip
PROXIED = {"Host": "market.example.com", "X-Forwarded-Proto": "https"}
# Users of the served site's database, and a session of each (their cookie).
USERS_SCRIPT = """
import json
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
sessions = {}
for name in ("ann", "bob", "eve"):
    user = User.objects.create_user(name, password=name + "-secret")
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    sessions[name] = session.session_key
print(json.dumps(sessions))
"""


@pytest.fixture(scope="module")
def served(redis_url, tmp_path_factory):
    """The site served as in production, with users ann, bob and eve signed in: yields
    the port and each user's session cookie. The Redis data is the tests' to make."""
    folder = tmp_path_factory.mktemp("production")
    env = production_env(folder, redis_url)
    for args in (["collectstatic", "--noinput"], ["migrate", "--noinput"]):
        done = manage({**env, "DJANGO_DEBUG": "0"}, *args)
        assert done.returncode == 0, done.stderr
    users = manage({**env, "DJANGO_DEBUG": "0"}, "shell", "-c", USERS_SCRIPT)
    assert users.returncode == 0, users.stderr
    sessions = json.loads(users.stdout.strip().splitlines()[-1])
    port = free_port()
    # No control socket: it would go to the home folder, shared by every gunicorn there.
    server = subprocess.Popen(
        [*SERVE, "--bind", f"127.0.0.1:{port}", "--workers", "2", "--no-control-socket"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait_until_serving(port, server)
        yield port, sessions, server
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert "Traceback" not in output, output


@pytest.mark.slow
def test_gunicorn_serves_the_site_and_whitenoise_its_static_files(served, redis_url):
    port, _, _ = served
    # Plain HTTP is sent to HTTPS; behind the proxy (X-Forwarded-Proto) the page is served.
    redirect = _get(port, "/", Host="market.example.com")
    assert redirect.status == 301
    assert redirect.getheader("Location") == "https://market.example.com/"
    page = _get(port, "/", **PROXIED)
    assert page.status == 200
    body = page.body.decode()
    assert "<code>alice-demo</code>" in body
    assert redis_url.removeprefix("unix://").split("?")[0] in body
    assert "max-age=3600" in page.getheader("Strict-Transport-Security")

    # The stylesheet by its hashed name, compressed, cached for good.
    stylesheet = re.search(r'href="(/static/marketplace/site\.[0-9a-f]{12}\.css)"', body)
    assert stylesheet, body[:2000]
    css = _get(port, stylesheet[1], **PROXIED, **{"Accept-Encoding": "gzip"})
    assert css.status == 200
    assert css.getheader("Content-Type").startswith("text/css")
    assert css.getheader("Content-Encoding") == "gzip"
    assert "immutable" in css.getheader("Cache-Control")
    original = (ROOT / "marketplace" / "static" / "marketplace" / "site.css").read_bytes()
    assert gzip.decompress(css.body) == original
    assert _get(port, "/static/marketplace/nothing-here.css", **PROXIED).status == 404


class EventStream:
    """A Server-Sent Events client on a raw socket: HTTP/1.0, so the body comes
    unchunked until the server closes it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.status = 0

    @classmethod
    async def open(cls, port: int, path: str, session: str, last_id: str = "") -> "EventStream":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        lines = [f"GET {path} HTTP/1.0", *(f"{k}: {v}" for k, v in PROXIED.items()),
                 f"Cookie: sessionid={session}", "Accept: text/event-stream"]  # fmt: skip
        if last_id:
            lines.append(f"Last-Event-ID: {last_id}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        stream = cls(reader, writer)
        stream.status = int((await reader.readline()).split()[1])
        while (await reader.readline()).strip():  # the headers
            pass
        return stream

    async def event(self) -> dict[str, str]:
        """The next event's fields (comments and the retry preamble skipped)."""
        while True:
            fields: dict[str, str] = {}
            while (line := (await self.reader.readline()).decode()).strip():
                name, _, value = line.rstrip("\n").partition(": ")
                if name:  # "" is a comment line
                    fields[name] = f"{fields[name]}\n{value}" if name in fields else value
            if not line:
                raise EOFError("the server closed the stream")
            if "data" in fields or "event" in fields:
                return fields

    async def started(self) -> None:
        """Wait for the preamble, which the server sends once the stream is set up."""
        assert (await self.reader.readline()).startswith(b"retry:")
        await self.reader.readline()

    def close(self) -> None:
        self.writer.close()


def new_chat() -> tuple[str, str]:
    """A chat of ann and bob with its first message, and the path of its event stream."""
    chat_id = chat.create_chat("ann", ["bob"], "hello")
    return chat_id, f"/chat/{chat_id}/events/?after=1"


@pytest.mark.slow
def test_uvicorn_streams_chat_messages_and_resumes_from_last_event_id(served):
    port, sessions, _ = served
    chat_id, path = new_chat()

    async def scenario():
        stream = await EventStream.open(port, path, sessions["bob"])
        assert stream.status == 200
        await stream.started()
        await asyncio.to_thread(chat.send_message, chat_id, "ann", "pushed <b>now</b>")
        event = await stream.event()
        assert event["id"] == "2"
        assert "pushed &lt;b&gt;now&lt;/b&gt;" in event["data"]
        stream.close()
        # Away for two messages: the reconnect with Last-Event-ID gets exactly those.
        for text in ("while away 1", "while away 2"):
            await asyncio.to_thread(chat.send_message, chat_id, "ann", text)
        again = await EventStream.open(port, path, sessions["bob"], last_id=event["id"])
        first = await again.event()
        assert first["id"] == "4"
        assert 'id="msg-3"' in first["data"]
        assert 'id="msg-4"' in first["data"]
        assert 'id="msg-2"' not in first["data"]
        again.close()
        # A resume id past the chat's last message cannot be served: told to reload.
        for route, last_id in ((f"/chat/{chat_id}/events/?after=9007199254740992", ""),
                               (path, "2147483648")):  # fmt: skip
            ahead = await EventStream.open(port, route, sessions["bob"], last_id=last_id)
            assert ahead.status == 200
            assert (await ahead.event())["event"] == "reload"
            ahead.close()
        # Refused before any stream: a non-member, a bad resume id, an unknown chat.
        for session, route, last_id, status in (
            (sessions["eve"], path, "", 403),
            (sessions["bob"], path, "x1", 400),
            (sessions["bob"], "/chat/nochat/events/?after=0", "", 404),
        ):
            refused = await EventStream.open(port, route, session, last_id=last_id)
            assert refused.status == status
            refused.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    # The member's position moved with what the stream delivered, as a poll moves it (the
    # server may finish after the closed streams).
    deadline = time.monotonic() + 10
    while chat.chat_members(chat_id)["bob"] != 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert chat.chat_members(chat_id)["bob"] == 4


CLIENTS = 1000


@pytest.mark.slow
def test_a_thousand_concurrent_event_streams_are_held_and_all_get_the_message(served):
    port, sessions, server = served
    chat_id, path = new_chat()

    async def scenario():
        opening = asyncio.Semaphore(100)  # connects in waves, as pages open

        async def connect() -> EventStream:
            async with opening:
                stream = await EventStream.open(port, path, sessions["bob"])
                assert stream.status == 200
                await stream.started()
                return stream

        streams = await asyncio.gather(*(connect() for _ in range(CLIENTS)))
        await asyncio.to_thread(chat.send_message, chat_id, "ann", "to every page")
        events = await asyncio.gather(*(stream.event() for stream in streams))
        for stream in streams:
            stream.close()
        return events

    # Bounded: all connected and all delivered within the limit, or the test fails.
    events = asyncio.run(asyncio.wait_for(scenario(), 180))
    assert len(events) == CLIENTS
    assert all(e["id"] == "2" and "to every page" in e["data"] for e in events)
    assert server.poll() is None  # still serving


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
