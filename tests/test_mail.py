import itertools

import pytest
from django.test import override_settings

from redisparts_app.exceptions import InvalidArgument, MailMessageNotFound
from redisparts_app.keys import component_pattern, scan_keys, slot_of
from redisparts_app.services.mail import Mailbox

pytestmark = pytest.mark.cluster


def ticking_clock(start: float = 1_700_000_000.25):
    ticks = itertools.count()
    return lambda: start + next(ticks)


@pytest.fixture
def inbox(redis_client, face):
    """Bob's mailbox on the sync face, then on the async face."""
    return face(Mailbox("bob", client=redis_client, clock=ticking_clock()))


def test_send_then_fetch_returns_every_field_newest_first(inbox):
    first = inbox.send("ann", "Raid tonight", "Meet at the gate.\nBring potions.")
    second = inbox.send("carl", "Re: loot", "Mine ☃ 日本")
    assert (first, second) == (1, 2)
    page = inbox.fetch()
    assert (page.total, page.unread) == (2, 2)
    newest, oldest = page.messages
    assert (newest.id, newest.sender, newest.subject, newest.body) == (
        2,
        "carl",
        "Re: loot",
        "Mine ☃ 日本",
    )
    assert (oldest.id, oldest.sender, oldest.body) == (
        1,
        "ann",
        "Meet at the gate.\nBring potions.",
    )
    assert oldest.ts == 1_700_000_000.25
    assert newest.ts == 1_700_000_001.25
    assert not newest.read
    assert not oldest.read


def test_paging_walks_the_mailbox_newest_first(inbox):
    for n in range(1, 8):
        inbox.send("ann", f"subject {n}", f"body {n}")
    pages = [inbox.fetch(offset, 3) for offset in (0, 3, 6, 9)]
    assert [[m.id for m in page.messages] for page in pages] == [[7, 6, 5], [4, 3, 2], [1], []]
    assert all(page.total == 7 for page in pages)


def test_mark_read_and_unread_count(inbox):
    ids = [inbox.send("ann", "s", f"b{n}") for n in range(3)]
    assert inbox.unread_count() == 3
    assert inbox.mark_read(ids[1]) is True
    assert inbox.mark_read(ids[1]) is False
    assert inbox.unread_count() == 2
    page = inbox.fetch()
    assert [m.read for m in page.messages] == [False, True, False]
    assert page.unread == 2


def test_delete_removes_the_message_and_its_unread_flag(inbox, redis_client):
    ids = [inbox.send("ann", "s", f"b{n}") for n in range(3)]
    inbox.delete(ids[0])
    page = inbox.fetch()
    assert [m.id for m in page.messages] == [3, 2]
    assert inbox.unread_count() == 2
    assert redis_client.hlen("rp:mail:{bob}:msgs") == 2
    with pytest.raises(MailMessageNotFound, match="no message 1 in the mailbox of 'bob'"):
        inbox.delete(ids[0])


def test_unknown_message_ids_raise(inbox):
    inbox.send("ann", "s", "b")
    with pytest.raises(MailMessageNotFound):
        inbox.mark_read(99)
    with pytest.raises(MailMessageNotFound):
        inbox.delete(99)
    with pytest.raises(InvalidArgument, match="at least 1"):
        inbox.mark_read(0)
    with pytest.raises(TypeError, match="must be an int"):
        inbox.delete("1")
    assert inbox.unread_count() == 1


def test_mailboxes_are_separate_and_keys_share_one_slot(redis_client):
    bob = Mailbox("bob", client=redis_client)
    eve = Mailbox("eve", client=redis_client)
    bob.send("ann", "for bob", "x")
    assert eve.fetch().messages == []
    assert eve.unread_count() == 0
    keys = list(scan_keys(redis_client, component_pattern("mail")))
    assert len(keys) == 4
    assert len({slot_of(key) for key in keys}) == 1


@override_settings(
    REDISPARTS={"MAIL_MAX_SUBJECT_LENGTH": 5, "MAIL_MAX_BODY_LENGTH": 10, "MAIL_MAX_MESSAGES": 3}
)
def test_size_limits_come_from_settings(inbox, redis_client):
    inbox.send("ann", "12345", "1234567890")
    with pytest.raises(InvalidArgument, match="subject: 6 characters; shorten it to at most 5"):
        inbox.send("ann", "123456", "b")
    with pytest.raises(InvalidArgument, match="body: 11 characters; shorten it to at most 10"):
        inbox.send("ann", "s", "12345678901")
    for n in range(4):
        inbox.send("ann", "s", f"b{n}")
    page = inbox.fetch()
    assert [m.body for m in page.messages] == ["b3", "b2", "b1"]
    assert page.total == 3
    assert inbox.unread_count() == 3
    assert redis_client.hlen("rp:mail:{bob}:msgs") == 3


@pytest.mark.parametrize(
    ("sender", "subject", "body", "error"),
    [
        ("", "s", "b", InvalidArgument),
        ("a:b", "s", "b", InvalidArgument),
        ("a{b}", "s", "b", InvalidArgument),
        ("ann", "  ", "b", InvalidArgument),
        ("ann", "line\nbreak", "b", InvalidArgument),
        ("ann", "s", "", InvalidArgument),
        ("ann", "s", "bell\x07", InvalidArgument),
        ("ann", "s", "x" * 10_001, InvalidArgument),
        ("ann", None, "b", TypeError),
        (5, "s", "b", TypeError),
    ],
)
def test_bad_input_raises_before_anything_is_written(
    inbox, redis_client, sender, subject, body, error
):
    with pytest.raises(error):
        inbox.send(sender, subject, body)
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize("user", ["", "a*", "x" * 201, "tab\there"])
def test_bad_recipient_is_refused(user):
    with pytest.raises(InvalidArgument):
        Mailbox(user)


@pytest.mark.parametrize(("offset", "limit"), [(-1, 10), (0, 0), (0, 101), ("0", 10), (0, 2.5)])
def test_bad_paging_arguments_raise(inbox, offset, limit):
    with pytest.raises(InvalidArgument):
        inbox.fetch(offset, limit)
