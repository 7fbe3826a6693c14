"""The demo's error answers: styled 404/405/500 pages (DEBUG on too), service errors as
sentences, the Outbox's exact recipient match, /login/ when signed in, which Redis errors
are the 503 page (test_full_redis.py fills a real server); maintenance with its banner for
staff; the navigation."""

import pytest
import redis
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse
from django.views.defaults import server_error

from marketplace.demo_data import CHAT_ID, load
from marketplace.mailers import FILE_BACKEND, mail_settings
from marketplace.refusals import refusal
from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import validate_key_part
from redisparts_app.middleware import redis_unavailable
from redisparts_app.services import config


@pytest.fixture
def demo(db):
    return load()


def login(client, name: str):
    client.force_login(User.objects.get(username=name))
    return client


def text_of(response) -> str:
    return response.content.decode()


def assert_site_page(response, status: int, words: str) -> None:
    """A page of the site (its stylesheet and navigation) with ``words``, not Django's."""
    body = text_of(response)
    assert response.status_code == status
    assert "marketplace/site.css" in body
    assert 'class="topbar"' in body
    assert words in body
    assert "URLconf" not in body  # Django's debug 404 lists every URL pattern


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "production"])
def test_an_unknown_address_gets_the_sites_404_page(client, demo, settings, debug):
    settings.DEBUG = debug
    response = login(client, "alice").get("/no-such-page/")
    assert_site_page(response, 404, "There is no page at this address")
    assert "alice" in text_of(response)  # signed in, as on every page


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "production"])
def test_an_http404_raised_by_a_view_gets_the_sites_404_page(client, demo, settings, debug):
    settings.DEBUG = debug
    # The admin's catch-all view raises Http404 for a staff user.
    response = login(client, "admin").get("/admin/no-such-app/")
    assert_site_page(response, 404, "There is no page at this address")


def test_a_404_a_view_answers_with_its_own_message_is_kept(client, demo):
    response = login(client, "alice").get("/mail/123456/")
    assert response.status_code == 404
    assert "There is no such message in your mailbox." in text_of(response)


def test_the_slash_is_still_appended_before_a_404(client, demo):
    response = login(client, "alice").get("/market")
    assert response.status_code == 301
    assert response["Location"] == "/market/"


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "production"])
@pytest.mark.parametrize("path", ["/market/buy/", "/logout/", "/guild/join/"])
def test_a_post_only_address_opened_by_get_gets_the_sites_405_page(
    client, demo, settings, debug, path
):
    settings.DEBUG = debug
    response = login(client, "alice").get(path)
    assert_site_page(response, 405, "not a visit")
    assert "POST" in response["Allow"]


def test_the_500_page_is_the_sites():
    response = server_error(RequestFactory().get("/market/"))
    body = text_of(response)
    assert response.status_code == 500
    assert "marketplace/site.css" in body
    assert "Something broke on our side" in body


def test_login_while_signed_in_goes_home_saying_so(client, demo):
    response = login(client, "alice").get("/login/", follow=True)
    assert response.redirect_chain == [("/", 302)]
    assert "You are signed in as alice." in text_of(response)


def test_login_with_a_next_page_while_signed_in_shows_the_form(client, demo):
    response = login(client, "alice").get("/login/?next=/admin/")
    assert response.status_code == 200
    assert "log in as another user" in text_of(response)


def test_login_page_for_a_visitor_is_the_form(client, db):
    response = client.get("/login/")
    assert response.status_code == 200
    assert 'name="password"' in text_of(response)


@pytest.mark.parametrize(
    ("field", "value", "sentence"),
    [
        ("guild", "a:b{c}*", "A guild name cannot contain ':'."),
        ("guild", "x" * 500, "A guild name can be at most"),
        ("guild", " knights", "A guild name cannot start or end with a space."),
        ("guild", "a\x00b", "A guild name cannot contain control characters"),
        ("recipient", "", "A recipient's name cannot be empty."),
    ],
)
def test_refusal_says_a_key_part_error_as_a_sentence(field, value, sentence):
    with pytest.raises(InvalidArgument) as caught:
        validate_key_part(value, field)
    text = refusal(caught.value)
    assert text.startswith(sentence)
    assert "invalid" not in text


@pytest.mark.parametrize(
    ("path", "data", "sentence"),
    [
        ("/guild/join/", {"guild": "a:b{c}*"}, "A guild name cannot contain &#x27;:&#x27;."),
        ("/guild/members/?guild=Knights&q=a:", None, "A name cannot contain &#x27;:&#x27;."),
        ("/contacts/suggest/?field=to&to=%7B", None, "A name cannot contain &#x27;{&#x27;."),
        ("/friends/add/", {"username": "a*"}, "A user name cannot contain &#x27;*&#x27;."),
        (f"/chat/{CHAT_ID}/send/", {"text": "   "}, "A message cannot be empty."),
    ],
)
def test_pages_show_service_errors_as_sentences(client, demo, path, data, sentence):
    client = login(client, "alice")
    response = client.get(path) if data is None else client.post(path, data)
    assert response.status_code == 400
    body = text_of(response)
    assert sentence in body
    assert "invalid " not in body


def test_the_outbox_matches_the_whole_recipient_address(client, demo, tmp_path):
    User.objects.create_user("ice", email="ice@redisparts.test", password="ice-pw-123")
    with override_settings(**mail_settings(FILE_BACKEND, file_path=tmp_path)):
        send_mail("Your Lantern sold", "for alice", "m@x.test", ["alice@redisparts.test"])
        send_mail("Your Rope sold", "for ice", "m@x.test", ["Ice <ICE@redisparts.test>"])
        ice = login(client, "ice").get("/outbox/")
        alice = login(client, "alice").get("/outbox/")
    assert "Your Rope sold" in text_of(ice)
    assert "Your Lantern sold" not in text_of(ice)
    assert "Your Lantern sold" in text_of(alice)
    assert "Your Rope sold" not in text_of(alice)


# Redis that cannot serve ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (redis.ConnectionError("refused"), True),
        (redis.BusyLoadingError("LOADING Redis is loading the dataset in memory"), True),
        (redis.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), True),
        (redis.ReadOnlyError("You can't write against a read only replica."), True),
        (redis.ResponseError("BUSY Redis is busy running a script."), True),
        (redis.ResponseError("MISCONF Errors writing to the AOF file"), True),
        (
            redis.ResponseError(
                "Error running script (call to f_1): @user_script:3: -OOM command not allowed"
            ),
            True,
        ),
        (redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"), False),
        (redis.ResponseError("ERR syntax error"), False),
        (ValueError("OOM"), False),
    ],
)
def test_redis_unavailable_tells_refusals_for_now_from_bugs(error, unavailable):
    assert redis_unavailable(error) is unavailable


def test_a_rate_limited_mail_comes_back_in_its_form_with_when_to_retry(client, demo, settings):
    settings.MARKETPLACE = {**settings.MARKETPLACE, "RATE_LIMITS": {"mail": (1, 60)}}
    client = login(client, "alice")
    mail = {"to": "bob", "subject": "Second try", "body": "Kept body"}
    assert client.post("/mail/compose/", {**mail, "subject": "First"}).status_code == 302
    response = client.post("/mail/compose/", mail)
    body = text_of(response)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert 'You are sending mail too fast. Try again <span role="timer" data-retry' in body
    assert 'value="Second try"' in body
    assert "Kept body</textarea>" in body


def test_a_rate_limited_new_chat_comes_back_in_its_form(client, demo, settings):
    settings.MARKETPLACE = {**settings.MARKETPLACE, "RATE_LIMITS": {"chat": (1, 60)}}
    client = login(client, "alice")
    chat = {"members": "bob", "message": "Kept first message"}
    assert client.post("/chat/new/", chat).status_code == 302
    response = client.post("/chat/new/", chat)
    body = text_of(response)
    assert response.status_code == 429
    assert 'You are sending chat messages too fast. Try again <span role="timer" data-retry' in body
    assert "Kept first message</textarea>" in body


def test_maintenance_turns_visitors_away_and_shows_staff_a_banner(client, demo):
    config.set_maintenance(message="Upgrading the market")
    config.clear_local_cache()
    try:
        visitor = client.get("/market/")
        assert visitor.status_code == 503
        assert "Upgrading the market" in text_of(visitor)
        assert login(client, "alice").get("/market/").status_code == 503
        staff = login(Client(), "admin").get("/market/")
        assert_site_page(staff, 200, "Maintenance mode is on: visitors see the maintenance page")
        assert "Upgrading the market" in text_of(staff)
        assert reverse("admin:redisparts_config") in text_of(staff)
    finally:
        config.clear_maintenance()
        config.clear_local_cache()
    calm = login(Client(), "admin").get("/market/")
    assert "maintenance-banner" not in text_of(calm)


def test_the_navigation_leads_to_every_page_of_the_site(client, demo):
    page = text_of(login(client, "alice").get("/"))
    for path in ("/market/", "/guild/", "/mail/", "/chat/", "/outbox/", "/friends/", "/stats/"):
        assert f'href="{path}"' in page.split("</nav>")[0]
