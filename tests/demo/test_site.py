"""The demo site's frame: landing page, log in and out, navigation, presence, soft failures."""

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from marketplace.demo_data import ACCOUNTS
from redisparts_app.services.mail import Mailbox
from redisparts_app.services.presence import is_online

pytestmark = pytest.mark.cluster


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", password="alice-demo")


def test_landing_page_lists_every_demo_account_and_password(client):
    body = client.get("/").content.decode()
    for account in ACCOUNTS:
        assert f"<td>{account.username}</td>" in body
        assert f"<code>{account.password}</code>" in body


def test_login_page_logs_in_and_logout_is_a_post(client, alice):
    assert client.get("/login/").status_code == 200
    response = client.post("/login/", {"username": "alice", "password": "alice-demo"})
    assert response.status_code == 302
    body = client.get("/").content.decode()
    assert 'action="/logout/"' in body
    assert "csrfmiddlewaretoken" in body
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/").status_code == 302
    assert 'action="/logout/"' not in client.get("/").content.decode()


def test_wrong_password_is_a_form_error(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()


def test_navigation_links_by_path_and_admin_only_for_staff(client, alice):
    client.force_login(alice)
    body = client.get("/").content.decode()
    for path in ("/market/", "/guild/", "/mail/", "/chat/", "/friends/", "/stats/"):
        assert f'href="{path}"' in body
    assert 'href="/admin/"' not in body
    alice.is_staff = True
    alice.save()
    assert 'href="/admin/"' in client.get("/").content.decode()


def test_unread_mail_badge_counts_unread_guild_mail(client, alice):
    client.force_login(alice)
    assert 'class="badge"' not in client.get("/").content.decode()
    Mailbox("alice").send("bob", "hello", "hi there")
    Mailbox("alice").send("carol", "again", "hi again")
    badge = '<span class="badge" title="unread messages">2</span>'
    assert badge in client.get("/").content.decode()


def test_signed_in_requests_record_presence(client, alice):
    assert not is_online("alice")
    client.get("/")
    assert not is_online("alice")
    client.force_login(alice)
    client.get("/")
    assert is_online("alice")


def test_pages_stay_up_without_the_badge_when_only_the_badge_fails(client, db):
    # A username that is no valid key part cannot have a mailbox: no badge, no error.
    user = User.objects.create_user("has:colon", password="pw-12345")
    client.force_login(user)
    response = client.get("/outbox/")
    assert response.status_code == 200
    assert 'class="badge"' not in response.content.decode()


@pytest.mark.single_server  # points CACHES at a dead server
def test_redis_down_gives_503_for_a_signed_in_user(client, alice, tmp_path):
    client.force_login(alice)
    dead = {"default": {"BACKEND": "django_redis.cache.RedisCache",
                        "LOCATION": f"unix://{tmp_path}/nobody-home.sock"}}  # fmt: skip
    with override_settings(CACHES=dead):
        response = client.get("/")
    assert response.status_code == 503
    assert "right back" in response.content.decode()


def test_htmx_is_served_locally(client):
    body = client.get("/").content.decode()
    assert "/static/django_htmx/htmx" in body
    assert "https://" not in body.split("<body")[0]


def test_logging_out_shows_the_user_offline_at_once(client, alice):
    client.post("/login/", {"username": "alice", "password": "alice-demo"})
    client.get("/")
    assert is_online("alice")
    client.post("/logout/")
    assert not is_online("alice")
