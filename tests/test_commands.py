"""What every rp_* command shares (management/base.py): exit codes, one-line errors, --json."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.test import override_settings

from redisparts_app.management.base import RedisCommand
from redisparts_app.services import geoip, semaphores
from redisparts_app.services.locks import Lock

ROOT = Path(__file__).resolve().parent.parent

# Each command that talks to Redis, with arguments that would make it do so.
REDIS_COMMANDS = {
    "rp_autocomplete": ["knights", "--query", "a"],
    "rp_backup": ["{tmp}/backup"],
    "rp_clean_counters": ["--once"],
    "rp_config": ["list"],
    "rp_copy_logs": ["{tmp}", "--channel", "c"],
    "rp_import_geoip": ["--sample"],
    "rp_locks": [],
    "rp_maintenance": ["status"],
    "rp_process_logs": ["--channel", "c", "--id", "0"],
    "rp_queue": ["stats"],
    "rp_registry": [],
    "rp_schedule": ["list"],
    "rp_semaphores": [],
    "rp_status": [],
}


def _app_commands() -> list[str]:
    return sorted(name for name, app in get_commands().items() if app == "redisparts_app")


# Every command reports something (figures, a list, what it did): all take --json.
REPORTING = _app_commands()


def test_every_command_of_the_app_shares_the_base():
    names = _app_commands()
    assert set(REDIS_COMMANDS) <= set(names)
    for name in names:
        assert isinstance(load_command_class("redisparts_app", name), RedisCommand), name


@pytest.mark.parametrize("name", REPORTING)
def test_reporting_commands_take_json(name):
    parser = load_command_class("redisparts_app", name).create_parser("manage.py", name)
    assert "--json" in parser.format_help()


def test_every_command_has_its_section_in_the_docs():
    page = (ROOT / "docs" / "commands.md").read_text()
    assert len(REPORTING) >= 16
    for name in REPORTING:
        assert f"\n## `{name}`\n" in page, name


@pytest.mark.parametrize("name", sorted(REDIS_COMMANDS))
def test_an_unreachable_redis_exits_3_with_one_line(name, tmp_path):
    argv = [arg.format(tmp=tmp_path) for arg in REDIS_COMMANDS[name]]
    dead = {"CONNECTIONS": {"default": f"unix://{tmp_path}/no.sock"}}
    with override_settings(REDISPARTS=dead), pytest.raises(CommandError) as failure:
        call_command(name, *argv, verbosity=0)
    assert failure.value.returncode == 3, failure.value
    assert "cannot reach Redis" in str(failure.value)
    assert "\n" not in str(failure.value)


def test_a_bad_argument_exits_2_before_anything_is_written(redis_client):
    with pytest.raises(CommandError, match="invalid") as failure:
        call_command("rp_semaphores", "bad:name")
    assert failure.value.returncode == 2
    assert redis_client.dbsize() == 0


def test_ctrl_c_exits_130_and_says_what_it_left(redis_client, monkeypatch):
    call_command("rp_import_geoip", "--sample", verbosity=0)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(geoip, "import_geoip", interrupted)
    with pytest.raises(CommandError, match="previous GeoIP data is unchanged") as failure:
        call_command("rp_import_geoip", "--sample", verbosity=0)
    assert failure.value.returncode == 130
    assert before
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before


def test_json_reports_hold_what_the_text_says(redis_client, capsys, tmp_path):
    lock = Lock("report", ttl=30)
    assert lock.acquire()
    with semaphores.Semaphore("slots", limit=2).hold(reason="json"):
        call_command("rp_locks", "--json")
        [held] = json.loads(capsys.readouterr().out)
        assert held["name"] == "report"
        assert held["fence"] == lock.fence
        call_command("rp_semaphores", "--json")
        found = json.loads(capsys.readouterr().out)
        assert [holder["reason"] for holder in found["slots"]] == ["json"]
    lock.release()
    call_command("rp_import_geoip", "--sample", "--json", verbosity=0)
    report = json.loads(capsys.readouterr().out)
    assert report["blocks"] > 0
    assert report["cities"] > 0
    assert report["bad_rows"] == 0


def test_a_real_process_exits_with_the_code_and_no_traceback(tmp_path):
    """Through manage.py's own path (run_from_argv), not call_command."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "django", "rp_locks", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines()[-1].startswith("CommandError: cannot reach Redis")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
