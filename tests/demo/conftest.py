"""Fixtures of the demo site's tests; the Redis fixtures come from tests/conftest.py."""

import pytest
from django.core.management import call_command


@pytest.fixture
def demo(transactional_db, redis_client) -> None:
    """The demo data; real commits, so writes deferred to on_commit (queued tasks) happen."""
    call_command("load_demo", verbosity=0)
