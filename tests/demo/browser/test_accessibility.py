"""axe-core (from the npm registry, injected by Playwright) finds no serious or critical
accessibility violation on any page of the site (signed out, signed in, the maintenance
and error pages) or of the Redis parts admin (every page, a task's page), at desktop and
phone widths."""

import json
import os

import pytest
from django.urls import reverse

from marketplace.demo_data import CHAT_ID
from redisparts_app.admin.views import NAVIGATION
from redisparts_app.services import config
from redisparts_app.services.tasks import TaskQueue, Worker
from tests.tasks_helpers import fails_until_flag

from .helpers import ROOT, log_in, save_screenshot

pytestmark = pytest.mark.browser

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
SITE_PAGES = [
    "/",
    "/market/",
    "/outbox/",
    "/friends/",
    "/stats/",
    "/guild/",
    "/mail/",
    "/mail/compose/",
    "/mail/1/",
    "/chat/",
    f"/chat/{CHAT_ID}/",
    f"/chat/{CHAT_ID}/older/?before=2",
    "/no-such-page/",
]
SERIOUS = ("serious", "critical")


def violations(page) -> list[dict]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        {
            "rule": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "where": [[node["target"], node["failureSummary"]] for node in v["nodes"][:3]],
        }
        for v in found
        if v["impact"] in SERIOUS
    ]


def scan(page, paths: list[str]) -> dict[str, list[dict]]:
    report = {}
    for path in paths:
        page.goto(path)
        found = violations(page)
        if found:
            report[path] = found
    return report


@pytest.fixture
def axe_script():
    if not AXE.exists():
        reason = f"{AXE} is missing: make test installs axe-core with npm (package.json)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI runs the accessibility test, it does not skip it")
        pytest.skip(reason)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_site_pages_have_no_serious_violation(new_page, axe_script, width):
    page = new_page()
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    report = scan(page, ["/login/", "/admin/login/"])
    config.set_maintenance(message="Upgrading")
    config.clear_local_cache()
    try:
        report |= scan(page, ["/market/"])  # the maintenance page
    finally:
        config.clear_maintenance()
        config.clear_local_cache()
    log_in(page, "alice", "alice-demo")
    report |= scan(page, SITE_PAGES)
    page.goto("/")
    save_screenshot(page, f"site-home-{width}")
    assert report == {}, json.dumps(report, indent=1)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_admin_pages_have_no_serious_violation(new_page, axe_script, width):
    page = new_page()
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    log_in(page, "admin", "admin-demo")
    fails_until_flag.enqueue("axe")
    Worker(["default"]).run(burst=True)
    [failed] = TaskQueue().failed()
    paths = [reverse("admin:index"), reverse("admin:redisparts_task", args=["default", failed.id])]
    for _label, name in NAVIGATION:
        changelist = "admin:redisparts_app_redisparts_changelist"
        paths.append(reverse(changelist if name == "changelist" else f"admin:redisparts_{name}"))
    report = scan(page, paths)
    assert report == {}, json.dumps(report, indent=1)
