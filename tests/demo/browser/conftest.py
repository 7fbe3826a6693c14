"""Browser tests: Playwright drives Debian's Chromium against the site served for real.

The site runs in pytest-django's ``live_server`` (a thread of the test process, with the
test settings, the suite's Redis and its in-memory database shared with the server
thread). Queued tasks run in ``rp_worker`` in a forked process on the same Redis, sending
e-mail through Django's file backend into a temp folder the test reads.

One Chromium for all browser tests, a fresh context (cookies) per user. Waits go through
Playwright's auto-waiting ``expect`` with a 15 s limit, generous for a loaded machine;
no fixed sleeps. Every flow saves a screenshot into ``test-artifacts/``, and a failing
test saves one of each page it had open.

``/usr/bin/chromium`` missing: the tests skip, except under ``CI=true`` where they fail.
"""

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application
from django.core.management import call_command
from django.test import override_settings
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from marketplace.mailers import FILE_BACKEND, mail_settings
from redisparts_app.testing import free_port
from tests.processes import CONTEXT

from .helpers import TIMEOUT_MS, save_screenshot

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.browser_failed = report.failed
    return report


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Headless Debian Chromium driven by Playwright, shared by the browser tests.

    Playwright's sync API keeps an asyncio loop in the main thread while it runs, which
    Django's async-safety check mistakes for async code calling the ORM; the check is
    off only while the browser is up (the package's tests, not the rest of the suite).
    """
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does it as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI runs the browser tests, it does not skip them")
        pytest.skip(reason)
    expect.set_options(timeout=TIMEOUT_MS)
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def mail_dir(tmp_path: Path) -> Iterator[Path]:
    """E-mail goes to files here, from the server thread and the worker alike."""
    directory = tmp_path / "mail"
    directory.mkdir()
    with override_settings(**mail_settings(FILE_BACKEND, file_path=directory)):
        yield directory


@pytest.fixture
def site(live_server, redis_client, mail_dir: Path) -> str:
    """The site's URL with the demo data loaded (users in the database, the rest in Redis)."""
    call_command("load_demo", verbosity=0)
    return live_server.url


@pytest.fixture
def new_page(browser: Browser, site: str, request) -> Iterator[Callable[[], Page]]:
    """Open pages, each in a context of its own (a separate user); closed at teardown."""
    yield from _pages(browser, site, request)


@pytest.fixture
def asgi_site(site: str) -> Iterator[str]:
    """The same site (database, Redis, demo data) served through ASGI by uvicorn, in a
    thread of the test process as live_server's WSGI server is, so chat pages get their
    messages pushed as Server-Sent Events."""
    app = ASGIStaticFilesHandler(get_asgi_application())
    port = free_port()
    # Open event streams never end: at teardown they get 1 s, then are closed.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
        timeout_graceful_shutdown=1,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)  # no signal handlers there
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start serving the site")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(15)


@pytest.fixture
def new_asgi_page(browser: Browser, asgi_site: str, request) -> Iterator[Callable[[], Page]]:
    """new_page on the site served through ASGI."""
    yield from _pages(browser, asgi_site, request)


def _pages(browser: Browser, base_url: str, request) -> Iterator[Callable[[], Page]]:
    contexts: list[BrowserContext] = []
    pages: list[Page] = []

    def open_page() -> Page:
        context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        pages.append(page)
        return page

    yield open_page
    if getattr(request.node, "browser_failed", False):
        for number, page in enumerate(pages):
            save_screenshot(page, f"FAILED-{request.node.name}-{number}")
    for context in contexts:
        context.close()


def _run_worker(queues: tuple[str, ...]) -> None:
    call_command("rp_worker", *queues, verbosity=0)


@pytest.fixture
def start_worker(site: str) -> Iterator[Callable[..., None]]:
    """Start ``rp_worker`` on the given queues in forked processes; stopped at teardown.

    Forked after the demo data is loaded, a worker inherits the test settings (the
    suite's Redis, the file e-mail backend) and a copy of the in-memory database, so
    tasks that look users up find them.
    """
    workers = []

    def start(*queues: str) -> None:
        process = CONTEXT.Process(target=_run_worker, args=(queues,), daemon=True)
        process.start()
        workers.append(process)

    yield start
    for process in workers:
        if process.is_alive():
            os.kill(process.pid, signal.SIGTERM)
    for process in workers:
        process.join(20)
        if process.is_alive():
            process.kill()
            process.join()
