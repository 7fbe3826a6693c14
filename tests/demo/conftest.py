"""Fixtures of the demo site's tests; the Redis fixtures come from tests/conftest.py."""

import os

import pytest
from django.core.management import call_command

from tests.conftest import DEMO_SETTINGS

# Named on the command line, tests/demo/ is collected whatever the settings; refuse to run
# the demo's tests under the app's.
if os.environ.get("DJANGO_SETTINGS_MODULE") != DEMO_SETTINGS:
    raise pytest.UsageError(f"the demo site's tests run with --ds={DEMO_SETTINGS}")


@pytest.fixture
def demo(transactional_db, redis_client) -> None:
    """The demo data; real commits, so writes deferred to on_commit (queued tasks) happen."""
    call_command("load_demo", verbosity=0)
