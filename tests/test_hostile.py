"""Hostile strings (tests/hostile.py), property-based, through every service of the app.

Each service either refuses one with a ValueError or TypeError that says what is wrong, in a
bounded message, before writing anything (the whole database is compared), or stores it
and gives it back as stored (NFC-normalized where the service says so).

The demo site's forms and the management commands get the same strings in
test_hostile_site.py.
"""

import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given

from redisparts_app.exceptions import RedisPartsError
from redisparts_app.services import (
    chat,
    config,
    counters,
    geoip,
    logs,
    market,
    presence,
    sessions,
    stats,
)
from redisparts_app.services.autocomplete import AddressBook, RecentContacts
from redisparts_app.services.locks import Lock
from redisparts_app.services.mail import Mailbox
from redisparts_app.services.semaphores import FairSemaphore, Semaphore
from tests.hostile import always, few, hostile_text

pytestmark = pytest.mark.cluster

hostile = hostile_text()


def database(client) -> dict[bytes, bytes | None]:
    """Every key with its DUMP: the whole state of the test database."""
    return {key: client.dump(key) for key in client.scan_iter(count=1000)}


def refused_or_kept(client, action: Callable[[], Any], check: Callable[[Any], Any]) -> None:
    """Run ``action``: a clear refusal that wrote nothing, or ``check(result)`` passes."""
    before = database(client)
    try:
        result = action()
    except (ValueError, TypeError) as exc:
        message = str(exc)
        assert message
        assert len(message) < 400, f"unclear message: {message[:500]!r}"
        assert database(client) == before, f"refused ({message}) but wrote"
        return
    # A check either asserts itself or returns False when the value was not kept.
    assert check(result) is not False, f"{result!r} was not kept as given"


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


@few()
@given(guild=hostile, name=hostile)
def test_address_book_and_recent_contacts(redis_client, guild, name):
    redis_client.flushdb()

    def join():
        return AddressBook(guild).join(name)

    def joined(_):
        book = AddressBook(guild)
        assert nfc(name) in book
        assert nfc(name) in book.complete("", 100)

    refused_or_kept(redis_client, join, joined)
    refused_or_kept(
        redis_client,
        lambda: RecentContacts(guild).add(name),
        lambda _: RecentContacts(guild).names() == [nfc(name)],
    )


@few()
@given(prefix=hostile)
def test_completion_prefix(redis_client, prefix):
    redis_client.flushdb()
    AddressBook("guild").join_many(["alice", "Zoë"])
    refused_or_kept(
        redis_client,
        lambda: AddressBook("guild").complete(prefix),
        lambda found: set(found) <= {"alice", "Zoë"},
    )


@few()
@given(sender=hostile, member=hostile, text=hostile)
def test_chat(redis_client, sender, member, text):
    redis_client.flushdb()

    def create():
        return chat.create_chat(sender, [member], text)

    def created(chat_id):
        [first] = chat.read_messages(chat_id, nfc(member), after=0)
        assert first.text == nfc(text)
        assert first.sender == nfc(sender)
        chat.send_message(chat_id, nfc(sender), "second")

    refused_or_kept(redis_client, create, created)


@few()
@given(chat_id=hostile)
def test_chat_ids(redis_client, chat_id):
    redis_client.flushdb()
    with pytest.raises((ValueError, RedisPartsError)):  # invalid, or no such chat
        chat.send_message(chat_id, "alice", "hi")
    assert database(redis_client) == {}


@few()
@given(user=hostile, subject=hostile, body=hostile)
def test_mail(redis_client, user, subject, body):
    redis_client.flushdb()

    def send():
        return Mailbox(user).send("alice", subject, body)

    def sent(message_id):
        [message] = Mailbox(nfc(user)).fetch(0, 10).messages
        assert (message.id, message.subject, message.body) == (message_id, nfc(subject), nfc(body))

    refused_or_kept(redis_client, send, sent)


@few()
@given(user=hostile, item=hostile)
def test_market(redis_client, user, item):
    redis_client.flushdb()
    refused_or_kept(redis_client, lambda: market.create_user(user, 1000), lambda _: None)
    seller = nfc(user) if database(redis_client) else "alice"
    if seller == "alice":
        market.create_user(seller, 1000)

    def listed(_):
        [listing] = market.get_listings()
        assert (listing.seller, listing.item, listing.price) == (seller, nfc(item), 250)

    refused_or_kept(redis_client, lambda: market.give_item(seller, item), lambda _: None)
    if nfc(item) in market.get_inventory(seller):
        refused_or_kept(redis_client, lambda: market.list_item(seller, item, 250), listed)
        market.create_user("bob" if seller != "bob" else "carol", 1000)
        buyer = "bob" if seller != "bob" else "carol"
        market.purchase(buyer, item, seller, 250)
        assert market.get_inventory(buyer) == [nfc(item)]
    else:
        with pytest.raises((ValueError, RedisPartsError)):  # invalid, or not listed
            market.purchase("alice", item, user, 250)


@few()
@given(kind=hostile, name=hostile, value=hostile)
def test_config(redis_client, kind, name, value):
    redis_client.flushdb()
    config.clear_local_cache()

    def stored(_):
        config.clear_local_cache()
        assert config.get_config(kind, name, wait=0) == {"v": value}

    refused_or_kept(redis_client, lambda: config.set_config(kind, name, {"v": value}), stored)
    refused_or_kept(
        redis_client,
        lambda: config.set_maintenance(retry_after=5, message=value),
        lambda _: config.maintenance_status().message == value,
    )


@few()
@given(name=hostile, message=hostile)
@always("message", ["y" * 100_000, "a\x00b", ""], name="site")
def test_logs(redis_client, name, message):
    redis_client.flushdb()

    def kept(stored: str) -> bool:
        """As given, or cut to LOG_MAX_MESSAGE_LENGTH with a trailing "…"."""
        return stored == message or (
            stored.endswith("\u2026") and message.startswith(stored.removesuffix("\u2026"))
        )

    def logged(_):
        [entry] = logs.recent(name, "warning")
        assert kept(entry.message)

    def counted(count):
        [(stored, total)] = logs.common(name, "error")
        assert count == total == 1
        assert kept(stored)

    refused_or_kept(redis_client, lambda: logs.log_recent(name, message, "warning"), logged)
    refused_or_kept(redis_client, lambda: logs.log_common(name, message, "error"), counted)


@few()
@given(name=hostile)
def test_counters(redis_client, name):
    redis_client.flushdb()

    def counted(_):
        assert [count for _, count in counters.get_counter(name, 60)] == [3]
        assert nfc(name) in counters.known_counters()

    refused_or_kept(redis_client, lambda: counters.update_counter(name, 3), counted)


@few()
@given(user=hostile, friend=hostile)
def test_presence(redis_client, user, friend):
    redis_client.flushdb()
    refused_or_kept(
        redis_client,
        lambda: presence.add_friend(user, friend),
        lambda _: presence.friends(nfc(user)) == {nfc(friend)},
    )
    refused_or_kept(
        redis_client,
        lambda: presence.record_activity(user),
        lambda _: presence.is_online(nfc(user)),
    )


@few()
@given(name=hostile)
def test_lock_and_semaphore_names(redis_client, name):
    redis_client.flushdb()

    def locked():
        lock = Lock(name, ttl=5, timeout=0)
        lock.acquire()
        return lock

    def held(lock):
        assert lock.owned()
        lock.release()
        assert database(redis_client) == {} or not lock.owned()

    refused_or_kept(redis_client, locked, held)
    for kind in (Semaphore, FairSemaphore):

        def acquired(holder, kind=kind):
            semaphore = kind(name, 1)
            assert [h.id for h in semaphore.holders()] == [holder]
            assert semaphore.release(holder)

        refused_or_kept(redis_client, lambda kind=kind: kind(name, 1).acquire(), acquired)


@few()
@given(ip=hostile)
@always("ip", ["y" * 100_000, "1.2.3.4\x00", "1.2.3.4"])
def test_geoip_addresses(redis_client, ip):
    redis_client.flushdb()
    refused_or_kept(redis_client, lambda: geoip.find_city(ip), lambda city: city is None)


@few()
@given(token=hostile, user=hostile, item=hostile)
def test_session_tokens(redis_client, token, user, item):
    redis_client.flushdb()

    def recorded(_):
        assert redis_client.hget(sessions.login_key(), nfc(token)).decode() == nfc(user)
        assert redis_client.zscore(sessions.viewed_key(nfc(token)), nfc(item)) is not None

    refused_or_kept(redis_client, lambda: sessions.update_token(token, user, item), recorded)


@few()
@given(view=hostile)
def test_response_time_statistics(redis_client, view):
    redis_client.flushdb()

    def recorded(_):
        assert stats.get_stats(view, stats.ACCESS_TIME).count == 1
        assert stats.slowest_views(5) == [(nfc(view), 0.25)]

    refused_or_kept(redis_client, lambda: stats.record_access_time(view, 0.25), recorded)
