"""Logging in through the real login form, in Chromium."""

import pytest
from playwright.sync_api import expect

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser


def test_log_in_and_out(new_page):
    page = new_page()
    log_in(page, "alice", "alice-demo")
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    save_screenshot(page, "login")

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_title("signed in")).to_have_count(0)
    expect(page.get_by_role("banner").get_by_role("link", name="Log in")).to_be_visible()


def test_wrong_password_is_refused_with_a_message(new_page):
    page = new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-her-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".message.error")).to_contain_text("correct username and password")
    expect(page.get_by_title("signed in")).to_have_count(0)
    save_screenshot(page, "login-refused")
