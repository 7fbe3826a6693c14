"""The chat's push stream: read_pushed / aread_pushed, resume by id, gaps, shared reads."""

import asyncio
import random
import threading

import pytest
from django.test import override_settings

from redisparts_app.connection import slot_client
from redisparts_app.exceptions import (
    ChatNotFound,
    ChatPushGap,
    InvalidArgument,
    InvalidArgumentType,
    NotChatMember,
)
from redisparts_app.services.chat import (
    aread_pushed,
    chat_keys,
    create_chat,
    join_chat,
    leave_chat,
    read_pushed,
    send_message,
)
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster


def ids(messages):
    return [m.id for m in messages]


def test_pushed_messages_come_after_the_given_id_in_order(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    for n in range(2, 6):
        send_message(chat, "ann" if n % 2 else "bob", f"message {n}")
    everything = read_pushed(chat, "bob")
    assert ids(everything) == [1, 2, 3, 4, 5]
    assert [(m.sender, m.text) for m in everything[:2]] == [("ann", "first"), ("bob", "message 2")]
    assert ids(read_pushed(chat, "bob", 3)) == [4, 5]
    assert read_pushed(chat, "bob", 5) == []
    assert read_pushed(chat, "bob", 5, block_ms=20) == []  # nothing came while it waited


def test_reading_the_push_stream_does_not_move_the_members_position(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    send_message(chat, "ann", "second")
    read_pushed(chat, "bob")
    assert redis_client.zscore(chat_keys(chat)["members"], "bob") == 0


def test_a_blocked_reader_wakes_on_the_next_send(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(read_pushed(chat, "bob", 1, 10_000)))
    reader.start()
    send_message(chat, "ann", "wake up")
    reader.join(15)
    assert [(m.id, m.text) for m in got] == [(2, "wake up")]


def _reader_with_reconnects(chat: str, member: str, total: int, seed: int) -> list[int]:
    """Read until message ``total`` arrives, dropping the "connection" at random: each
    reconnect resumes from the last id shown, as a page does with Last-Event-ID."""
    rng = random.Random(seed)
    shown: list[int] = []
    while not shown or shown[-1] < total:
        batch = read_pushed(chat, member, shown[-1] if shown else 0, block_ms=2000)
        # A page that goes away mid-batch showed only the first part of it.
        cut = rng.randint(0, len(batch)) if batch and rng.random() < 0.3 else len(batch)
        shown.extend(m.id for m in batch[:cut])
    return shown


def _send_n(chat: str, sender: str, count: int) -> list[int]:
    return [send_message(chat, sender, f"{sender} {n}") for n in range(count)]


@pytest.mark.slow
def test_readers_that_reconnect_miss_and_repeat_nothing(redis_client):
    senders = ["s0", "s1", "s2"]
    readers = ["r0", "r1"]
    chat = create_chat("host", senders + readers, "welcome")
    total = 1 + 3 * 150
    jobs = [("send", s) for s in senders] + [("read", r) for r in readers]
    results = run_in_processes(
        _push_role, [(role, name, chat, total, n) for n, (role, name) in enumerate(jobs)]
    )
    assert sorted(i for sent in results[:3] for i in sent) == list(range(2, total + 1))
    for shown in results[3:]:
        assert shown == list(range(1, total + 1))


def _push_role(role: str, name: str, chat: str, total: int, seed: int) -> list[int]:
    if role == "send":
        return _send_n(chat, name, 150)
    return _reader_with_reconnects(chat, name, total, seed)


@override_settings(REDISPARTS={"CHAT_PUSH_LENGTH": 10})
def test_a_resume_id_the_stream_no_longer_reaches_raises_push_gap(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    _send_n(chat, "ann", 299)
    stream = chat_keys(chat)["push"]
    held = redis_client.xlen(stream)
    assert 10 <= held < 300  # trimmed by whole nodes, never below the setting
    first = 300 - held + 1
    with pytest.raises(ChatPushGap) as caught:
        read_pushed(chat, "bob", 0)
    assert (caught.value.last_id, caught.value.first_id) == (0, first)
    assert "read the chat again" in str(caught.value)
    with pytest.raises(ChatPushGap):
        read_pushed(chat, "bob", first - 2)
    assert ids(read_pushed(chat, "bob", first - 1)) == list(range(first, 301))


def test_a_resume_id_past_the_last_message_raises_push_gap_not_a_wait(redis_client):
    chat = create_chat("ann", ["bob"], "first")  # message 1
    for after in (2, 2**31, 2**53):
        with pytest.raises(ChatPushGap, match="has no message") as caught:
            read_pushed(chat, "bob", after, block_ms=60_000)
        assert (caught.value.last_id, caught.value.first_id) == (after, 2)
        with pytest.raises(ChatPushGap, match="its last is 1"):
            asyncio.run(aread_pushed(chat, "bob", after, 60_000))
    send_message(chat, "ann", "second")
    assert ids(read_pushed(chat, "bob", 1)) == [2]
    assert ids(asyncio.run(aread_pushed(chat, "bob", 2))) == []


def test_non_members_and_unknown_chats_are_refused_before_waiting(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    with pytest.raises(NotChatMember):
        read_pushed(chat, "eve", 0, block_ms=60_000)
    with pytest.raises(ChatNotFound):
        read_pushed("nochat", "eve", 0, block_ms=60_000)
    leave_chat(chat, "bob")
    with pytest.raises(NotChatMember):
        read_pushed(chat, "bob", 1, block_ms=60_000)


def test_a_late_joiner_gets_nothing_from_before_the_join(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    send_message(chat, "ann", "before carl")
    join_chat(chat, "carl")
    send_message(chat, "ann", "after carl")
    assert [m.text for m in read_pushed(chat, "carl", 0)] == ["after carl"]
    assert [m.text for m in asyncio.run(aread_pushed(chat, "carl", 0))] == ["after carl"]


@pytest.mark.parametrize(
    ("last_id", "block_ms", "error"),
    [
        (-1, 0, InvalidArgument),
        (0, -5, InvalidArgument),
        (0, 60_001, InvalidArgument),
        ("1", 0, InvalidArgumentType),
        (True, 0, InvalidArgumentType),
        (0, 1.5, InvalidArgumentType),
    ],
)
def test_bad_arguments_raise_before_reading(redis_client, last_id, block_ms, error):
    chat = create_chat("ann", ["bob"], "first")
    with pytest.raises(error):
        read_pushed(chat, "bob", last_id, block_ms)
    with pytest.raises(error):
        asyncio.run(aread_pushed(chat, "bob", last_id, block_ms))


def test_the_push_stream_goes_with_the_chat(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    leave_chat(chat, "ann")
    assert redis_client.exists(chat_keys(chat)["push"])
    leave_chat(chat, "bob")
    assert not redis_client.exists(chat_keys(chat)["push"])
    # A chat created again with the id starts its stream at message 1.
    create_chat("ann", ["bob"], "again", chat_id=chat)
    assert ids(read_pushed(chat, "bob")) == [1]


def test_async_reader_resumes_and_raises_like_the_sync_one(redis_client):
    chat = create_chat("ann", ["bob"], "first")
    send_message(chat, "ann", "second")

    async def scenario():
        assert ids(await aread_pushed(chat, "bob")) == [1, 2]
        waiting = asyncio.ensure_future(aread_pushed(chat, "bob", 2, 10_000))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(send_message, chat, "bob", "third")
        assert [m.text for m in await waiting] == ["third"]
        with pytest.raises(NotChatMember):
            await aread_pushed(chat, "eve", 0, 10_000)
        with pytest.raises(ChatNotFound):
            await aread_pushed("nochat", "eve")

    asyncio.run(scenario())


def test_async_readers_of_a_chat_share_one_blocking_read(redis_client):
    chat = create_chat("ann", [f"m{n}" for n in range(200)], "first")
    # The test's client, an admin under REDISPARTS_TEST_ACL: INFO and CONFIG RESETSTAT.
    server = slot_client(redis_client, chat_keys(chat)["push"])

    async def scenario():
        readers = [
            asyncio.ensure_future(aread_pushed(chat, f"m{n}", 1, 10_000)) for n in range(200)
        ]
        for _ in range(500):  # until every reader waits (no timing: the count says when)
            await asyncio.sleep(0.01)
            if sum(not r.done() for r in readers) == 200 and _blocked(server) == 1:
                break
        assert _blocked(server) == 1
        server.config_resetstat()
        await asyncio.to_thread(send_message, chat, "ann", "to all")
        woken = await asyncio.gather(*readers)
        # Asking again in one turn of the loop: one membership and catch-up read for all.
        again = await asyncio.gather(*(aread_pushed(chat, f"m{n}", 1) for n in range(200)))
        return woken, again

    woken, again = asyncio.run(scenario())
    assert all([(m.id, m.text) for m in got] == [(2, "to all")] for got in woken)
    assert all([m.id for m in got] == [2] for got in again)
    calls = server.info("commandstats")
    assert calls["cmdstat_zmscore"]["calls"] == 1
    assert calls["cmdstat_xrange"]["calls"] == 1


def _blocked(server) -> int:
    return int(server.info("clients")["blocked_clients"])


def test_a_reader_that_goes_away_leaves_the_shared_read_to_the_others(redis_client):
    chat = create_chat("ann", ["bob", "carl"], "first")

    async def scenario():
        bob = asyncio.ensure_future(aread_pushed(chat, "bob", 1, 10_000))
        carl = asyncio.ensure_future(aread_pushed(chat, "carl", 1, 10_000))
        await asyncio.sleep(0.05)
        bob.cancel()
        await asyncio.to_thread(send_message, chat, "ann", "still here")
        return await carl

    assert [m.text for m in asyncio.run(scenario())] == ["still here"]
