import asyncio
import random
import time

import pytest
import redis
import redis.asyncio
from django.test import override_settings
from redis.cluster import ClusterNode, RedisCluster

from redisparts_app import lua
from redisparts_app.connection import get_redis, slot_client
from redisparts_app.exceptions import (
    ChatExists,
    ChatNotFound,
    InvalidArgument,
    NotChatMember,
)
from redisparts_app.keys import scan_keys, slot_of
from redisparts_app.services import chat as chat_service
from redisparts_app.services import listings
from redisparts_app.services.chat import (
    ChatSummary,
    chat_keys,
    chat_members,
    chat_summaries,
    create_chat,
    fetch_pending_messages,
    join_chat,
    leave_chat,
    read_history,
    seen_key,
    send_message,
    user_chats,
)
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster


def texts(messages):
    return [m.text for m in messages]


def test_book_scenario_both_members_fetch_the_same_messages(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("joe", ["jeff", "jenny"], "message 1", clock=lambda: 100.5)
    for n in range(2, 5):
        assert svc.send_message(chat, "joe", f"message {n}", clock=lambda: 101.0) == n
    jeff = svc.fetch_pending_messages("jeff")
    jenny = svc.fetch_pending_messages("jenny")
    assert jeff == jenny
    [(chat_id, messages)] = jeff
    assert chat_id == chat
    assert [(m.id, m.sender, m.text) for m in messages] == [
        (n, "joe", f"message {n}") for n in range(1, 5)
    ]
    assert messages[0].ts == 100.5
    assert svc.fetch_pending_messages("jeff") == []
    # joe has fetched nothing yet, so every message is still held.
    assert redis_client.zcard(chat_keys(chat)["msgs"]) == 4
    assert svc.chat_members(chat) == {"jeff": 4, "jenny": 4, "joe": 0}


def held_ids(redis_client, chat: str) -> list[int]:
    """The ids of the pending messages the chat holds."""
    return [
        int(id) for _, id in redis_client.zrange(chat_keys(chat)["msgs"], 0, -1, withscores=True)
    ]


def test_messages_read_by_every_member_leave_at_the_next_send_or_leave(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("joe", ["jeff", "jenny"], "one")
    svc.send_message(chat, "jeff", "two")
    for user in ("joe", "jeff", "jenny"):
        svc.fetch_pending_messages(user)
    # Every member has fetched both: they stay until the next send, read as gone.
    assert held_ids(redis_client, chat) == [1, 2]
    assert svc.read_messages(chat, "joe") == []
    assert svc.unread_counts("joe") == {chat: 0}
    svc.send_message(chat, "jenny", "three")
    assert held_ids(redis_client, chat) == [3]
    svc.fetch_pending_messages("joe")
    # jenny has not fetched "three": jeff leaving keeps it; the last one to fetch it
    # leaving counts as everyone having read it.
    svc.leave_chat(chat, "jeff")
    assert held_ids(redis_client, chat) == [3]
    svc.leave_chat(chat, "jenny")
    assert held_ids(redis_client, chat) == []


def test_messages_a_member_has_not_fetched_are_never_deleted(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob", "cy"], "m1")
    for n in range(2, 6):
        svc.send_message(chat, "ann", f"m{n}")
        svc.fetch_pending_messages("ann")
        svc.fetch_pending_messages("bob")
    svc.leave_chat(chat, "bob")
    assert held_ids(redis_client, chat) == [1, 2, 3, 4, 5]  # cy fetched none of them
    assert texts(svc.fetch_chat_messages(chat, "cy")) == ["m1", "m2", "m3", "m4", "m5"]
    svc.send_message(chat, "ann", "m6")
    assert held_ids(redis_client, chat) == [6]


def test_held_messages_are_those_some_member_had_not_fetched_at_the_last_send(redis_client, face):
    svc = face(chat_service)
    # Members fetch in a random order, some several times between messages: after
    # every step the chat holds exactly the messages above the lowest position as it
    # was at the last send, and reads show those above the lowest position now.
    rng = random.Random(3)
    members = ["joe", "jeff", "jenny"]
    chat = svc.create_chat("joe", members[1:], "one")
    at_send = 0
    for step in range(150):
        if rng.random() < 0.4:
            at_send = min(svc.chat_members(chat).values())
            svc.send_message(chat, rng.choice(members), f"message {step}")
        else:
            svc.fetch_pending_messages(rng.choice(members))
        positions = svc.chat_members(chat)
        last = int(redis_client.get(chat_keys(chat)["ids"]))
        assert held_ids(redis_client, chat) == list(range(at_send + 1, last + 1)), f"step {step}"
        unread = list(range(min(positions.values()) + 1, last + 1))
        assert [m.id for m in svc.read_messages(chat, "joe")] == unread, f"step {step}"
        assert svc.unread_counts("jeff") == {chat: last - positions["jeff"]}, f"step {step}"


def test_last_member_leaving_deletes_every_key_of_the_chat(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "hello")
    svc.send_message(chat, "bob", "hi")
    svc.join_chat(chat, "carl")
    pattern = f"rp:chat:{{{chat}}}:*"
    every_key = sorted(k.encode() for k in chat_keys(chat).values())
    assert sorted(scan_keys(redis_client, pattern)) == every_key
    assert svc.leave_chat(chat, "ann") == 2
    assert svc.leave_chat(chat, "carl") == 1
    assert svc.user_chats("ann") == []
    assert not redis_client.exists(chat_keys(chat)["joined"])
    assert len(list(scan_keys(redis_client, pattern))) == 5
    assert svc.leave_chat(chat, "bob") == 0
    assert list(scan_keys(redis_client, pattern)) == []
    assert not redis_client.exists(seen_key("ann"), seen_key("bob"), seen_key("carl"))
    with pytest.raises(ChatNotFound):
        svc.send_message(chat, "bob", "anyone?")
    with pytest.raises(ChatNotFound):
        svc.leave_chat(chat, "bob")


def test_non_member_can_neither_read_nor_post(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "secret plans")
    with pytest.raises(NotChatMember, match="'eve' is not a member of chat"):
        svc.send_message(chat, "eve", "let me in")
    with pytest.raises(NotChatMember):
        svc.fetch_chat_messages(chat, "eve")
    with pytest.raises(NotChatMember):
        svc.read_history(chat, "eve")
    with pytest.raises(NotChatMember):
        svc.read_messages(chat, "eve")
    # A forged entry in eve's own list of chats gives her nothing and is dropped.
    redis_client.zadd(seen_key("eve"), {chat: 0})
    assert svc.fetch_pending_messages("eve") == []
    assert svc.user_chats("eve") == []
    assert redis_client.zcard(chat_keys(chat)["msgs"]) == 1


def test_join_starts_at_the_latest_message(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "before carl")
    assert svc.join_chat(chat, "carl") == 1
    assert svc.fetch_pending_messages("carl") == []
    svc.send_message(chat, "ann", "welcome carl")
    [(_, messages)] = svc.fetch_pending_messages("carl")
    assert texts(messages) == ["welcome carl"]
    assert svc.join_chat(chat, "carl") == 2  # joining again keeps the position
    with pytest.raises(ChatNotFound):
        svc.join_chat("no-such-chat", "carl")


def test_fetch_spans_every_chat_of_the_user(face):
    svc = face(chat_service)
    first = svc.create_chat("ann", ["bob"], "in first")
    second = svc.create_chat("carl", ["bob"], "in second", chat_id="guild-hall")
    svc.send_message(second, "bob", "bob too")
    fetched = dict(svc.fetch_pending_messages("bob"))
    assert {chat: texts(m) for chat, m in fetched.items()} == {
        first: ["in first"],
        second: ["in second", "bob too"],
    }
    assert sorted(svc.user_chats("bob")) == sorted([first, second])


def test_history_resume_and_unread_counts(face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "m1")
    for n in range(2, 6):
        svc.send_message(chat, "ann", f"m{n}")
    assert svc.unread_counts("bob") == {chat: 5}
    assert texts(svc.fetch_chat_messages(chat, "bob")) == ["m1", "m2", "m3", "m4", "m5"]
    svc.send_message(chat, "ann", "m6")
    assert svc.unread_counts("bob") == {chat: 1}
    assert texts(svc.read_history(chat, "bob", 2)) == ["m5", "m6"]
    assert texts(svc.read_messages(chat, "bob", after=3)) == ["m4", "m5", "m6"]
    assert texts(svc.read_messages(chat, "bob", after=3, limit=1)) == ["m4"]
    # Reading does not move bob's position.
    assert svc.unread_counts("bob") == {chat: 1}
    assert texts(svc.fetch_chat_messages(chat, "bob")) == ["m6"]


def history_ids(chat: str, user: str) -> list[int]:
    """Every history message ``user`` may read, paged back 7 at a time, oldest first."""
    pages, before = [], None
    while page := read_history(chat, user, 7, before):
        pages.insert(0, [m.id for m in page])
        before = page[0].id
    return [i for page in pages for i in page]


def test_history_keeps_what_every_member_has_fetched(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "m1")
    svc.send_message(chat, "bob", "m2")
    for user in ("ann", "bob"):
        svc.fetch_pending_messages(user)
    svc.send_message(chat, "ann", "m3")
    assert held_ids(redis_client, chat) == [3]  # the pending ones every member fetched went
    for user in ("ann", "bob"):
        assert texts(svc.read_history(chat, user)) == ["m1", "m2", "m3"]
    [message] = svc.read_history(chat, "ann", 1, before=3)
    assert (message.id, message.sender, message.text) == (2, "bob", "m2")
    # Reading the history moves nobody: the next message is pending as before.
    assert svc.unread_counts("bob") == {chat: 1}
    assert texts(svc.read_history(chat, "bob")) == ["m1", "m2", "m3"]
    assert texts(svc.fetch_chat_messages(chat, "bob")) == ["m3"]


@override_settings(REDISPARTS={"CHAT_HISTORY_LENGTH": 5})
def test_history_keeps_the_last_length_messages(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "m1")
    history = chat_keys(chat)["history"]
    for n in range(2, 13):
        svc.send_message(chat, "ann", f"m{n}")
        assert redis_client.zcard(history) == min(n, 5)
    assert texts(svc.read_history(chat, "bob", 20)) == ["m8", "m9", "m10", "m11", "m12"]
    # The pending messages are not capped: bob fetches all twelve once.
    assert len(svc.fetch_chat_messages(chat, "bob")) == 12
    assert redis_client.ttl(history) == -1  # no age limit


def test_lowered_length_is_reached_removing_at_most_100_per_send(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "m1")
    for n in range(2, 251):
        svc.send_message(chat, "ann", f"m{n}")
    history = chat_keys(chat)["history"]
    assert redis_client.zcard(history) == 250
    sizes = []
    with override_settings(REDISPARTS={"CHAT_HISTORY_LENGTH": 10}):
        for n in range(251, 255):
            svc.send_message(chat, "ann", f"m{n}")
            sizes.append(redis_client.zcard(history))
    assert sizes == [151, 52, 10, 10]
    assert history_ids(chat, "bob") == list(range(245, 255))


@override_settings(REDISPARTS={"CHAT_HISTORY_LENGTH": 0})
def test_history_length_0_keeps_no_history(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "m1")
    svc.send_message(chat, "ann", "m2")
    assert not redis_client.exists(chat_keys(chat)["history"])
    assert svc.read_history(chat, "bob") == []
    # Messages are delivered as ever, and the list shows the newest pending one.
    [summary] = svc.chat_summaries("bob")
    assert summary.last is not None
    assert summary.last.text == "m2"
    assert texts(svc.fetch_chat_messages(chat, "bob")) == ["m1", "m2"]
    # Once every member has fetched them they read as gone, though held until the next send.
    svc.fetch_chat_messages(chat, "ann")
    assert held_ids(redis_client, chat) == [1, 2]
    assert [s.last for s in svc.chat_summaries("bob")] == [None]
    svc.send_message(chat, "bob", "m3")
    assert [s.last.text for s in svc.chat_summaries("ann")] == ["m3"]


def test_history_age_limit_drops_old_messages_and_quiet_histories(redis_client, face):
    svc = face(chat_service)
    day = 86400.0
    with override_settings(REDISPARTS={"CHAT_HISTORY_DAYS": 2}):
        chat = svc.create_chat("ann", ["bob"], "day 0", clock=lambda: 1000.0)
        svc.send_message(chat, "ann", "day 1", clock=lambda: 1000.0 + day)
        svc.send_message(chat, "ann", "day 1.5", clock=lambda: 1000.0 + 1.5 * day)
        assert texts(svc.read_history(chat, "bob")) == ["day 0", "day 1", "day 1.5"]
        svc.send_message(chat, "ann", "day 2.5", clock=lambda: 1000.0 + 2.5 * day)
        assert texts(svc.read_history(chat, "bob")) == ["day 1", "day 1.5", "day 2.5"]
        svc.send_message(chat, "ann", "day 5", clock=lambda: 1000.0 + 5 * day)
        assert texts(svc.read_history(chat, "bob")) == ["day 5"]
        # A history with no message for two days expires whole.
        assert 2 * day - 60 < redis_client.ttl(chat_keys(chat)["history"]) <= 2 * day
    # Without an age limit the history no longer expires.
    svc.send_message(chat, "ann", "later", clock=lambda: 1000.0 + 30 * day)
    assert redis_client.ttl(chat_keys(chat)["history"]) == -1
    assert texts(svc.read_history(chat, "bob")) == ["day 5", "later"]


@override_settings(REDISPARTS={"CHAT_HISTORY_DAYS": 1})
def test_history_age_limit_removes_at_most_100_per_send(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "m1", clock=lambda: 0.0)
    for n in range(2, 151):
        svc.send_message(chat, "ann", f"m{n}", clock=lambda: 0.0)
    history = chat_keys(chat)["history"]
    sizes = []
    for n in range(151, 154):
        svc.send_message(chat, "ann", f"m{n}", clock=lambda: 2 * 86400.0)
        sizes.append(redis_client.zcard(history))
    assert sizes == [51, 2, 3]
    assert history_ids(chat, "bob") == [151, 152, 153]


def test_history_pages_by_id_without_gaps_or_repeats(redis_client, face):
    svc = face(chat_service)
    rng = random.Random(5)
    chat = svc.create_chat("ann", ["bob", "cat"], "m1")
    for n in range(2, 48):
        svc.send_message(chat, rng.choice(["ann", "bob", "cat"]), f"m{n}")
        if n % 5 == 0:
            svc.fetch_pending_messages(rng.choice(["ann", "bob", "cat"]))
    assert history_ids(chat, "cat") == list(range(1, 48))
    # Pages read while messages arrive: new ones are above the first page, not in between.
    first = svc.read_history(chat, "bob", 10)
    assert [m.id for m in first] == list(range(38, 48))
    svc.send_message(chat, "ann", "new")
    second = svc.read_history(chat, "bob", 10, before=first[0].id)
    assert [m.id for m in second] == list(range(28, 38))
    assert svc.read_history(chat, "bob", 5, before=3) == svc.read_history(chat, "bob", 5, 3)
    assert [m.id for m in svc.read_history(chat, "bob", 5, before=3)] == [1, 2]
    assert svc.read_history(chat, "bob", 5, before=1) == []
    assert [m.id for m in svc.read_history(chat, "bob", 1, before=10**20)] == [48]


def test_late_joiner_reads_the_history_from_their_join_on(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "before carl 1")
    svc.send_message(chat, "ann", "before carl 2")
    assert svc.join_chat(chat, "carl") == 2
    assert svc.read_history(chat, "carl") == []
    # bob fetched nothing, so the messages before carl are still pending: not for carl.
    assert svc.read_messages(chat, "carl", after=0) == []
    [summary] = svc.chat_summaries("carl")
    assert (summary.unread, summary.last) == (0, None)
    svc.send_message(chat, "bob", "welcome carl")
    assert texts(svc.read_history(chat, "carl")) == ["welcome carl"]
    assert texts(svc.read_history(chat, "carl", 5, before=3)) == []
    assert texts(svc.read_messages(chat, "carl", after=0)) == ["welcome carl"]
    assert texts(svc.read_history(chat, "ann")) == [
        "before carl 1",
        "before carl 2",
        "welcome carl",
    ]
    # Leaving and joining again starts from the new join.
    svc.leave_chat(chat, "carl")
    svc.send_message(chat, "ann", "carl is gone")
    svc.join_chat(chat, "carl")
    assert svc.read_history(chat, "carl") == []
    svc.send_message(chat, "ann", "carl is back")
    assert texts(svc.read_history(chat, "carl")) == ["carl is back"]


def test_history_is_for_members_only(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "secret plans")
    for before in (None, 2):
        with pytest.raises(NotChatMember):
            svc.read_history(chat, "eve", 5, before)
    with pytest.raises(ChatNotFound):
        svc.read_history("no-such-chat", "eve")
    # A forged entry in eve's list of chats shows her nothing.
    redis_client.zadd(seen_key("eve"), {chat: 0})
    assert svc.chat_summaries("eve") == []


@pytest.mark.parametrize(
    ("count", "before", "error"),
    [
        (0, None, InvalidArgument),
        (1001, None, InvalidArgument),
        (True, None, TypeError),
        (5, 0, InvalidArgument),
        (5, -1, InvalidArgument),
        (5, "3", TypeError),
        (5, 2.5, TypeError),
    ],
)
def test_bad_history_pages_raise_before_reading(redis_client, count, before, error, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "hi")
    with pytest.raises(error):
        svc.read_history(chat, "ann", count, before)


def test_deleting_a_chat_deletes_its_history(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "old words", chat_id="room")
    svc.leave_chat(chat, "ann")
    svc.leave_chat(chat, "bob")
    assert not redis_client.exists(chat_keys(chat)["history"])
    svc.create_chat("ann", ["bob"], "a new room", chat_id="room")
    assert texts(svc.read_history("room", "bob")) == ["a new room"]


def test_chat_summaries_show_members_unread_and_last_message(redis_client, face):
    svc = face(chat_service)
    first = svc.create_chat("ann", ["bob"], "hi bob", clock=lambda: 5.0)
    second = svc.create_chat("cat", ["bob", "dan"], "hello all", chat_id="hall")
    svc.send_message(second, "dan", "hey", clock=lambda: 9.0)
    svc.fetch_chat_messages(first, "bob")
    summaries = {s.id: s for s in svc.chat_summaries("bob")}
    assert summaries[first] == ChatSummary(first, ("ann", "bob"), 0, summaries[first].last)
    assert summaries[first].last.text == "hi bob"
    assert summaries[second].members == ("bob", "cat", "dan")
    assert summaries[second].unread == 2
    last = summaries[second].last
    assert (last.id, last.sender, last.ts, last.text) == (2, "dan", 9.0, "hey")


def test_chat_summaries_cost_a_constant_number_of_round_trips(redis_client):
    for n in range(30):
        create_chat("owner", ["reader"], f"first of {n}", chat_id=f"room-{n}")
    redis_client.script_load(lua.source("chat_read"))  # on every primary: no NOSCRIPT retry
    client, sent = counting_client(redis_client)
    assert len(chat_summaries("reader", client=client)) == 30
    servers = len({slot_client(redis_client, chat_keys(f"room-{n}")["msgs"]) for n in range(30)})
    assert sent[0] == 1 + servers


def test_new_chats_get_new_ids_and_explicit_ids_are_not_reused(redis_client, face):
    svc = face(chat_service)
    assert svc.create_chat("ann", ["bob"], "x") == "1"
    assert svc.create_chat("ann", ["bob"], "x") == "2"
    svc.create_chat("ann", ["bob"], "x", chat_id="team")
    with pytest.raises(ChatExists):
        svc.create_chat("carl", ["dan"], "x", chat_id="team")
    assert "carl" not in svc.chat_members("team")


def test_keys_of_one_chat_share_a_slot():
    keys = chat_keys("guild hall").values()
    assert len({slot_of(key) for key in keys}) == 1


@override_settings(REDISPARTS={"CHAT_MAX_MESSAGE_LENGTH": 10})
def test_message_size_is_limited_by_the_setting(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "0123456789")
    with pytest.raises(InvalidArgument, match="11 characters; shorten it to at most 10"):
        svc.send_message(chat, "ann", "01234567890")
    assert redis_client.get(chat_keys(chat)["ids"]) == b"1"


@pytest.mark.parametrize(
    ("chat", "sender", "text", "error"),
    [
        ("c", "ann", "", InvalidArgument),
        ("c", "ann", "   ", InvalidArgument),
        ("c", "ann", "esc\x1b[2J", InvalidArgument),
        ("c", "ann", None, TypeError),
        ("c:x", "ann", "hi", InvalidArgument),
        ("{c}", "ann", "hi", InvalidArgument),
        ("c*", "ann", "hi", InvalidArgument),
        ("c", "", "hi", InvalidArgument),
        ("c", "a\nb", "hi", InvalidArgument),
    ],
)
def test_bad_input_raises_before_anything_is_written(redis_client, chat, sender, text, error, face):
    svc = face(chat_service)
    with pytest.raises(error):
        svc.create_chat(sender, ["bob"], text, chat_id=chat)
    with pytest.raises(error):
        svc.send_message(chat, sender, text)
    assert redis_client.dbsize() == 0


def test_unknown_chat_raises(redis_client, face):
    svc = face(chat_service)
    with pytest.raises(ChatNotFound, match="no chat 'ghost'"):
        svc.send_message("ghost", "ann", "hello?")
    with pytest.raises(ChatNotFound):
        svc.fetch_chat_messages("ghost", "ann")
    with pytest.raises(ChatNotFound):
        svc.chat_members("ghost")
    with pytest.raises(TypeError, match="collection"):
        svc.create_chat("ann", "bob", "hi")
    assert redis_client.dbsize() == 0


def counting_client(client) -> tuple[redis.Redis | RedisCluster, list[int]]:
    """A client on the same server or cluster whose connections count the requests they send.

    A request is one write of packed commands, answered before the next: a plain
    command or a whole pipeline is one round trip. Connected already, so the
    handshakes are not counted.
    """
    cluster = isinstance(client, RedisCluster)
    base = redis.Connection if cluster else client.connection_pool.connection_class
    sent = [0]

    class CountingConnection(base):
        def send_packed_command(self, command, check_health=True):
            sent[0] += 1
            return super().send_packed_command(command, check_health)

    if cluster:
        nodes = [ClusterNode(node.host, node.port) for node in client.get_primaries()]
        counting = RedisCluster(startup_nodes=nodes)
        for node in counting.get_nodes():  # new connections of every node count
            node.redis_connection.connection_pool.reset()
            node.redis_connection.connection_pool.connection_class = CountingConnection
        counting.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        pool = redis.ConnectionPool(
            connection_class=CountingConnection, **client.connection_pool.connection_kwargs
        )
        counting = redis.Redis(connection_pool=pool)
        counting.ping()
    sent[0] = 0
    return counting, sent


def round_trips_of_fetches(redis_client, user: str, chats: int) -> tuple[int, int, int]:
    """The round trips of ``user``'s first fetch, of the next (a new message in each chat)
    and of one with nothing new, through one client."""
    names = [f"{user}-{n}" for n in range(chats)]
    for name in names:
        create_chat("owner", [user], f"first of {name}", chat_id=name)
    redis_client.script_load(lua.source("chat_fetch"))  # on every primary: no NOSCRIPT retry
    client, sent = counting_client(redis_client)
    chat_service._known_chats.clear()  # as in a process that has not fetched yet
    first = fetch_pending_messages(user, client=client)
    assert len(first) == chats
    trips = [sent[0]]
    for name in names:
        send_message(name, "owner", "next")
    for expected in (chats, 0):
        sent[0] = 0
        assert len(fetch_pending_messages(user, client=client)) == expected
        trips.append(sent[0])
    return trips[0], trips[1], trips[2]


def test_fetch_costs_a_constant_number_of_round_trips_for_1_and_50_chats(redis_client):
    one = round_trips_of_fetches(redis_client, "solo", 1)
    fifty = round_trips_of_fetches(redis_client, "busy", 50)
    if isinstance(redis_client, RedisCluster):
        # Read the chats, then one pipeline of scripts per primary holding chats.
        servers = {slot_client(redis_client, chat_keys(f"busy-{n}")["msgs"]) for n in range(50)}
        assert len(servers) == 3
        assert one == (2, 2, 2)
        assert fifty == (4, 4, 4)
    else:
        # Read the chats, then one script over them; then one script, which checks the
        # list of chats the process saw, with or without new messages.
        assert one == fifty == (2, 1, 1)


@pytest.fixture(params=["sync", "async"])
def counted_fetch(request, redis_client, redis_url):
    """``fetch_pending_messages`` through a client of its own that counts the requests it
    sends (round trips), on either face: yields (fetch(user), [count]).

    The process has not fetched yet: a client of an earlier test may have had the
    same id (the chats it remembers would be checked, but the count would differ).
    """
    chat_service._known_chats.clear()
    if request.param == "sync":
        client, sent = counting_client(redis_client)
        yield (lambda user: fetch_pending_messages(user, client=client)), sent
        return
    pool = redis.asyncio.ConnectionPool.from_url(redis_url)
    sent = [0]

    class CountingConnection(pool.connection_class):
        async def send_packed_command(self, command, check_health=True):
            sent[0] += 1
            return await super().send_packed_command(command, check_health)

    pool.connection_class = CountingConnection
    aclient = redis.asyncio.Redis(connection_pool=pool)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(aclient.ping())
    sent[0] = 0

    def fetch(user):
        return loop.run_until_complete(chat_service.afetch_pending_messages(user, client=aclient))

    try:
        yield fetch, sent
    finally:
        loop.run_until_complete(aclient.aclose())
        loop.close()


def fetch_counted(counted_fetch, user: str) -> tuple[dict[str, list[str]], int]:
    """The texts ``user`` fetched per chat, and the round trips it took."""
    fetch, sent = counted_fetch
    sent[0] = 0
    fetched = {chat: texts(messages) for chat, messages in fetch(user)}
    return fetched, sent[0]


@pytest.mark.single_server
def test_a_fetch_takes_one_round_trip_once_the_process_saw_the_chats(counted_fetch):
    chats = [create_chat("owner", ["ann"], f"hi {n}", chat_id=f"c{n}") for n in range(3)]
    assert fetch_counted(counted_fetch, "ann") == ({c: [f"hi {n}"] for n, c in enumerate(chats)}, 2)
    send_message("c1", "owner", "more")
    assert fetch_counted(counted_fetch, "ann") == ({"c1": ["more"]}, 1)
    assert fetch_counted(counted_fetch, "ann") == ({}, 1)
    # A user without chats: read the list, then the script checks that it is still empty.
    assert fetch_counted(counted_fetch, "carl") == ({}, 1)
    assert fetch_counted(counted_fetch, "carl") == ({}, 1)
    create_chat("owner", ["carl"], "hi carl", chat_id="for-carl")
    assert fetch_counted(counted_fetch, "carl") == ({"for-carl": ["hi carl"]}, 2)
    assert fetch_counted(counted_fetch, "carl") == ({}, 1)


def _change_anns_chats() -> None:
    """Another process: a chat made with ann, a chat she joins, one she leaves."""
    create_chat("owner", ["ann"], "made with ann", chat_id="made")
    create_chat("owner", ["bob"], "before ann", chat_id="joined")
    join_chat("joined", "ann")
    send_message("joined", "owner", "after ann joined")
    leave_chat("left", "ann")
    send_message("left", "owner", "after ann left")
    send_message("kept", "owner", "still for ann")


@pytest.mark.single_server
def test_chats_changed_by_another_process_come_with_the_next_fetch(counted_fetch):
    for chat in ("kept", "left"):
        create_chat("owner", ["ann"], f"first in {chat}", chat_id=chat)
    assert fetch_counted(counted_fetch, "ann") == (
        {"kept": ["first in kept"], "left": ["first in left"]},
        2,
    )
    run_in_processes(_change_anns_chats, [()])
    # The list the process saw is stale: the script names the chats, the fetch is sent again.
    fetched = {
        "joined": ["after ann joined"],
        "kept": ["still for ann"],
        "made": ["made with ann"],
    }
    assert fetch_counted(counted_fetch, "ann") == (fetched, 2)
    assert fetch_counted(counted_fetch, "ann") == ({}, 1)
    assert sorted(user_chats("ann")) == ["joined", "kept", "made"]


@pytest.mark.single_server
def test_a_chat_deleted_meanwhile_leaves_the_fetch_and_the_list(redis_client, counted_fetch):
    for chat in ("gone", "kept"):
        create_chat("owner", ["ann"], f"first in {chat}", chat_id=chat)
    assert fetch_counted(counted_fetch, "ann")[1] == 2
    send_message("gone", "owner", "never fetched")
    redis_client.delete(*chat_keys("gone").values())  # ann's list still names it
    send_message("kept", "owner", "for ann")
    # One script (the list is as the process saw it), then removing the chat from it.
    assert fetch_counted(counted_fetch, "ann") == ({"kept": ["for ann"]}, 2)
    assert user_chats("ann") == ["kept"]
    assert fetch_counted(counted_fetch, "ann") == ({}, 1)


@pytest.mark.single_server
def test_users_of_one_process_fetch_their_own_chats(counted_fetch):
    create_chat("owner", ["ann"], "for ann", chat_id="a")
    create_chat("owner", ["ann", "bob"], "for both", chat_id="both")
    create_chat("owner", ["bob"], "for bob", chat_id="b")
    assert fetch_counted(counted_fetch, "ann") == ({"a": ["for ann"], "both": ["for both"]}, 2)
    assert fetch_counted(counted_fetch, "bob") == ({"b": ["for bob"], "both": ["for both"]}, 2)
    for turn in range(3):
        for chat in ("a", "both", "b"):
            send_message(chat, "owner", f"{chat} {turn}")
        ann = {"a": [f"a {turn}"], "both": [f"both {turn}"]}
        bob = {"b": [f"b {turn}"], "both": [f"both {turn}"]}
        assert fetch_counted(counted_fetch, "ann") == (ann, 1)
        assert fetch_counted(counted_fetch, "bob") == (bob, 1)


def test_a_new_key_prefix_fetches_its_own_chats(settings, face):
    svc = face(chat_service)
    svc.create_chat("owner", ["ann"], "under rp", chat_id="room")
    [(chat, messages)] = svc.fetch_pending_messages("ann")
    assert (chat, texts(messages)) == ("room", ["under rp"])
    svc.send_message("room", "owner", "rp again")
    with override_settings(REDISPARTS={**settings.REDISPARTS, "KEY_PREFIX": "other"}):
        # The same chat id under the other prefix: other keys, another chat.
        svc.create_chat("owner", ["ann"], "under other", chat_id="room")
        [(chat, messages)] = svc.fetch_pending_messages("ann")
        assert (chat, texts(messages)) == ("room", ["under other"])
        assert svc.fetch_pending_messages("ann") == []
    [(chat, messages)] = svc.fetch_pending_messages("ann")
    assert (chat, texts(messages)) == ("room", ["rp again"])


def test_fetch_survives_a_script_flush(redis_client, face):
    svc = face(chat_service)
    chat = svc.create_chat("ann", ["bob"], "before the flush")
    redis_client.script_flush()
    [(chat_id, messages)] = svc.fetch_pending_messages("bob")
    assert chat_id == chat
    assert texts(messages) == ["before the flush"]


SENDERS, READERS, PER_SENDER = 5, 3, 40


def _chat_member(name: str, chat: str, sends: int) -> tuple[list[int], list[tuple]]:
    """Send ``sends`` messages, fetching after each, then fetch until every message came."""
    client = get_redis()
    ids: list[int] = []
    received: list[tuple] = []

    def fetch() -> None:
        for chat_id, messages in fetch_pending_messages(name):
            assert chat_id == chat
            received.extend((m.id, m.sender, m.text) for m in messages)

    for n in range(sends):
        ids.append(send_message(chat, name, f"{name} says {n}"))
        client.incr("test:sent")
        fetch()
    expected = 1 + SENDERS * PER_SENDER
    deadline = time.monotonic() + 90
    while len(received) < expected and time.monotonic() < deadline:
        fetch()
        time.sleep(0.002)
    return ids, received


@pytest.mark.slow
def test_concurrent_senders_and_readers_deliver_every_message_once_in_order(redis_client):
    # Every member fetches, the senders between their sends, so the sends delete what
    # every member has fetched while others fetch: nobody may miss a message for it.
    senders = [f"s{n}" for n in range(SENDERS)]
    readers = [f"r{n}" for n in range(READERS)]
    chat = create_chat(readers[0], senders + readers[1:], "welcome")
    jobs = [(s, chat, PER_SENDER) for s in senders] + [(r, chat, 0) for r in readers]
    results = run_in_processes(_chat_member, jobs, timeout=120)
    sent_ids = sorted(i for ids, _ in results[:SENDERS] for i in ids)
    total = 1 + SENDERS * PER_SENDER
    assert int(redis_client.get("test:sent")) == SENDERS * PER_SENDER
    assert sent_ids == list(range(2, total + 1))
    expected_texts = {
        i: (s, f"{s} says {n}")
        for s, (ids, _) in zip(senders, results[:SENDERS], strict=True)
        for n, i in enumerate(ids)
    }
    for _, received in results:
        assert [i for i, _, _ in received] == list(range(1, total + 1))
        assert received[0][1:] == (readers[0], "welcome")
        assert {i: (s, t) for i, s, t in received[1:]} == expected_texts
    assert set(chat_members(chat).values()) == {total}
    send_message(chat, readers[0], "every member has fetched the rest")
    assert held_ids(redis_client, chat) == [total + 1]


def _send_many(chat: str, sender: str, count: int) -> list[int]:
    return [send_message(chat, sender, f"{sender} {n}") for n in range(count)]


@override_settings(REDISPARTS={"CHAT_HISTORY_LENGTH": 100})
def test_concurrent_senders_leave_the_last_length_ids_in_the_history(redis_client):
    senders = [f"s{n}" for n in range(4)]
    chat = create_chat("host", senders, "welcome")
    sent = run_in_processes(_send_many, [(chat, s, 60) for s in senders], timeout=120)
    assert sorted(i for ids in sent for i in ids) == list(range(2, 242))
    assert redis_client.zcard(chat_keys(chat)["history"]) == 100
    history = read_history(chat, "host", 100)
    assert [m.id for m in history] == list(range(142, 242))
    by_id = {
        i: (s, f"{s} {n}") for s, ids in zip(senders, sent, strict=True) for n, i in enumerate(ids)
    }
    assert all((m.sender, m.text) == by_id[m.id] for m in history)


def test_admin_chat_pages_walk_every_node(redis_client):
    created = {create_chat("owner", ["reader"], "hi", chat_id=f"room-{n}") for n in range(40)}
    primaries = {slot_client(redis_client, chat_keys(chat)["msgs"]) for chat in created}
    assert len(primaries) == (3 if isinstance(redis_client, RedisCluster) else 1)
    found, cursor = [], 0
    while True:
        page = listings.chat_page(cursor, count=7)
        found += page.items
        cursor = page.cursor
        if cursor == 0:
            break
    assert set(found) == created
