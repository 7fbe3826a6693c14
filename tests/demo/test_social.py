"""Contacts and guild, guild mail and group chat pages, through the test client.

Against the real test Redis: what a page shows is what the services hold.
"""

import re

import pytest
from django.conf import settings
from django.shortcuts import resolve_url
from django.test import Client

from marketplace.social.guilds import all_guilds
from redisparts_app.conf import app_settings
from redisparts_app.services import chat
from redisparts_app.services.autocomplete import AddressBook, RecentContacts
from redisparts_app.services.mail import Mailbox

pytestmark = [pytest.mark.django_db, pytest.mark.cluster]

GUILD = "knights"
IDS = re.compile(r'data-id="(\d+)"')


@pytest.fixture
def users(django_user_model):
    names = ["alice", "bob", "bruno", "carol", "Zoë", "Élodie"]
    made = {name: django_user_model.objects.create_user(name, password="pw") for name in names}
    AddressBook(GUILD).join_many(["alice", "bob", "bruno", "Zoë", "Élodie"])
    AddressBook("pirates").join("carol")
    return made


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice(users) -> Client:
    return client_for(users["alice"])


@pytest.fixture
def bob(users) -> Client:
    return client_for(users["bob"])


@pytest.fixture
def carol(users) -> Client:
    return client_for(users["carol"])


def social_keys(client) -> dict[bytes, bytes]:
    """Every key of the autocomplete, mail and chat components, with its DUMP."""
    prefix = app_settings.KEY_PREFIX
    found = {}
    for pattern in (f"{prefix}:ac:*", f"{prefix}:mail:*", f"{prefix}:chat*"):
        for key in client.scan_iter(match=pattern):
            found[key] = client.dump(key)
    return found


PAGES = [
    ("get", "/guild/"),
    ("get", "/guild/members/?guild=knights&q=a"),
    ("get", "/contacts/suggest/?field=to&to=a"),
    ("post", "/guild/join/"),
    ("post", "/guild/leave/"),
    ("get", "/mail/"),
    ("get", "/mail/compose/"),
    ("post", "/mail/compose/"),
    ("get", "/mail/1/"),
    ("post", "/mail/1/delete/"),
    ("get", "/chat/"),
    ("post", "/chat/new/"),
    ("get", "/chat/1/"),
    ("post", "/chat/1/send/"),
    ("get", "/chat/1/poll/?after=0"),
    ("get", "/chat/1/older/?before=2"),
    ("post", "/chat/1/add/"),
    ("post", "/chat/1/leave/"),
]


@pytest.mark.parametrize(("method", "url"), PAGES)
def test_anonymous_users_are_sent_to_the_login_page(client, method, url):
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith(resolve_url(settings.LOGIN_URL) + "?next=")


def test_member_search_completes_a_prefix_ignoring_case_and_accents(alice):
    response = alice.get("/guild/members/", {"guild": GUILD, "q": "ZO"})
    assert response.status_code == 200
    assert "Zoë" in response.text
    assert "bob" not in response.text
    response = alice.get("/guild/members/", {"guild": GUILD, "q": "elo"})
    assert "Élodie" in response.text
    assert "Zoë" not in response.text
    response = alice.get("/guild/members/", {"guild": GUILD, "q": "b"})
    assert "bob" in response.text
    assert "bruno" in response.text
    assert "alice" not in response.text


def test_member_search_is_for_members_of_the_guild(carol):
    response = carol.get("/guild/members/", {"guild": GUILD, "q": "a"})
    assert response.status_code == 403
    assert "bob" not in response.text


def test_guild_page_lists_your_guilds_and_their_members(alice):
    page = alice.get("/guild/")
    assert page.status_code == 200
    assert 'hx-trigger="keyup changed delay:200ms' in page.text
    assert "knights" in page.text
    assert "pirates" in page.text
    assert "Élodie" in page.text


def test_join_and_leave_a_guild(carol):
    response = carol.post("/guild/join/", {"guild": GUILD})
    assert response.status_code == 302
    assert "carol" in AddressBook(GUILD)
    assert "carol" in carol.get("/guild/members/", {"guild": GUILD, "q": "car"}).text
    assert carol.post("/guild/leave/", {"guild": GUILD}).status_code == 302
    assert "carol" not in AddressBook(GUILD)


def test_a_refused_guild_name_is_answered_in_place_with_the_typed_name(alice):
    response = alice.post("/guild/join/", {"guild": "Bad:Name"})
    assert response.status_code == 400
    assert "That did not work" not in response.text
    assert "A guild name cannot contain &#x27;:&#x27;." in response.text
    assert 'value="Bad:Name"' in response.text
    assert 'aria-invalid="true"' in response.text
    assert "Your guilds" in response.text  # the guild page itself
    assert "Bad:Name" not in all_guilds()


def test_any_valid_guild_name_can_be_founded(alice):
    response = alice.post("/guild/join/", {"guild": "Chevaliers d'Été & co"})
    assert response.status_code == 302
    page = alice.get(response["Location"])
    assert "Chevaliers d&#x27;Été &amp; co" in page.text
    assert "alice" in AddressBook("Chevaliers d'Été & co")


def test_recipient_suggestions_offer_recent_contacts_first(alice):
    RecentContacts("alice").add("bruno")
    response = alice.get("/contacts/suggest/", {"field": "to", "to": "b"})
    assert response.status_code == 200
    names = re.findall(r'data-value="([^"]*)"', response.text)
    assert names == ["bruno", "bob"]
    assert "recent" in response.text
    # In a list of chat members, the name being typed is the last one.
    response = alice.get("/contacts/suggest/", {"field": "members", "members": "bob, zo"})
    assert re.findall(r'data-value="([^"]*)"', response.text) == ["bob, Zoë, "]


def test_to_suggestions_offer_only_people_you_can_mail(alice, carol):
    # carol is a recent contact of alice (a chat), but they share no guild.
    RecentContacts("alice").add("carol")
    response = alice.get("/contacts/suggest/", {"field": "to", "to": "c"})
    assert re.findall(r'data-value="([^"]*)"', response.text) == []
    assert (
        alice.post("/mail/compose/", {"to": "carol", "subject": "s", "body": "b"}).status_code
        == 400
    )
    # In a chat's member field she is offered: chats are not bound to guilds.
    response = alice.get("/contacts/suggest/", {"field": "member", "member": "c"})
    assert re.findall(r'data-value="([^"]*)"', response.text) == ["carol"]
    # carol without a guild gets no To suggestions at all, only her recent contacts elsewhere.
    RecentContacts("carol").add("alice")
    AddressBook("pirates").leave("carol")
    assert "alice" not in carol.get("/contacts/suggest/", {"field": "to", "to": "a"}).text


def test_add_member_suggestions_leave_out_the_chats_members(alice):
    chat_id = chat.create_chat("alice", ["bob"], "hi")
    RecentContacts("alice").add("bob")
    RecentContacts("alice").add("bruno")
    query = {"field": "member", "member": "b"}
    anywhere = alice.get("/contacts/suggest/", query)
    assert re.findall(r'data-value="([^"]*)"', anywhere.text) == ["bruno", "bob"]
    page = alice.get(f"/chat/{chat_id}/").text
    assert f"field=member&amp;chat={chat_id}" in page
    in_chat = alice.get("/contacts/suggest/", {**query, "chat": chat_id})
    assert re.findall(r'data-value="([^"]*)"', in_chat.text) == ["bruno"]
    # A chat the user is not in, or a bad id, tells nothing about its members.
    other = chat.create_chat("carol", ["bob"], "hi")
    for chat_param in (other, "a:b{", "x" * 5000):
        response = alice.get("/contacts/suggest/", {**query, "chat": chat_param})
        assert re.findall(r'data-value="([^"]*)"', response.text) == ["bruno", "bob"]


def test_mail_from_alice_reaches_bobs_inbox_unread(alice, bob):
    response = alice.post(
        "/mail/compose/", {"to": "bob", "subject": "Raid", "body": "At 8:00 {x}*"}
    )
    assert response.status_code == 302
    assert RecentContacts("alice").names() == ["bob"]
    inbox = bob.get("/mail/")
    assert "Raid" in inbox.text
    assert "alice" in inbox.text
    assert "1 unread" in inbox.text
    [message] = Mailbox("bob").fetch().messages
    read = bob.get(f"/mail/{message.id}/")
    assert read.status_code == 200
    assert "At 8:00 {x}*" in read.text
    assert Mailbox("bob").unread_count() == 0
    assert "unread" not in bob.get("/mail/").text.split("</header>")[0]
    assert bob.post(f"/mail/{message.id}/delete/").status_code == 302
    assert Mailbox("bob").fetch().total == 0


def test_inbox_pages_newest_first(bob):
    box = Mailbox("bob")
    for number in range(1, 13):
        box.send("alice", f"subject {number:02}", "body")
    first = bob.get("/mail/").text
    assert first.index("subject 12") < first.index("subject 03")
    assert "subject 02" not in first
    assert "Page 1 of 2" in first
    second = bob.get("/mail/", {"page": 2}).text
    assert "subject 02" in second
    assert "subject 01" in second
    assert "subject 03" not in second


def test_nobody_reads_or_deletes_anothers_mail(alice, carol):
    message_id = Mailbox("alice").send("bob", "secret", "body")
    assert carol.get(f"/mail/{message_id}/").status_code == 404
    assert carol.post(f"/mail/{message_id}/delete/").status_code == 404
    assert Mailbox("alice").fetch().total == 1


def test_chat_create_send_and_poll_only_newer_messages(alice, bob, carol):
    response = alice.post("/chat/new/", {"members": "bob", "message": "hello bob"})
    assert response.status_code == 302
    chat_id = response["Location"].rstrip("/").rsplit("/", 1)[1]
    assert chat.chat_members(chat_id).keys() == {"alice", "bob"}
    assert RecentContacts("alice").names() == ["bob"]
    assert "bob" in alice.get("/chat/").text

    listing = bob.get("/chat/").text
    assert re.search(r'class="badge chat-unread"[^>]*>1<', listing)
    page = bob.get(f"/chat/{chat_id}/")
    assert "hello bob" in page.text
    assert not re.search(r'class="badge chat-unread"', bob.get("/chat/").text)
    assert 'hx-trigger="every 1500ms' in page.text
    assert bob.get(f"/chat/{chat_id}/poll/", {"after": 1}).status_code == 204

    assert alice.post(f"/chat/{chat_id}/send/", {"text": "second"}).status_code == 302
    assert alice.post(f"/chat/{chat_id}/send/", {"text": "third"}).status_code == 302
    poll = bob.get(f"/chat/{chat_id}/poll/", {"after": 2})
    assert poll.status_code == 200
    assert IDS.findall(poll.text) == ["3"]
    assert "third" in poll.text
    assert "second" not in poll.text
    assert 'id="chat-after"' in poll.text
    assert 'value="3"' in poll.text

    for url in (f"/chat/{chat_id}/", f"/chat/{chat_id}/poll/?after=0"):
        assert carol.get(url).status_code == 403
    for url, data in ((f"/chat/{chat_id}/send/", {"text": "hi"}), (f"/chat/{chat_id}/leave/", {})):
        assert carol.post(url, data).status_code == 403
    assert carol.post(f"/chat/{chat_id}/add/", {"member": "carol"}).status_code == 403
    assert chat.chat_members(chat_id).keys() == {"alice", "bob"}
    assert alice.get("/chat/999/").status_code == 404


def test_poll_delivers_every_message_once_and_in_order(alice, bob):
    chat_id = chat.create_chat("alice", ["bob"], "m1")
    after = int(IDS.findall(bob.get(f"/chat/{chat_id}/").text)[-1])
    seen = list(range(1, after + 1))
    for round_ in range(5):
        for number in range(round_ + 1):
            chat.send_message(chat_id, "alice", f"r{round_} n{number}")
        # Another page of bob's (another tab) takes his pending messages in between.
        if round_ % 2:
            chat.fetch_chat_messages(chat_id, "bob")
        poll = bob.get(f"/chat/{chat_id}/poll/", {"after": after})
        ids = [int(i) for i in IDS.findall(poll.text)]
        seen += ids
        after = ids[-1]
    assert seen == list(range(1, 17))


def test_add_a_member_and_leave(alice, bob, users):
    chat_id = chat.create_chat("alice", ["bob"], "hi")
    assert alice.post(f"/chat/{chat_id}/add/", {"member": "carol"}).status_code == 302
    assert "carol" in chat.chat_members(chat_id)
    assert bob.post(f"/chat/{chat_id}/leave/").status_code == 302
    assert "bob" not in chat.chat_members(chat_id)
    assert bob.get(f"/chat/{chat_id}/").status_code == 403


HTMX = {"HX-Request": "true"}
OLDER = re.compile(r'href="/chat/[^/"]+/older/\?before=(\d+)"')


def test_reopened_chat_shows_its_history_after_every_member_read_it(alice, bob, redis_client):
    chat_id = chat.create_chat("alice", ["bob"], "hello bob")
    chat.send_message(chat_id, "bob", "hi alice")
    for client in (alice, bob):
        client.get(f"/chat/{chat_id}/")
    assert chat.read_messages(chat_id, "alice") == []  # nothing pending
    page = bob.get(f"/chat/{chat_id}/").text
    assert IDS.findall(page) == ["1", "2"]
    assert "hello bob" in page
    assert "No messages yet" not in page
    assert not OLDER.search(page)
    assert 'name="after" value="2"' in page


def test_show_older_pages_back_through_the_history(alice, bob):
    chat_id = chat.create_chat("alice", ["bob"], "m1")
    for n in range(2, 121):
        chat.send_message(chat_id, "alice", f"m{n}")
    page = bob.get(f"/chat/{chat_id}/").text  # takes the 120 pending ones, shows them all
    assert IDS.findall(page) == [str(i) for i in range(1, 121)]
    assert not OLDER.search(page)
    # Once they are read, the page opens on the last 50 with a link to older ones.
    page = bob.get(f"/chat/{chat_id}/").text
    assert IDS.findall(page) == [str(i) for i in range(71, 121)]
    seen = [int(i) for i in IDS.findall(page)]
    while link := OLDER.search(page):
        fragment = bob.get(f"/chat/{chat_id}/older/", {"before": link[1]}, headers=HTMX)
        assert fragment.status_code == 200
        page = fragment.text
        assert "<html" not in page
        seen = [int(i) for i in IDS.findall(page)] + seen
    assert seen == list(range(1, 121))
    # Without htmx the link opens a page of the older messages.
    full = bob.get(f"/chat/{chat_id}/older/", {"before": 71})
    assert "<html" in full.text
    assert IDS.findall(full.text) == [str(i) for i in range(21, 71)]
    assert OLDER.search(full.text)[1] == "21"
    assert "No older messages" in bob.get(f"/chat/{chat_id}/older/", {"before": 1}).text


def test_a_chat_without_messages_for_a_late_joiner_says_so(alice, bob, users):
    chat_id = chat.create_chat("alice", ["bob"], "before carol came")
    chat.join_chat(chat_id, "carol")
    carol = client_for(users["carol"])
    page = carol.get(f"/chat/{chat_id}/").text
    assert "No messages yet" in page
    assert "before carol came" not in page
    assert 'name="after" value="0"' in page
    assert "before carol came" not in carol.get(f"/chat/{chat_id}/poll/", {"after": 0}).text
    assert "No messages yet" in carol.get("/chat/").text
    chat.send_message(chat_id, "bob", "welcome carol")
    page = carol.get(f"/chat/{chat_id}/").text
    assert "welcome carol" in page
    assert "No messages yet" not in page


def test_chat_list_shows_names_and_the_last_message(alice, bob):
    first = chat.create_chat("alice", ["bob"], "hello bob", clock=lambda: 100.0)
    chat.create_chat("bob", ["alice", "bruno"], "hello both", chat_id="hall", clock=lambda: 50.0)
    chat.send_message(first, "bob", "x" * 500, clock=lambda: 200.0)
    listing = alice.get("/chat/").text
    items = re.findall(r'<li>\s*<a href="/chat/([^/]+)/">(.*?)</a>', listing, re.S)
    assert [chat_id for chat_id, _ in items] == [first, "hall"]  # the latest message first
    first_item, hall_item = (text for _, text in items)
    assert re.search(r'class="chat-names">bob<', first_item)
    assert re.search(r"bob:</span> x{119}…", first_item)
    assert re.search(r'class="chat-names">bob, bruno <span class="chat-id">#hall', hall_item)
    assert "hello both" in hall_item
    alice.get(f"/chat/{first}/")
    alice.post(f"/chat/{first}/send/", {"text": "my turn"})
    assert re.search(r"You:</span> my turn", alice.get("/chat/").text)


def test_navigation_counts_unread_chat_messages_until_they_are_read(alice, bob):
    badge = re.compile(r'<span class="badge" title="unread chat messages">(\d+)</span>')
    assert not badge.search(bob.get("/").text)
    page = alice.post("/chat/new/", {"members": "bob", "message": "one"}, follow=True)
    chat_id = page.redirect_chain[-1][0].rstrip("/").rsplit("/", 1)[1]
    alice.post(f"/chat/{chat_id}/send/", {"text": "two"}, follow=True)
    alice.post("/chat/new/", {"members": "bob", "message": "three"}, follow=True)
    assert badge.search(bob.get("/").text)[1] == "3"
    # Alice's pages took her own messages (as every member fetches each message).
    assert not badge.search(alice.get("/").text)
    # The chat's own page reads its messages before the navigation is drawn.
    assert badge.search(bob.get(f"/chat/{chat_id}/").text)[1] == "1"
    assert badge.search(bob.get("/market/").text)[1] == "1"


def test_older_messages_are_for_members_only(alice, carol):
    chat_id = chat.create_chat("alice", ["bob"], "secret")
    assert carol.get(f"/chat/{chat_id}/older/", {"before": 2}).status_code == 403
    response = carol.get(f"/chat/{chat_id}/older/", {"before": 2}, headers=HTMX)
    assert response.status_code == 403
    assert "secret" not in response.text
    assert response.text.strip().startswith('<p class="error-message"')


LONG = "x" * 10_000
BAD_NAMES = ["", LONG, "a\x07b", "a\x00b", "a{b", "a}b", "a:b", "a*b"]
BAD_TEXTS = ["", "   ", LONG, "a\x00b", "a\x1bb"]


def bad_requests(chat_id: str) -> list[tuple[str, str, dict]]:
    cases: list[tuple[str, str, dict]] = []
    for name in BAD_NAMES:
        cases += [
            ("post", "/guild/join/", {"guild": name}),
            ("post", "/guild/leave/", {"guild": name}),
            ("get", "/guild/members/", {"guild": name, "q": "a"}),
            ("post", "/mail/compose/", {"to": name, "subject": "s", "body": "b"}),
            ("post", "/chat/new/", {"members": name, "message": "m"}),
            ("post", f"/chat/{chat_id}/add/", {"member": name}),
        ]
        if name:
            cases += [
                ("get", "/guild/members/", {"guild": GUILD, "q": name}),
                ("get", "/contacts/suggest/", {"field": "to", "to": name}),
            ]
    for unknown in ("nobody", "alice", "carol"):  # unknown user, oneself, no shared guild
        cases.append(("post", "/mail/compose/", {"to": unknown, "subject": "s", "body": "b"}))
    cases += [
        ("post", "/chat/new/", {"members": "nobody", "message": "m"}),
        ("post", "/chat/new/", {"members": "alice", "message": "m"}),
        ("post", f"/chat/{chat_id}/add/", {"member": "nobody"}),
        ("post", f"/chat/{chat_id}/add/", {"member": "bob"}),
        ("post", "/guild/leave/", {"guild": "pirates"}),
        ("get", "/contacts/suggest/", {"field": "nope", "nope": "a"}),
    ]
    for text in BAD_TEXTS:
        cases += [
            ("post", "/mail/compose/", {"to": "bob", "subject": text, "body": "b"}),
            ("post", "/mail/compose/", {"to": "bob", "subject": "s", "body": text}),
            ("post", "/chat/new/", {"members": "bob", "message": text}),
            ("post", f"/chat/{chat_id}/send/", {"text": text}),
        ]
    for after in ("", "-1", "abc", "1.5", "9" * 30, "9" * 5000):
        cases.append(("get", f"/chat/{chat_id}/poll/", {"after": after}))
    for before in ("", "0", "-1", "abc", "1.5", "²", "9" * 30, "9" * 5000):
        cases.append(("get", f"/chat/{chat_id}/older/", {"before": before}))
    for page in ("0", "-1", "abc", "9" * 30):
        cases.append(("get", "/mail/", {"page": page}))
    return cases


def test_bad_input_gets_400_with_a_message_and_writes_nothing(alice, redis_client):
    chat_id = chat.create_chat("alice", ["bob"], "hi")
    alice.get(f"/chat/{chat_id}/")  # takes the pending message, so the page reads nothing
    before = social_keys(redis_client)
    for method, url, data in bad_requests(chat_id):
        response = getattr(alice, method)(url, data)
        assert response.status_code == 400, (url, data, response.status_code)
        assert re.search(r'class="(error-message|field-errors)"', response.text), (url, data)
    assert social_keys(redis_client) == before


@pytest.mark.parametrize("chat_id", ["a*b", "a:b", "{x}", "9999", "x" * 10_000])
def test_unknown_or_malformed_chats_are_not_found(alice, chat_id, redis_client):
    before = social_keys(redis_client)
    assert alice.get(f"/chat/{chat_id}/").status_code == 404
    assert alice.get(f"/chat/{chat_id}/poll/", {"after": 0}).status_code == 404
    assert alice.get(f"/chat/{chat_id}/older/", {"before": 2}).status_code == 404
    assert alice.post(f"/chat/{chat_id}/send/", {"text": "hi"}).status_code == 404
    assert social_keys(redis_client) == before


def test_htmx_errors_are_fragments(alice):
    response = alice.get(
        "/contacts/suggest/", {"field": "to", "to": "a{"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 400
    assert response.text.strip().startswith('<p class="error-message"')
    assert "{" in response.text


def test_user_text_is_escaped(alice, bob):
    script = "<script>alert(1)</script>"
    assert alice.post("/mail/compose/", {"to": "bob", "subject": script, "body": script})
    [message] = Mailbox("bob").fetch().messages
    for page in (bob.get("/mail/"), bob.get(f"/mail/{message.id}/")):
        assert script not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    chat_id = chat.create_chat("alice", ["bob"], script)
    page = bob.get(f"/chat/{chat_id}/")
    assert script not in page.text
    assert "&lt;script&gt;" in page.text
    chat.send_message(chat_id, "alice", script)
    poll = bob.get(f"/chat/{chat_id}/poll/", {"after": 1})
    assert script not in poll.text
    assert "&lt;script&gt;" in poll.text
    response = alice.post("/mail/compose/", {"to": script, "subject": "s", "body": "b"})
    assert response.status_code == 400
    assert script not in response.text


def test_posts_need_the_csrf_token(users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["alice"])
    assert client.post("/guild/join/", {"guild": "newguild"}).status_code == 403
    assert (
        client.post("/mail/compose/", {"to": "bob", "subject": "s", "body": "b"}).status_code == 403
    )
    assert "alice" not in AddressBook("newguild")
    assert Mailbox("bob").fetch().total == 0
