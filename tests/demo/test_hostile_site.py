"""Hostile strings (tests/hostile.py) through every form of the demo site and the admin,
and through the management commands; invalid UTF-8 in request bodies and in files.

For every field of every form (and the pages' query parameters), property-based:
never a 5xx; user text never comes back unescaped (on the answer, nor on the page a
redirect leads to); a refused request changes no data in Redis; an accepted message is
stored as typed (NFC). test_views_input.py holds the fixed bad values with the exact
answer each gets.
"""

import io
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings
from hypothesis import given

from marketplace.demo_data import CHAT_ID
from redisparts_app.services import chat, config
from redisparts_app.services.autocomplete import AddressBook
from redisparts_app.services.mail import Mailbox
from tests.demo.site_helpers import ERROR, GUARDS, client_for, data_snapshot
from tests.demo.test_access import ACCESS
from tests.hostile import SAMPLES, SCRIPT, SURROGATE, UNESCAPED, always, few, hostile_text

# What travels over HTTP is UTF-8: no lone surrogates.
hostile = hostile_text(surrogates=False)


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def kept_chat_text(value: str) -> bool:
    return chat.read_messages(CHAT_ID, "bob", after=0, limit=1000)[-1].text == nfc(value)


def joined(guild: str) -> bool:
    return "alice" in AddressBook(nfc(guild.strip()))  # the form strips the name


def kept_mail(field: str, value: str) -> bool:
    return getattr(Mailbox("bob").fetch(0, 1).messages[0], field) == nfc(value)


@dataclass(frozen=True)
class Field:
    """``field`` of the form at ``path`` (a GET query when ``method`` is GET), the other
    fields from ``base``; ``stored(value)`` tells whether an accepted value was kept.
    An answer redirecting to a page that shows an error is a refusal."""

    user: str | None
    path: str
    base: dict
    field: str
    method: str = "POST"
    stored: Callable[[str], bool] | None = None

    @property
    def id(self) -> str:
        return f"{self.method} {self.path} {self.field}"


BUY = {"seller": "bob", "item": "Healing potion", "price": "450"}
MAIL = {"to": "bob", "subject": "Hello", "body": "See you."}
SELL = {"item": "Oak shield", "price": "5"}
RP = "/admin/redisparts_app/redisparts"
FIELDS = [
    Field("alice", "/market/", {}, "page", "GET"),
    *(Field("alice", "/market/buy/", BUY, name) for name in BUY),
    *(Field("alice", "/market/sell/", SELL, name) for name in SELL),
    Field("alice", "/market/cancel/", {"item": "Lantern"}, "item"),
    Field("alice", "/friends/add/", {}, "username"),
    Field("alice", "/friends/remove/", {}, "username"),
    *(Field("alice", "/stats/", {}, name, "GET") for name in ("range", "log", "severity")),
    Field("alice", "/guild/join/", {}, "guild", stored=lambda v: joined(v)),
    Field("alice", "/guild/leave/", {}, "guild"),
    Field("alice", "/guild/members/", {"guild": "Knights"}, "q", "GET"),
    Field("alice", "/guild/members/", {}, "guild", "GET"),
    Field("alice", "/contacts/suggest/", {"field": "to"}, "to", "GET"),
    Field("alice", "/mail/", {}, "page", "GET"),
    Field("alice", "/mail/compose/", MAIL, "to"),
    *(
        Field("alice", "/mail/compose/", MAIL, name, stored=lambda v, n=name: kept_mail(n, v))
        for name in ("subject", "body")
    ),
    Field("alice", "/chat/", {}, "with", "GET"),
    Field("alice", "/chat/new/", {"message": "Hi"}, "members"),
    Field("alice", "/chat/new/", {"members": "bob"}, "message"),
    Field("alice", f"/chat/{CHAT_ID}/send/", {}, "text", stored=lambda v: kept_chat_text(v)),
    Field("alice", f"/chat/{CHAT_ID}/add/", {}, "member"),
    Field("alice", f"/chat/{CHAT_ID}/poll/", {}, "after", "GET"),
    Field("alice", f"/chat/{CHAT_ID}/older/", {}, "before", "GET"),
    Field(None, "/login/", {"password": "alice-demo"}, "username"),
    Field(None, "/login/", {"username": "alice"}, "password"),
    Field(None, "/admin/login/", {"password": "admin-demo"}, "username"),
    Field(None, "/admin/login/", {"username": "admin"}, "password"),
    *(
        Field("admin", f"{RP}/config/", {"kind": "logs", "name": "site", "value": "{}"}, name)
        for name in ("kind", "name", "value")
    ),
    Field(
        "admin",
        f"{RP}/config/maintenance/",
        {"retry_after": "60"},
        "message",
        stored=lambda v: config.maintenance_status().message == v.strip(),
    ),
    Field("admin", f"{RP}/config/maintenance/", {"message": "soon"}, "retry_after"),
    *(Field("admin", f"{RP}/autocomplete/", {"guild": "Knights"}, n, "GET") for n in ("prefix",)),
    Field("admin", f"{RP}/autocomplete/", {"prefix": "a"}, "guild", "GET"),
    *(Field("admin", f"{RP}/{page}/", {}, "name", "GET") for page in ("counters", "logs")),
    Field("admin", f"{RP}/tasks/", {}, "group", "GET"),
    Field("admin", f"{RP}/locks/idle/release/", {}, "owner"),
    Field("admin", f"{RP}/semaphores/idle/release/", {}, "holder"),
    *(
        Field("admin", f"{RP}/{page}/", {}, "user", "GET")
        for page in ("market", "mail", "presence")
    ),
    Field("admin", f"{RP}/geoip/", {}, "ip", "GET"),
    *(Field("admin", f"{RP}/{page}/", {}, "page", "GET") for page in ("market", "presence")),
    *(
        Field("admin", f"{RP}/bulk-actions/default/", {"action": action, **base}, "ids")
        for action in ("delete", "cancel")
        for base in ({}, {"confirmed": "yes"})
    ),
    Field("admin", f"{RP}/bulk-actions/default/", {"ids": "t1", "confirmed": "yes"}, "action"),
    Field("admin", f"{RP}/schedules/prune-registries/", {}, "action"),
    *(
        Field("admin", f"{RP}/schedules/prune-registries/", {"action": "set"}, name)
        for name in ("cron", "every", "tz")
    ),
]
HIGH_LIMITS = {"login": (10**6, 60), "chat": (10**6, 60), "mail": (10**6, 60)}


@pytest.fixture
def high_limits():
    """Many examples per test: keep them below the rate limits (test_ratelimit.py)."""
    with override_settings(MARKETPLACE={**settings.MARKETPLACE, "RATE_LIMITS": HIGH_LIMITS}):
        yield


def test_every_posted_field_of_the_access_table_is_covered():
    """Each field POSTed in test_access.ACCESS (every pattern of the site) is in FIELDS."""
    posted = {
        (check.path or entry.path, name)
        for entry in ACCESS.values()
        for check in entry.checks
        if check.method == "POST"
        for name in check.data or {}
    }
    assert posted - {(f.path, f.field) for f in FIELDS} == set()


@pytest.mark.parametrize("form", FIELDS, ids=lambda form: form.id)
def test_hostile_values_in_every_form(form, demo, high_limits, redis_client):
    client = client_for(form.user)

    @few(10)
    @given(value=hostile)
    @always("value", [SCRIPT, "y" * 100_000, "\x00", "{tag}"])
    def check(value):
        data = {**form.base, form.field: value}
        before = data_snapshot(redis_client, GUARDS)
        if form.method == "GET":
            response = client.get(form.path, data)
        else:
            response = client.post(form.path, data)
        status = response.status_code
        assert status < 500, f"{status} for {value[:80]!r}"
        body = response.content.decode()
        assert UNESCAPED not in body
        refused = status >= 400
        if status == 302:
            follow = client.get(response["Location"])
            assert follow.status_code < 500
            assert UNESCAPED not in follow.content.decode()
            refused = ERROR.search(follow.content.decode()) is not None
        if refused:
            assert data_snapshot(redis_client, GUARDS) == before, f"refused {value[:80]!r}, wrote"
        elif status == 302 and form.stored is not None and "/login/" not in response["Location"]:
            assert form.stored(value), f"{value[:80]!r} not stored as typed"

    try:
        check()
    finally:
        # This process caches the maintenance flag; the next test's flush would not clear it.
        config.clear_maintenance()


INVALID_UTF8 = [b"\xff\xfe", b"caf\xe9", b"\xc3\x28", b"\xed\xa0\x80", b"%ff%fe"]


@pytest.mark.parametrize("form", [f for f in FIELDS if f.method == "POST"], ids=lambda f: f.id)
def test_invalid_utf8_in_a_request_body_is_not_a_server_error(form, demo, redis_client):
    """Bytes that are not UTF-8 (raw and percent-encoded) where a form field goes."""
    client = client_for(form.user)
    for raw in INVALID_UTF8:
        body = "&".join(f"{k}={v}" for k, v in form.base.items() if k != form.field).encode()
        body += b"&" + form.field.encode() + b"=" + raw
        before = data_snapshot(redis_client, GUARDS)
        response = client.generic(
            "POST", form.path, body, content_type="application/x-www-form-urlencoded"
        )
        assert response.status_code < 500, raw
        if response.status_code >= 400:
            assert data_snapshot(redis_client, GUARDS) == before


# Management commands -----------------------------------------------------------------


def run_command(name: str, *args, **options) -> str:
    out = io.StringIO()
    call_command(name, *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


COMMANDS: dict[str, Callable[[str, object], object]] = {
    "rp_autocomplete guild": lambda v, _: run_command("rp_autocomplete", v, query="a"),
    "rp_autocomplete query": lambda v, _: run_command("rp_autocomplete", "Knights", query=v),
    "rp_copy_logs channel": lambda v, folder: run_command(
        "rp_copy_logs", str(folder), channel=v, limit=1000
    ),
    # Folders inside the test's own, so no value can name a real folder.
    "rp_copy_logs folder": lambda v, folder: run_command(
        "rp_copy_logs", f"{folder}/logs{v}", channel="c", limit=1000
    ),
    "rp_process_logs channel": lambda v, _: run_command(
        "rp_process_logs", channel=v, processor_id="0", timeout=0.01
    ),
    "rp_process_logs processor": lambda v, _: run_command(
        "rp_process_logs", channel="c", processor_id=v, timeout=0.01
    ),
    "rp_worker queue": lambda v, _: run_command("rp_worker", v, burst=True),
    "rp_worker group": lambda v, _: run_command("rp_worker", "default", group=v, burst=True),
    "rp_scheduler group": lambda v, _: run_command("rp_scheduler", group=v, once=True),
    "rp_status connection": lambda v, _: run_command("rp_status", connection=v),
    "rp_import_geoip blocks": lambda v, folder: run_command(
        "rp_import_geoip", blocks=v, locations=str(folder / "none.csv")
    ),
    "rp_backup destination": lambda v, folder: run_command(
        "rp_backup", f"{folder}/backup{v.replace('/', '_')}", timeout=5
    ),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_hostile_command_arguments_give_a_clear_command_error(command, tmp_path, redis_client):
    """Every outcome is a normal run or a CommandError with a short message."""
    run = COMMANDS[command]

    @few(10)
    @given(value=hostile_text())
    @always("value", [*SAMPLES, SURROGATE])
    def check(value):
        try:
            run(value, tmp_path)
        except CommandError as exc:
            message = str(exc)
            assert message
            assert len(message) < 500, message[:600]
            assert "Traceback" not in message

    check()


def test_invalid_utf8_in_an_autocomplete_load_file(tmp_path, redis_client):
    names = tmp_path / "names.txt"
    names.write_bytes(b"alice\ncaf\xe9\nbob\n")
    with pytest.raises(CommandError, match=re.compile("UTF-8", re.I)):
        run_command("rp_autocomplete", "Knights", load=str(names))
    assert redis_client.dbsize() == 0  # not half loaded


def test_invalid_utf8_in_a_geoip_file(tmp_path, redis_client):
    blocks = tmp_path / "blocks.csv"
    blocks.write_bytes(b"network,geoname_id\n1.0.0.0/24,\xff\xfe\n")
    locations = tmp_path / "locations.csv"
    locations.write_bytes(b"geoname_id,city_name\n\xff,caf\xe9\n")
    with pytest.raises(CommandError) as info:
        run_command("rp_import_geoip", blocks=str(blocks), locations=str(locations))
    assert len(str(info.value)) < 500
    assert redis_client.dbsize() == 0
