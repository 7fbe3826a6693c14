"""Helpers for the browser tests: screenshots, logging in, reading the sent e-mail."""

import re
from email import message_from_bytes
from email.message import Message
from pathlib import Path

from playwright.sync_api import Page, expect

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT_MS = 15_000
# Django's file and console e-mail backends end each message with this line.
MESSAGE_SEPARATOR = b"\n" + b"-" * 79 + b"\n"


def save_screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot as ``test-artifacts/<name>.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / (re.sub(r"[^\w.-]+", "_", name) + ".png")
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Page, username: str, password: str) -> None:
    """Log in through the site's login form and wait until the site greets the user."""
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_title("signed in")).to_have_text(username)


def sent_messages(directory: Path) -> list[Message]:
    """The e-mails the file backend wrote into ``directory`` (a file may hold several)."""
    messages = []
    for path in sorted(directory.glob("*.log")):
        for chunk in path.read_bytes().split(MESSAGE_SEPARATOR):
            if chunk.strip():
                messages.append(message_from_bytes(chunk.lstrip(b"\n")))
    return messages
