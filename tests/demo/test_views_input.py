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
from dataclasses import dataclass, field

import pytest
from django.test import Client
from django.urls import reverse

from marketplace.demo_data import CHAT_ID
from redisparts_app.services.mail import Mailbox
from redisparts_app.services.tasks import TaskQueue, Worker
from tests.demo.site_helpers import ERROR, GUARDS, client_for, data_snapshot
from tests.tasks_helpers import fails_until_flag

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
# Message text may hold key syntax ({ } : *); it is bad when empty, huge or with controls.
BAD_MESSAGE = {k: BAD_TEXT[k] for k in ("empty", "blank", "huge", "control")}
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


@dataclass(frozen=True)
class Case:
    """A request by ``user`` (None: anonymous) and the refusal it must get.

    ``redirects``: the refusal may be a redirect to a page that shows the error (the
    market refusing a well-formed request, the admin's actions).
    ``status``: 400; 403/404 for chats and mail of others; 200 for Django's own login form,
    which shows its errors with 200.
    """

    id: str
    user: str | None
    method: str
    path: str
    data: dict = field(default_factory=dict)
    redirects: bool = False
    status: int = 400
    args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        """``path``, or for the admin the name of a Redis parts admin page."""
        if self.path.startswith("/"):
            return self.path
        return reverse(f"admin:redisparts_{self.path}", args=self.args)

    def send(self, client: Client):
        if self.method == "GET":
            return client.get(self.url, self.data)
        return client.post(self.url, self.data)


def assert_refused(case: Case, response, client: Client) -> None:
    """The answer is ``case.status`` with a message (a form error for 400 and 200)."""
    status = response.status_code
    if case.redirects and status == 302:
        page = client.get(response["Location"])
        assert page.status_code == 200
        assert ERROR.search(page.content.decode()), "the page after the refusal shows no error"
        return
    assert status == case.status, f"expected {case.status}, got {status}"
    body = response.content.decode()
    if status in (200, 400):
        assert ERROR.search(body), f"the {status} answer carries no error message"
    else:
        assert re.sub(r"<[^>]*>", "", body).strip(), f"the {status} answer is empty"


def variants(
    name: str, user: str, path: str, base: dict, field_name: str, values: dict[str, str], **kw
) -> list[Case]:
    """``base`` with ``field_name`` replaced by each bad value, and with it missing."""
    cases = [
        Case(f"{name}-{field_name}={label}", user, "POST", path, {**base, field_name: value}, **kw)
        for label, value in values.items()
    ]
    missing = {k: v for k, v in base.items() if k != field_name}
    cases.append(Case(f"{name}-{field_name}=missing", user, "POST", path, missing, **kw))
    return cases


def query_variants(name: str, user: str, path: str, param: str, values: dict) -> list[Case]:
    return [
        Case(f"{name}-{param}={label}", user, "GET", path, {param: value})
        for label, value in values.items()
    ]


BUY = {"seller": "bob", "item": "Healing potion", "price": "450"}
SELL = {"item": "Silver sword", "price": "12.50"}
BAD_PAGE = {
    "zero": "0",
    "negative": "-1",
    "huge": "9" * 30,
    "non-numeric": "abc",
    "empty": "",
    "control": "1\x00",
}
# Digits int() takes and a message id is not: superscript, too many for int().
BAD_DIGITS = {"superscript": "\u00b2", "too-many-digits": "9" * 5000}
BAD_CHOICE = {k: v for k, v in BAD_TEXT.items() if k != "blank"} | {"unknown": "decade"}

CASES: list[Case] = [
    # Market.
    *query_variants("market", "alice", "/market/", "page", BAD_PAGE),
    *variants("buy", "alice", "/market/buy/", BUY, "seller", BAD_TEXT),
    *variants("buy", "alice", "/market/buy/", BUY, "item", BAD_TEXT),
    *variants("buy", "alice", "/market/buy/", BUY, "price", {**BAD_PRICE, "fraction": "4.5"}),
    Case("buy-unknown-seller", "alice", "POST", "/market/buy/", {**BUY, "seller": "nobody"}, True),
    Case("buy-unknown-item", "alice", "POST", "/market/buy/", {**BUY, "item": "Unicorn"}, True),
    Case("buy-other-price", "alice", "POST", "/market/buy/", {**BUY, "price": "451"}, True),
    Case(
        "buy-own-item",
        "alice",
        "POST",
        "/market/buy/",
        {**BUY, "seller": "alice", "item": "Lantern", "price": "1250"},
        True,
    ),
    *variants("sell", "alice", "/market/sell/", SELL, "item", BAD_TEXT | {"unknown": "Unicorn"}),
    *variants("sell", "alice", "/market/sell/", SELL, "price", BAD_PRICE),
    Case("sell-listed-item", "alice", "POST", "/market/sell/", {**SELL, "item": "Lantern"}),
    *variants("cancel", "alice", "/market/cancel/", {"item": "Lantern"}, "item", BAD_TEXT),
    Case("cancel-unknown", "alice", "POST", "/market/cancel/", {"item": "Unicorn"}, True),
    Case("cancel-others", "alice", "POST", "/market/cancel/", {"item": "Bow"}, True),
    # Friends.
    *variants("friend-add", "alice", "/friends/add/", {"username": "dave"}, "username", BAD_NAME),
    Case("friend-add-self", "alice", "POST", "/friends/add/", {"username": "alice"}),
    *variants(
        "friend-remove", "alice", "/friends/remove/", {"username": "bob"}, "username", BAD_NAME
    ),
    Case("friend-remove-stranger", "alice", "POST", "/friends/remove/", {"username": "dave"}),
    # Stats.
    *query_variants("stats", "alice", "/stats/", "range", BAD_CHOICE),
    *query_variants("stats", "alice", "/stats/", "log", BAD_CHOICE),
    *query_variants("stats", "alice", "/stats/", "severity", BAD_CHOICE),
    # Django's login form answers its errors with 200.
    *variants(
        "login",
        None,
        "/login/",
        {"username": "alice", "password": "alice-demo"},
        "username",
        BAD_NAME,
        status=200,
    ),
    *variants(
        "login",
        None,
        "/login/",
        {"username": "alice", "password": "alice-demo"},
        "password",
        BAD_TEXT,
        status=200,
    ),
]


MAIL = {"to": "bob", "subject": "Hello", "body": "See you at the hall."}
CHAT = f"/chat/{CHAT_ID}"
NEW_CHAT = {"members": "bob", "message": "Hi"}
BAD_ID = {
    "unknown": "nope",
    "colon": "a:b",
    "brace": "a{b}",
    "star": "*",
    "control": "a%00b",
    "huge": "9" * 300,
}

CASES += [
    # Guilds and contacts.
    *variants("guild-join", "alice", "/guild/join/", {"guild": "Archers"}, "guild", BAD_TEXT),
    *variants("guild-leave", "alice", "/guild/leave/", {"guild": "x"}, "guild", BAD_TEXT),
    Case("guild-leave-not-member", "dave", "POST", "/guild/leave/", {"guild": "Archers"}),
    *[
        Case(f"guild-members-guild={k}", "alice", "GET", "/guild/members/", {"guild": v})
        for k, v in BAD_TEXT.items()
    ],
    *[
        Case(f"guild-members-q={k}", "alice", "GET", "/guild/members/", {"guild": g, "q": v})
        for k, v in BAD_TEXT.items()
        if k not in ("empty", "blank")
        for g in ["Knights of Vell"]
    ],
    Case(
        "guild-members-foreign", "dave", "GET", "/guild/members/", {"guild": "Nobody's"}, status=403
    ),
    *query_variants("suggest", "alice", "/contacts/suggest/", "field", BAD_CHOICE),
    *[
        Case(f"suggest-to={k}", "alice", "GET", "/contacts/suggest/", {"field": "to", "to": v})
        for k, v in BAD_TEXT.items()
        if k not in ("empty", "blank")
    ],
    # Guild mail.
    *query_variants("inbox", "alice", "/mail/", "page", BAD_PAGE),
    *variants("compose", "alice", "/mail/compose/", MAIL, "to", BAD_NAME),
    *variants("compose", "alice", "/mail/compose/", MAIL, "subject", BAD_MESSAGE),
    *variants("compose", "alice", "/mail/compose/", MAIL, "body", BAD_MESSAGE),
    Case("compose-to-self", "alice", "POST", "/mail/compose/", {**MAIL, "to": "alice"}),
    Case("compose-to-stranger", "alice", "POST", "/mail/compose/", {**MAIL, "to": "dave"}),
    Case("mail-read-unknown", "alice", "GET", "/mail/999999/", status=404),
    Case("mail-read-zero", "alice", "GET", "/mail/0/", status=404),
    Case("mail-read-huge", "alice", "GET", f"/mail/{'9' * 40}/", status=404),
    Case("mail-delete-unknown", "alice", "POST", "/mail/999999/delete/", status=404),
    Case("mail-delete-huge", "alice", "POST", f"/mail/{'9' * 40}/delete/", status=404),
    # Group chat.
    *variants("chat-create", "alice", "/chat/new/", NEW_CHAT, "members", BAD_NAME),
    *variants("chat-create", "alice", "/chat/new/", NEW_CHAT, "message", BAD_MESSAGE),
    Case("chat-create-only-self", "alice", "POST", "/chat/new/", {**NEW_CHAT, "members": "alice"}),
    *variants("chat-send", "alice", f"{CHAT}/send/", {"text": "hi"}, "text", BAD_MESSAGE),
    *variants("chat-add", "alice", f"{CHAT}/add/", {"member": "dave"}, "member", BAD_NAME),
    Case("chat-add-member-again", "alice", "POST", f"{CHAT}/add/", {"member": "bob"}),
    *query_variants("chat-poll", "alice", f"{CHAT}/poll/", "after", BAD_PAGE | {"zero": "-0"}),
    *query_variants("chat-events", "alice", f"{CHAT}/events/", "after", BAD_PAGE | {"zero": "-0"}),
    *query_variants("chat-older", "alice", f"{CHAT}/older/", "before", BAD_PAGE | BAD_DIGITS),
    *[
        case
        for label, chat_id in BAD_ID.items()
        for case in (
            Case(f"chat-room-id={label}", "alice", "GET", f"/chat/{chat_id}/", status=404),
            Case(
                f"chat-send-id={label}",
                "alice",
                "POST",
                f"/chat/{chat_id}/send/",
                {"text": "hi"},
                status=404,
            ),
            Case(
                f"chat-poll-id={label}",
                "alice",
                "GET",
                f"/chat/{chat_id}/poll/",
                {"after": "0"},
                status=404,
            ),
            Case(
                f"chat-events-id={label}",
                "alice",
                "GET",
                f"/chat/{chat_id}/events/",
                {"after": "0"},
                status=404,
            ),
            Case(
                f"chat-older-id={label}",
                "alice",
                "GET",
                f"/chat/{chat_id}/older/",
                {"before": "2"},
                status=404,
            ),
            Case(
                f"chat-add-id={label}",
                "alice",
                "POST",
                f"/chat/{chat_id}/add/",
                {"member": "dave"},
                status=404,
            ),
            Case(f"chat-leave-id={label}", "alice", "POST", f"/chat/{chat_id}/leave/", status=404),
        )
    ],
    # dave is not a member of the demo chat.
    Case("chat-room-non-member", "dave", "GET", f"{CHAT}/", status=403),
    Case("chat-send-non-member", "dave", "POST", f"{CHAT}/send/", {"text": "hi"}, status=403),
    Case("chat-poll-non-member", "dave", "GET", f"{CHAT}/poll/", {"after": "0"}, status=403),
    Case("chat-events-non-member", "dave", "GET", f"{CHAT}/events/", {"after": "0"}, status=403),
    Case("chat-older-non-member", "dave", "GET", f"{CHAT}/older/", {"before": "2"}, status=403),
    Case("chat-add-non-member", "dave", "POST", f"{CHAT}/add/", {"member": "dave"}, status=403),
    Case("chat-leave-non-member", "dave", "POST", f"{CHAT}/leave/", status=403),
]


CONFIG = {"kind": "logs", "name": "site", "value": "{}"}
MAINTENANCE = {"retry_after": "60", "message": "Back soon"}
BAD_JSON = {"empty": "", "not-json": "{oops", "list": "[1, 2]", "number": "7", "huge": HUGE}
BAD_SECONDS = {k: v for k, v in BAD_PRICE.items() if k != "zero"} | {"zero": "0"}

ADMIN_CASES = [
    *variants("config", "admin", "config", CONFIG, "kind", BAD_TEXT),
    *variants("config", "admin", "config", CONFIG, "name", BAD_TEXT),
    *variants("config", "admin", "config", CONFIG, "value", BAD_JSON),
    *variants(
        "maintenance",
        "admin",
        "maintenance",
        MAINTENANCE,
        "retry_after",
        BAD_SECONDS,
        redirects=True,
    ),
    Case(
        "maintenance-huge-message",
        "admin",
        "POST",
        "maintenance",
        {**MAINTENANCE, "message": HUGE},
        redirects=True,
    ),
    *[
        Case(
            f"task-{action}-id={label}",
            "admin",
            "POST",
            f"task_{action}",
            {},
            redirects=True,
            args=("default", task_id),
        )
        for action in ("retry", "delete")
        for label, task_id in BAD_ID.items()
        if label != "control"
    ],
    *[
        Case(f"task-id={label}", "admin", "GET", "task", status=404, args=("default", task_id))
        for label, task_id in BAD_ID.items()
        if label != "control"
    ],
    Case("tasks-kind=unknown", "admin", "GET", "tasks", {"kind": "lost"}, status=404),
    *[
        Case(f"tasks-group={label}", "admin", "GET", "tasks", {"group": value}, status=404)
        for label, value in BAD_TEXT.items()
        if label not in ("empty", "blank")
    ],
    *[
        Case(
            f"autocomplete-guild={label}",
            "admin",
            "GET",
            "autocomplete",
            {"guild": value, "prefix": "a"},
            status=200,
        )
        for label, value in BAD_TEXT.items()
    ],
    *[
        Case(
            f"autocomplete-prefix={label}",
            "admin",
            "GET",
            "autocomplete",
            {"guild": "Knights", "prefix": value},
            status=200,
        )
        for label, value in BAD_TEXT.items()
        if label in ("huge", "control")  # names may hold { } : *, so a prefix may too
    ],
]


@pytest.mark.parametrize("case", CASES + ADMIN_CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_and_writes_nothing(case: Case, demo, redis_client):
    client = client_for(case.user)
    ignore = GUARDS if case.redirects else None
    before = data_snapshot(redis_client, ignore)
    response = case.send(client)
    assert_refused(case, response, client)
    assert data_snapshot(redis_client, ignore) == before


def test_the_snapshot_sees_a_purchase(demo, redis_client):
    """The comparison above is not blind: a good purchase changes the data keys."""
    before = data_snapshot(redis_client, GUARDS)
    response = client_for("alice").post("/market/buy/", BUY)
    assert response.status_code == 302
    after = data_snapshot(redis_client, GUARDS)
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    assert any(b":market:" in key for key in changed)
    assert any(b":queue:" in key for key in changed)  # the sold e-mail was queued


LOGIN_PAGES = [
    "/market/",
    "/outbox/",
    "/friends/",
    "/stats/",
    "/guild/",
    "/guild/members/",
    "/contacts/suggest/",
    "/mail/",
    "/mail/compose/",
    "/mail/1/",
    "/chat/",
    f"{CHAT}/",
    f"{CHAT}/poll/",
    f"{CHAT}/events/",
    f"{CHAT}/older/",
]
LOGIN_ACTIONS = [
    ("/market/buy/", BUY),
    ("/market/sell/", SELL),
    ("/market/cancel/", {"item": "Lantern"}),
    ("/market/open/", {}),
    ("/friends/add/", {"username": "dave"}),
    ("/friends/remove/", {"username": "bob"}),
    ("/guild/join/", {"guild": "Archers"}),
    ("/guild/leave/", {"guild": "Knights of Vell"}),
    ("/mail/compose/", MAIL),
    ("/mail/1/delete/", {}),
    ("/chat/new/", NEW_CHAT),
    (f"{CHAT}/send/", {"text": "hi"}),
    (f"{CHAT}/add/", {"member": "dave"}),
    (f"{CHAT}/leave/", {}),
]


@pytest.mark.parametrize("path", LOGIN_PAGES)
def test_pages_redirect_anonymous_users_to_the_login(path, demo):
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


@pytest.mark.parametrize(("path", "data"), LOGIN_ACTIONS, ids=[p for p, _ in LOGIN_ACTIONS])
def test_actions_redirect_anonymous_users_and_write_nothing(path, data, demo, redis_client):
    before = data_snapshot(redis_client)
    response = Client().post(path, data)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")
    assert data_snapshot(redis_client) == before


def assert_escaped(body: str) -> None:
    assert "&lt;script&gt;alert(" in body
    assert MARKER not in body


def test_script_in_a_friend_name_is_escaped(demo):
    response = client_for("alice").post("/friends/add/", {"username": MARKER})
    assert response.status_code == 400
    assert_escaped(response.content.decode())


def test_script_in_an_item_name_is_escaped(demo):
    client = client_for("alice")
    response = client.post("/market/buy/", {**BUY, "item": MARKER}, follow=True)
    assert_escaped(response.content.decode())


def test_script_in_mail_is_escaped(demo):
    sent = client_for("alice").post("/mail/compose/", {**MAIL, "subject": MARKER, "body": MARKER})
    assert sent.status_code == 302
    bob = client_for("bob")
    assert_escaped(bob.get("/mail/").content.decode())
    [newest] = Mailbox("bob").fetch(0, 1).messages
    assert newest.subject == MARKER  # stored as typed, escaped only when shown
    assert_escaped(bob.get(f"/mail/{newest.id}/").content.decode())


def test_script_in_a_chat_message_is_escaped(demo):
    bob = client_for("bob")
    page = bob.get(f"{CHAT}/")
    after = re.search(r'id="chat-after" name="after" value="(\d+)"', page.content.decode())
    sent = client_for("alice").post(f"{CHAT}/send/", {"text": MARKER})
    assert sent.status_code == 302
    assert_escaped(bob.get(f"{CHAT}/poll/", {"after": after.group(1)}).content.decode())
    assert_escaped(client_for("carol").get(f"{CHAT}/").content.decode())


ADMIN_PAGES = [
    "app_redisparts_changelist",
    *(
        name
        for name in (
            "queues",
            "tasks",
            "locks",
            "semaphores",
            "chats",
            "counters",
            "stats",
            "logs",
            "config",
            "persistence",
            "autocomplete",
        )
    ),
]


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_only_staff_reach_the_redis_parts_admin(page, demo, django_user_model):
    url = reverse(f"admin:redisparts_{page}")
    for user in (None, "alice"):
        response = client_for(user).get(url)
        assert response.status_code == 302, user
        assert response["Location"].startswith("/admin/login/?next=")
    assert client_for("admin").get(url).status_code == 200
    # Staff without the app's permissions are turned away too.
    django_user_model.objects.create_user("clerk", password="clerk-demo", is_staff=True)
    assert client_for("clerk").get(url).status_code == 403


def test_only_staff_with_change_permission_retry_a_failed_task(demo, redis_client):
    queue = TaskQueue()
    task_id = fails_until_flag.enqueue("staff-only")
    Worker(["default"], block=0.1).run(burst=True)
    assert queue.counts()["failed"] == 1
    retry = reverse("admin:redisparts_task_retry", args=(queue.group, task_id))

    before = data_snapshot(redis_client)
    response = client_for("alice").post(retry)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert data_snapshot(redis_client) == before

    response = client_for("admin").post(retry)
    assert response.status_code == 302
    counts = queue.counts()
    assert counts["failed"] == 0
    assert counts["queues"]["default"] == 1


@pytest.mark.parametrize(
    ("user", "page"),
    [
        ("alice", "/market/"),
        ("alice", "/friends/"),
        ("alice", "/mail/compose/"),
        ("alice", "/chat/"),
        ("admin", "config"),
        ("admin", "tasks"),
        ("admin", "autocomplete"),
        (None, "/login/"),
    ],
)
def test_pages_show_no_error_marker_without_an_error(user, page, demo):
    """The error markers looked for above are not on every page anyway."""
    case = Case("good", user, "GET", page)
    response = case.send(client_for(user))
    assert response.status_code == 200
    assert not ERROR.search(response.content.decode())
