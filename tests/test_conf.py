"""REDISPARTS settings: overrides are seen at once although values are cached."""

import pytest
from django.test import override_settings

from redisparts_app.conf import DEFAULTS, app_settings


def fetch_limit() -> int:
    return app_settings.CHAT_FETCH_LIMIT


def test_a_changed_setting_is_seen_at_once_and_restored_after():
    before = fetch_limit()
    with override_settings(REDISPARTS={"CHAT_FETCH_LIMIT": 7}):
        assert fetch_limit() == 7
        with override_settings(REDISPARTS={}):
            assert fetch_limit() == DEFAULTS["CHAT_FETCH_LIMIT"]
        assert fetch_limit() == 7
    assert fetch_limit() == before


def test_the_pytest_settings_fixture_is_seen_too(settings):
    app_settings.KEY_PREFIX  # noqa: B018 - cached now
    settings.REDISPARTS = {"KEY_PREFIX": "shop"}
    assert app_settings.KEY_PREFIX == "shop"


def test_an_unknown_setting_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NO_SUCH"):
        app_settings.NO_SUCH  # noqa: B018
