"""Every form and endpoint of the demo site with bad input, through Django's test client.

Bad input (empty, 10,000 characters, control characters, ``{ } : *``, negative, zero,
huge and non-numeric prices, unknown users, items and chats) must get a 400 answer with
a message or a form error, never a 500, and write nothing: the data keys of Redis are
compared (type and DUMP of every key) before and after. Keys every request may touch
(logs, counters, response-time stats, presence, sessions) are left out of the comparison.

Also: every page that needs a login redirects anonymous users to it, a non-member gets
403/404 for a chat, only staff reach the Redis parts admin, and user text holding
``<script>`` comes back escaped.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from django.core.management import call_command
from django.test import Client

from redisparts_app.conf import app_settings

# Components whose keys any request may write: logs, counters, stats, presence, sessions.
BOOKKEEPING = frozenset(
    {"log", "counter", "counters", "stats", "stats_rank", "presence", "session"}
)

HUGE = "x" * 10_000
BAD_TEXT = {
    "empty": "",
    "blank": "   ",
    "huge": HUGE,
    "control": "bad\x00text\x1b",
    "open-brace": "a{b",
    "close-brace": "a}b",
    "colon": "a:b",
    "star": "a*",
}
BAD_NAME = {**BAD_TEXT, "unknown": "nobody-by-this-name"}
BAD_PRICE = {
    "empty": "",
    "negative": "-5",
    "zero": "0",
    "huge": "9" * 30,
    "non-numeric": "abc",
    "not-a-number": "NaN",
    "infinite": "inf",
    "control": "1\x002",
}

MARKER = "<script>alert('x')</script>"


def data_snapshot(client) -> dict[bytes, bytes]:
    """Type and serialized value of every key outside the bookkeeping components."""
    prefix = app_settings.KEY_PREFIX.encode() + b":"
    snapshot = {}
    for key in client.scan_iter(count=1000):
        if key.startswith(prefix) and key[len(prefix) :].split(b":", 1)[0].decode() in (
            BOOKKEEPING
        ):
            continue
        snapshot[key] = client.type(key) + b"=" + (client.dump(key) or b"")
    return snapshot


def assert_refused(response) -> None:
    """A 400 with a message, or the form shown again with an error; never a 500."""
    assert response.status_code in (200, 400), (
        f"expected 400 or a form error, got {response.status_code}"
    )
    body = response.content.decode()
    error = re.search(r'class="[^"]*\b(errorlist|error)\b', body)
    if response.status_code == 200:
        assert error, "a 200 answer to bad input must show a form error"
    else:
        assert error or body.strip(), "a 400 answer must carry a message"


@dataclass(frozen=True)
class Case:
    """One request: ``user`` logged in (None: anonymous), ``method`` on ``path``."""

    user: str | None
    method: str
    path: str
    data: dict = field(default_factory=dict)
    htmx: bool = False

    def send(self, clients: dict[str | None, Client]):
        client = clients[self.user]
        headers = {"HX-Request": "true"} if self.htmx else {}
        if self.method == "GET":
            return client.get(self.path, self.data, headers=headers)
        return client.post(self.path, self.data, headers=headers)


def bad_variants(base: dict, field_name: str, values: dict[str, str]) -> Iterator[tuple]:
    """``base`` with ``field_name`` replaced by each bad value, as (id, data) pairs."""
    for label, value in values.items():
        yield f"{field_name}={label}", {**base, field_name: value}


@pytest.fixture
def demo(db, redis_client) -> None:
    call_command("load_demo", verbosity=0)


@pytest.fixture
def clients(demo) -> dict[str | None, Client]:
    """A test client per demo user, logged in, and an anonymous one (key None)."""
    result: dict[str | None, Client] = {None: Client()}
    for username in ("alice", "bob", "dave", "admin"):
        client = Client()
        assert client.login(username=username, password=f"{username}-demo")
        result[username] = client
    return result
