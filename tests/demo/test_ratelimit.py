"""The demo site's rate limits on login attempts, chat messages and guild mail."""

import re

import pytest
from django.conf import settings
from django.test import Client, override_settings

from redisparts_app.services import chat
from redisparts_app.services.autocomplete import AddressBook
from redisparts_app.services.mail import Mailbox

pytestmark = [pytest.mark.django_db, pytest.mark.cluster]


LIMITS = {"login": (3, 60), "chat": (4, 60), "mail": (2, 60)}


@pytest.fixture
def small_limits():
    with override_settings(MARKETPLACE={**settings.MARKETPLACE, "RATE_LIMITS": LIMITS}):
        yield


@pytest.fixture
def users(django_user_model):
    # Staff, so the admin's login lets ann in too.
    made = {
        n: django_user_model.objects.create_user(n, password="pw", is_staff=True)
        for n in ("ann", "ben")
    }
    AddressBook("guild").join_many(["ann", "ben"])
    return made


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def assert_too_many(response, *, fragment: bool = False) -> None:
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    body = response.content.decode()
    assert "too fast" in body or "Too many login attempts" in body
    # The wait as a timer site.js counts down; the sentence reads the same without it.
    wait = response["Retry-After"]
    assert f'<span role="timer" data-retry-seconds="{wait}">in {wait} second' in body
    assert f"Try again in {wait} second" in re.sub(r"<[^>]*>", "", body)
    assert ("<html" in body) is not fragment


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_login_attempts_are_limited_per_account_and_address(path, small_limits, users):
    client = Client()
    wrong = {"username": "ann", "password": "wrong"}
    for _ in range(3):
        assert client.post(path, wrong).status_code == 200  # the form with its error
    # Spelling variants of the name count as the same account; the right password too.
    for name in ("ann", " ANN ", "\uff41\uff4e\uff4e"):  # the last: fullwidth "ann"
        assert_too_many(client.post(path, {"username": name, "password": "pw"}))
    # Another account from the same address, and the same account from elsewhere, go on.
    assert client.post(path, {**wrong, "username": "ben"}).status_code == 200
    elsewhere = Client(REMOTE_ADDR="10.0.0.7")
    response = elsewhere.post(path, {"username": "ann", "password": "pw"})
    assert response.status_code == 302
    # Showing the login page is not an attempt.
    assert client.get(path).status_code == 200


def test_behind_a_proxy_the_address_comes_from_its_header(small_limits, users):
    marketplace = {**settings.MARKETPLACE, "RATE_LIMITS": LIMITS}
    wrong = {"username": "ann", "password": "wrong"}
    # Without the setting the header is the client's to forge: it is ignored.
    forged = [Client(HTTP_X_REAL_IP=f"10.0.0.{i}").post("/login/", wrong) for i in range(4)]
    assert [r.status_code for r in forged] == [200, 200, 200, 429]
    with override_settings(MARKETPLACE={**marketplace, "CLIENT_ADDRESS_HEADER": "X-Real-IP"}):
        # All through one proxy (one REMOTE_ADDR), told apart by the header it sets.
        proxy = Client()
        for _ in range(3):
            assert proxy.post("/login/", wrong, HTTP_X_REAL_IP="10.0.0.1").status_code == 200
        assert_too_many(proxy.post("/login/", wrong, HTTP_X_REAL_IP="10.0.0.1"))
        assert proxy.post("/login/", wrong, HTTP_X_REAL_IP="10.0.0.2").status_code == 200


def test_chat_messages_are_limited_per_sender(small_limits, users):
    ann, ben = logged_in(users["ann"]), logged_in(users["ben"])
    chat_id = chat.create_chat("ann", ["ben"], "first")
    send = f"/chat/{chat_id}/send/"
    for i in range(4):
        assert ann.post(send, {"text": f"m{i}"}).status_code == 302
    assert_too_many(ann.post(send, {"text": "one more"}))
    assert_too_many(ann.post(send, {"text": "htmx"}, HTTP_HX_REQUEST="true"), fragment=True)
    # Starting a chat sends a message too.
    assert_too_many(ann.post("/chat/new/", {"members": "ben", "message": "hi"}))
    assert ben.post(send, {"text": "ben's own count"}).status_code == 302
    texts = [m.text for m in chat.read_messages(chat_id, "ben", after=0, limit=50)]
    assert texts == ["first", "m0", "m1", "m2", "m3", "ben's own count"]


def test_guild_mail_is_limited_per_sender(small_limits, users):
    ann = logged_in(users["ann"])
    mail = {"to": "ben", "subject": "hello", "body": "text"}
    for _ in range(2):
        assert ann.post("/mail/compose/", mail).status_code == 302
    assert_too_many(ann.post("/mail/compose/", mail))
    assert Mailbox("ben").fetch(0, 10).total == 2
    # Refused forms are not messages sent: they do not count.
    assert logged_in(users["ben"]).post("/mail/compose/", {**mail, "to": "ben"}).status_code == 400


def test_default_limits_let_a_person_through(users):
    """At the shipped defaults a person chatting and mailing briskly is never refused."""
    ann = logged_in(users["ann"])
    chat_id = chat.create_chat("ann", ["ben"], "first")
    for i in range(30):
        assert ann.post(f"/chat/{chat_id}/send/", {"text": f"m{i}"}).status_code == 302
    for _ in range(5):
        mail = {"to": "ben", "subject": "hello", "body": "text"}
        assert ann.post("/mail/compose/", mail).status_code == 302
    for _ in range(5):
        assert Client().post("/login/", {"username": "ann", "password": "typo"}).status_code == 200
    assert Client().post("/login/", {"username": "ann", "password": "pw"}).status_code == 302
