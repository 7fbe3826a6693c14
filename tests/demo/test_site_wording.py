"""The demo site says one thing one way: dates in one format, human durations, the words
of the pages as they are."""

import re
from datetime import UTC, datetime

import pytest
from django.core.mail import EmailMessage
from django.test import override_settings

from marketplace.demo_data import CHAT_ID
from marketplace.mailers import FILE_BACKEND, mail_settings
from marketplace.templatetags.site_dates import site_date
from redisparts_app.services import chat, config
from redisparts_app.services.mail import Mailbox
from tests.demo.site_helpers import client_for

pytestmark = pytest.mark.cluster

# What the site writes for a moment, and what it must not (RFC 2822, ISO, "UTC" suffixes).
SITE_DATE = re.compile(r"\b[A-Z][a-z]{2} \d{1,2}, \d\d:\d\d\b")
OTHER_DATE = re.compile(r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d|\d{4}-\d\d-\d\d[ T]\d|, \d{4}, ")


def visible_text(response) -> str:
    """The page's text outside tags (attributes such as datetime= and title= left out)."""
    return re.sub(r"<[^>]*>", " ", response.content.decode())


@pytest.mark.parametrize(
    ("moment", "written"),
    [
        (datetime(2026, 11, 29, 3, 15, tzinfo=UTC), "Nov 29, 03:15"),
        (datetime(2026, 1, 2, 23, 5), "Jan 2, 23:05"),  # naive: taken as UTC
        (None, ""),
    ],
)
def test_site_date_writes_the_sites_one_format(moment, written):
    assert site_date(moment) == written


def test_the_outbox_writes_dates_as_the_site_does(demo, tmp_path):
    with override_settings(**mail_settings(FILE_BACKEND, file_path=tmp_path)):
        for date in ("Sun, 29 Nov 2026 04:15:00 +0100", "Sun, 29 Nov 2026 05:20:00 -0000"):
            headers = {"Date": date}
            to = ["alice@redisparts.test"]
            EmailMessage("Your Lantern sold", "Sold.", "m@x.test", to, headers=headers).send()
        response = client_for("alice").get("/outbox/")
    text = visible_text(response)
    assert "Nov 29, 03:15" in text
    assert "Nov 29, 05:20" in text
    assert not OTHER_DATE.search(text), OTHER_DATE.search(text)
    assert '<time datetime="2026-11-29T03:15:00+00:00">' in response.content.decode()


def test_mail_and_chat_pages_write_dates_as_the_site_does(demo):
    Mailbox("alice").send("bob", "Dates", "One format.")
    chat.send_message(CHAT_ID, "bob", "And here.")
    client = client_for("alice")
    message_id = Mailbox("alice").fetch(0, 1).messages[0].id
    for path in ("/mail/", f"/mail/{message_id}/", "/chat/"):
        text = visible_text(client.get(path))
        assert SITE_DATE.search(text), path
        assert not OTHER_DATE.search(text), (path, OTHER_DATE.search(text))


def test_the_home_page_says_chat_is_pushed(demo):
    text = visible_text(client_for(None).get("/"))
    assert "by pull" not in text
    assert "group chat pushed as server-sent events, polling as fallback" in text


def test_staff_sign_in_at_login_during_maintenance(demo):
    config.set_maintenance(message="Upgrading the market")
    config.clear_local_cache()
    try:
        visitor = client_for(None)
        page = visitor.get("/login/")
        assert page.status_code == 200
        assert 'name="password"' in page.content.decode()
        signed_in = visitor.post("/login/", {"username": "admin", "password": "admin-demo"})
        assert signed_in.status_code == 302
        assert visitor.get(signed_in["Location"]).status_code == 200  # staff get through
        alice = client_for(None)
        assert (
            alice.post("/login/", {"username": "alice", "password": "alice-demo"}).status_code
            == 302
        )
        assert alice.get("/market/").status_code == 503  # the rest of the site stays closed
    finally:
        config.clear_maintenance()
        config.clear_local_cache()


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
PROMETHEUS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


@pytest.mark.parametrize("path", ["/metrics", "/health/"])
@pytest.mark.parametrize("user", [None, "alice"])
def test_monitoring_refuses_a_browser_with_the_sites_403_page(demo, path, user):
    response = client_for(user).get(path, headers={"Accept": BROWSER})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "marketplace/site.css" in body
    assert "This page is for staff who may see the Redis parts" in body
    assert ('href="/login/?next=' in body) is (user is None)


@pytest.mark.parametrize("path", ["/metrics", "/health/", "/health/?format=json"])
@pytest.mark.parametrize("accept", [PROMETHEUS, "*/*", "application/json", None])
def test_monitoring_refuses_a_scraper_with_a_line_of_text(demo, path, accept):
    headers = {"Accept": accept} if accept else {}
    response = client_for("alice").get(path, headers=headers)
    assert response.status_code == 403
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert "METRICS_TOKEN" in response.content.decode()
