import socket

import pytest
from django.core.management import call_command
from django.test import override_settings

from redisparts_app.checks import check_servers, check_settings, version_error


def ids(messages):
    return [message.id for message in messages]


def test_default_settings_pass_every_check():
    assert check_settings() == []
    assert check_servers() == []


@pytest.mark.parametrize(
    ("redisparts", "expected_id", "text"),
    [
        ({"KEY_PREFX": "x"}, "redisparts.E001", "Unknown REDISPARTS setting 'KEY_PREFX'"),
        ({"MAX_KEY_PART_LENGTH": 0}, "redisparts.E001", "positive number"),
        ({"CHECK_TIMEOUT": "soon"}, "redisparts.E001", "positive number"),
        ({"KEY_PREFIX": "a{b}"}, "redisparts.E002", "not a valid key prefix"),
        ({"KEY_PREFIX": "rp*"}, "redisparts.E002", "not a valid key prefix"),
        ({"KEY_PREFIX": ""}, "redisparts.E002", "not a valid key prefix"),
        ({"CONNECTIONS": {}}, "redisparts.E003", "non-empty dict"),
        ({"CONNECTIONS": {"default": {"URL": "http://x"}}}, "redisparts.E003", "redis://"),
        ({"DEFAULT_CONNECTION": "main"}, "redisparts.E003", "'main' is not in CONNECTIONS"),
        ({"EMBEDDED": {"DATA_DIR": "/tmp/x", "APPENDFSYNC": "sometimes"}}, "redisparts.E005",
         "APPENDFSYNC"),
        ({"EMBEDDED": {"DATA_DIR": 3}}, "redisparts.E005", "DATA_DIR must be a path"),
    ],
)  # fmt: skip
def test_bad_settings_are_reported_with_an_id(redisparts, expected_id, text):
    with override_settings(REDISPARTS=redisparts):
        messages = check_settings()
    assert expected_id in ids(messages)
    assert any(text in message.msg for message in messages)


def test_stopped_server_is_a_warning_with_a_hint(redis_server_factory):
    server = redis_server_factory()
    server.stop()
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": server.url}}):
        messages = check_servers()
    assert ids(messages) == ["redisparts.W001"]
    assert "unreachable" in messages[0].msg
    assert "rp_embedded start" in messages[0].hint


def test_server_that_never_answers_is_reported_after_the_timeout():
    # A listening socket that accepts connections but never replies to PING.
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    try:
        with override_settings(
            REDISPARTS={
                "CONNECTIONS": {"default": f"redis://127.0.0.1:{port}/0"},
                "CHECK_TIMEOUT": 0.5,
            }
        ):
            messages = check_servers()
    finally:
        silent.close()
    assert ids(messages) == ["redisparts.W001"]
    assert "no answer within 0.5s" in messages[0].msg


def test_version_below_6_2_is_an_error_and_6_2_passes():
    old = version_error("default", (6, 0, 16))
    assert old is not None
    assert old.id == "redisparts.E004"
    assert "6.0.16" in old.msg
    assert old.hint
    assert version_error("default", (6, 2, 0)) is None
    assert version_error("default", (7, 4, 1)) is None


def test_check_command_passes_on_the_test_server(capsys):
    call_command("check", "--tag", "redisparts")
    assert "no issues" in capsys.readouterr().out
