"""Friends, stats and outbox pages, and the demo data loader."""

import pytest
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.core.management import call_command
from django.test import override_settings

from marketplace.demo_data import ACCOUNTS, CHAT_HISTORY, CHAT_ID, load
from marketplace.mailers import FILE_BACKEND, mail_settings
from marketplace.models import MarketSummary
from marketplace.summary import SUMMARY, refresh_market_summary
from redisparts_app.keys import scan_keys
from redisparts_app.services import market, presence
from redisparts_app.services.autocomplete import RecentContacts
from redisparts_app.services.chat import chat_members, read_messages
from redisparts_app.services.logs import log_recent
from redisparts_app.services.mail import Mailbox
from redisparts_app.services.stats import ACCESS_TIME, update_stats

pytestmark = pytest.mark.cluster


@pytest.fixture
def demo(db):
    return load()


def login(client, name: str):
    client.force_login(User.objects.get(username=name))
    return client


def everything(redis_client) -> dict[bytes, bytes]:
    return {key: redis_client.dump(key) for key in scan_keys(redis_client, "*")}


def test_load_demo_twice_changes_nothing(db, redis_client):
    call_command("load_demo", verbosity=0)
    keys_after_first = everything(redis_client)
    users_after_first = list(User.objects.order_by("pk").values_list("username", "password"))
    report = load()
    assert (report.users, report.market_accounts, report.listings, report.guilds) == (0, 0, 0, 0)
    assert (report.friendships, report.chats, report.mails) == (0, 0, 0)
    assert everything(redis_client) == keys_after_first
    users = list(User.objects.order_by("pk").values_list("username", "password"))
    assert users == users_after_first


def test_load_demo_seeds_what_the_pages_show(client, db):
    call_command("load_demo", verbosity=0)
    for account in ACCOUNTS:
        assert client.login(username=account.username, password=account.password)
    assert User.objects.get(username="admin").is_staff
    assert sorted(chat_members(CHAT_ID)) == ["alice", "bob", "carol"]
    assert [m.text for m in read_messages(CHAT_ID, "alice")] == [t for _, t in CHAT_HISTORY]
    assert Mailbox("alice").unread_count() == 2
    assert presence.friends("alice") == {"bob", "carol"}
    assert RecentContacts("bob").names() == ["alice"]


def test_load_demo_leaves_what_people_changed_alone(db):
    load()
    presence.remove_friend("alice", "bob")
    Mailbox("alice").delete(1)
    load()
    # Friendships are seeded again (a set), but mail and chat are not repeated.
    assert Mailbox("alice").unread_count() == 1


@pytest.mark.single_server  # points CACHES at a dead server
def test_load_demo_without_redis_fails_with_a_message(db, tmp_path, capsys):
    from django.core.management.base import CommandError

    dead = {"default": {"BACKEND": "django_redis.cache.RedisCache",
                        "LOCATION": f"unix://{tmp_path}/nobody-home.sock"}}  # fmt: skip
    with override_settings(CACHES=dead), pytest.raises(CommandError, match="cannot reach Redis"):
        call_command("load_demo", verbosity=0)


def test_friends_page_shows_online_dots(client, demo):
    presence.record_activity("bob")  # bob was active just now; carol was not
    body = login(client, "alice").get("/friends/").content.decode()
    bob_row = body[body.index('<span class="name">bob</span>') - 120 :]
    assert 'class="dot online"' in bob_row[:200]
    carol_row = body[body.index('<span class="name">carol</span>') - 120 :]
    assert 'class="dot"' in carol_row[:200]
    assert "1 online" in body


def test_a_friend_who_signs_in_turns_online(client, demo):
    from django.test import Client

    other = login(Client(), "carol")
    assert "carol" not in presence.online_friends("alice")
    other.get("/")  # any signed-in request records presence
    assert "carol" in presence.online_friends("alice")
    body = login(client, "alice").get("/friends/").content.decode()
    assert body.count('class="dot online"') == 1
    carol_row = body[body.index('<span class="name">carol</span>') - 120 :]
    assert 'class="dot online"' in carol_row[:200]


def test_add_and_remove_friend(client, demo):
    login(client, "alice")
    response = client.post("/friends/add/", {"username": "dave"}, follow=True)
    assert "You and dave are friends now." in response.content.decode()
    assert "alice" in presence.friends("dave")
    client.post("/friends/remove/", {"username": "dave"})
    assert "dave" not in presence.friends("alice")
    assert "alice" not in presence.friends("dave")


def test_adding_a_friend_you_have_says_you_already_are(client, demo):
    login(client, "alice")
    client.post("/friends/add/", {"username": "dave"}, follow=True)
    response = client.post("/friends/add/", {"username": "dave"}, follow=True)
    body = response.content.decode()
    assert "You and dave already are friends." in body
    assert "friends now" not in body
    assert "dave" in presence.friends("alice")


@pytest.mark.parametrize(
    "name", ["", "alice", "nobody", "a:b", "{x}", "*", "x" * 10_000, "bo\x00b", "<script>"]
)
def test_bad_friend_names_are_400_and_write_nothing(client, demo, redis_client, name):
    login(client, "alice")
    before = presence.friends("alice")
    response = client.post("/friends/add/", {"username": name})
    assert response.status_code == 400
    assert 'class="errorlist"' in response.content.decode()
    assert client.post("/friends/remove/", {"username": name}).status_code == 400
    assert presence.friends("alice") == before


def test_removing_someone_who_is_no_friend_is_a_400(client, demo):
    response = login(client, "alice").post("/friends/remove/", {"username": "dave"})
    assert response.status_code == 400
    assert "not among your friends" in response.content.decode()


def test_stats_page_charts_requests_and_response_times(client, demo):
    login(client, "alice")
    for _ in range(3):
        client.get("/market/")
    log_recent("marketplace", "someone tried <script>alert(1)</script>", "info")
    body = client.get("/stats/").content.decode()
    assert body.count('<svg class="chart') == 3
    assert "<title>market</title>" in body  # the market view among the slowest views
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>alert(1)</script>" not in body
    assert client.get("/stats/?range=day&log=django&severity=warning").status_code == 200


def test_stats_page_leaves_the_admins_pages_out(client, demo):
    update_stats("admin.redisparts_locks", ACCESS_TIME, 9.0)  # slower than any site view
    login(client, "alice").get("/market/")
    body = client.get("/stats/").content.decode()
    assert "<title>market</title>" in body
    assert "admin.redisparts" not in body


def test_stats_page_shows_the_market_copied_into_the_database(client, demo):
    login(client, "alice")
    assert "Not copied yet." in client.get("/stats/").content.decode()
    assert refresh_market_summary() is True
    summary = MarketSummary.objects.get(name=SUMMARY)
    assert summary.listings == market.count_listings() > 0
    body = client.get("/stats/").content.decode()
    assert f"{summary.listings} listings, 0 sales waiting" in body
    assert f"under lock token {summary.fence}" in body


@pytest.mark.parametrize(
    "query", ["range=year", "log=secret", "severity=debug", "range=%7B%7D", "log=" + "x" * 10_000]
)
def test_stats_page_refuses_unknown_choices_with_400(client, demo, query):
    response = login(client, "alice").get(f"/stats/?{query}")
    assert response.status_code == 400
    assert "Choose a range" in response.content.decode()


def test_outbox_shows_staff_everything_and_users_their_own(client, demo, tmp_path):
    with override_settings(**mail_settings(FILE_BACKEND, file_path=tmp_path)):
        send_mail("Your Bow sold for 75.00", "<b>hi</b>", "m@x.test", ["carol@redisparts.test"])
        send_mail("Your Rope sold for 1.00", "hello", "m@x.test", ["dave@redisparts.test"])
        staff = login(client, "admin").get("/outbox/").content.decode()
        carol = login(client, "carol").get("/outbox/").content.decode()
    assert "Your Bow sold" in staff
    assert "Your Rope sold" in staff
    assert "Your Bow sold" in carol
    assert "Your Rope sold" not in carol
    assert "&lt;b&gt;hi&lt;/b&gt;" in carol


def test_the_admin_is_branded_for_the_demo(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert "Marketplace: Redis parts" in page
    assert "Django administration" not in page
