"""The operators' commands rp_maintenance and rp_config, and the --json report of every
command that reports figures, on the test Redis."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from redisparts_app.services import config, counters
from redisparts_app.services.tasks import TaskQueue
from tests.tasks_helpers import fails_until_flag, record

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture, *argv: str) -> str:
    call_command(*argv)
    return capsys.readouterr().out


def refused(*argv: str) -> CommandError:
    with pytest.raises(CommandError) as failure:
        call_command(*argv)
    return failure.value


# -- rp_maintenance ---------------------------------------------------------------------


def test_maintenance_on_shows_the_page_to_visitors_and_off_ends_it(redis_client, capsys, client):
    said = run(capsys, "rp_maintenance", "on", "--message", "Back at two", "--retry-after", "120")
    assert "Maintenance mode is on" in said
    assert "Back at two" in said
    response = client.get("/any/page/")
    assert response.status_code == 503
    assert response["Retry-After"] == "120"
    assert "Back at two" in response.content.decode()
    status = json.loads(run(capsys, "rp_maintenance", "status", "--json"))
    assert status["on"] is True
    assert status["message"] == "Back at two"
    assert status["retry_after"] == 120
    assert status["since"] > 0
    assert json.loads(run(capsys, "rp_maintenance", "off", "--json")) == {
        "on": False,
        "was_on": True,
    }
    assert client.get("/any/page/").status_code == 404
    assert run(capsys, "rp_maintenance", "off") == "Maintenance mode was already off.\n"
    assert run(capsys, "rp_maintenance", "status") == "Maintenance mode is off.\n"


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--retry-after", "0"], "retry_after"),
        (["--retry-after", "-5"], "retry_after"),
        (["--message", "x" * 2001], "message"),
    ],
)
def test_maintenance_with_bad_input_exits_2_and_stays_off(redis_client, argv, reason):
    failure = refused("rp_maintenance", "on", *argv)
    assert failure.returncode == 2
    assert reason in str(failure)
    assert redis_client.dbsize() == 0


# -- rp_config --------------------------------------------------------------------------


def test_config_set_get_list_and_delete(redis_client, capsys):
    said = run(capsys, "rp_config", "set", "logs", "main", '{"level": "info", "keep": [1, 2]}')
    assert said == "Configuration logs/main saved.\n"
    assert config.get_config("logs", "main", wait=0) == {"level": "info", "keep": [1, 2]}
    assert json.loads(run(capsys, "rp_config", "get", "logs", "main")) == {
        "level": "info",
        "keep": [1, 2],
    }
    run(capsys, "rp_config", "set", "redis", "mail", '{"url": "redis://127.0.0.1:1/0"}')
    assert run(capsys, "rp_config", "list") == "logs/main\nredis/mail\n"
    assert json.loads(run(capsys, "rp_config", "list", "redis", "--json")) == [
        {"kind": "redis", "name": "mail"}
    ]
    deleted = json.loads(run(capsys, "rp_config", "delete", "logs", "main", "--json"))
    assert deleted == {"kind": "logs", "name": "main", "deleted": True}
    assert json.loads(run(capsys, "rp_config", "get", "logs", "main")) == {}
    failure = refused("rp_config", "delete", "logs", "main")
    assert failure.returncode == 1
    assert "there is no configuration logs/main" in str(failure)


def test_config_set_reads_the_value_from_stdin(redis_client, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{\n  "from": "stdin"\n}\n'))
    stored = json.loads(run(capsys, "rp_config", "set", "logs", "piped", "-", "--json"))
    assert stored == {"kind": "logs", "name": "piped", "value": {"from": "stdin"}}
    assert config.get_config("logs", "piped", wait=0) == {"from": "stdin"}


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["set", "logs", "main", "{level: info}"], "not valid JSON"),
        (["set", "logs", "main", "[1, 2]"], "must be a JSON object, not list"),
        (["set", "logs", "main", '"text"'], "must be a JSON object, not str"),
        (["set", "logs", "main", "   "], "enter a JSON object"),
        (["set", "logs", "main", '{"a": ' * 100_000 + "1" + "}" * 100_000], "nested too deeply"),
        (["set", "logs", "main", '{"a": NaN}'], "JSON"),
        (["set", "lo:gs", "main", "{}"], "configuration type"),
        (["set", "logs", "{main}", "{}"], "configuration name"),
        (["set", "redis", "mail", '{"colour": "blue"}'], "unknown redis-py client arguments"),
        (["set", "redis", "mail", '{"url": "http://x"}'], "must start with redis://"),
        (["set", "logs", "main"], "set, and only set, takes a JSON value"),
        (["get", "logs", "main", "{}"], "set, and only set, takes a JSON value"),
        (["get", "logs"], "needs a configuration type and a name"),
        (["delete"], "needs a configuration type and a name"),
        (["list", "logs", "main"], "list takes at most a configuration type"),
    ],
)
def test_config_with_bad_input_exits_2_with_the_reason_and_writes_nothing(
    redis_client, argv, reason
):
    failure = refused("rp_config", *argv)
    assert failure.returncode == 2, failure
    assert reason in str(failure)
    assert "\n" not in str(failure)
    assert redis_client.dbsize() == 0


def test_config_over_the_size_limit_exits_2(redis_client):
    with override_settings(REDISPARTS={"CONFIG_MAX_BYTES": 50}):
        failure = refused("rp_config", "set", "logs", "main", json.dumps({"a": "x" * 100}))
    assert failure.returncode == 2
    assert "CONFIG_MAX_BYTES" in str(failure)
    assert redis_client.dbsize() == 0


def test_config_and_maintenance_in_real_processes(redis_client, redis_url, tmp_path):
    """Through manage.py's own path: exit codes, stdout that parses, no traceback."""
    (tmp_path / "cli_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n"
        "CACHES = {'default': {'BACKEND': 'django_redis.cache.RedisCache', "
        f"'LOCATION': {redis_url!r}}}}}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cli_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }

    def manage(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "django", *argv],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    saved = manage("rp_config", "set", "logs", "main", '{"level": "warning"}', "--json")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["value"] == {"level": "warning"}
    bad = manage("rp_config", "set", "logs", "main", "{oops")
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[-1].startswith("CommandError: invalid configuration: not valid")
    assert "Traceback" not in bad.stderr
    assert bad.stdout == ""
    assert config.get_config("logs", "main", wait=0) == {"level": "warning"}
    on = manage("rp_maintenance", "on", "--message", "Upgrading", "--json")
    assert on.returncode == 0, on.stderr
    assert json.loads(on.stdout)["message"] == "Upgrading"
    assert config.maintenance_status(clock=lambda: float("inf")).message == "Upgrading"


# -- --json of the commands that report figures -----------------------------------------


def test_worker_json_counts_the_tasks_by_outcome(redis_client, capsys):
    record.enqueue_with(args=["a"], on_commit=False)
    record.enqueue_with(args=["b"], on_commit=False)
    fails_until_flag.enqueue_with(args=["c"], on_commit=False)
    report = json.loads(run(capsys, "rp_worker", "default", "--burst", "--json"))
    assert report == {
        "tasks": 3, "done": 2, "retry": 0, "fail": 1, "expired": 0, "cancelled": 0, "lost": 0
    }  # fmt: skip


def test_scheduler_json_reports_what_it_moved(redis_client, capsys):
    # A group of its own: a scheduler left running by an earlier test cannot move it first.
    queue = TaskQueue("ops-json")
    queue.enqueue(record.name, args=["later"], delay=0.001, on_commit=False)
    report = json.loads(run(capsys, "rp_scheduler", "--once", "--json", "--group", "ops-json"))
    assert report == {"moved": 1, "requeued": 0, "quarantined": 0, "fired": 0}
    assert queue.length("default") == 1


def test_counter_cleaner_json_holds_the_totals(redis_client, capsys):
    counters.update_counter("hits")
    report = json.loads(run(capsys, "rp_clean_counters", "--once", "--json"))
    assert report["passes"] == 1
    assert report["checked"] >= 1
    assert set(report) == {"passes", "checked", "trimmed", "forgotten"}


def test_autocomplete_json_is_one_object_for_several_actions(redis_client, capsys, tmp_path):
    names = tmp_path / "names.txt"
    names.write_text("Anna\nAnnie\nBob\n", encoding="utf-8")
    argv = ["rp_autocomplete", "knights", "--load", str(names), "--query", "ann", "--json"]
    report = json.loads(run(capsys, *argv, "--verbosity", "0"))
    assert report == {"loaded": 3, "new": 3, "completions": ["Anna", "Annie"]}


def test_embedded_start_and_stop_json(tmp_path, capsys):
    folder = str(tmp_path / "r")
    try:
        started = json.loads(run(capsys, "rp_embedded", "start", "--data-dir", folder, "--json"))
        assert started["started"] is True
        assert started["url"].startswith("unix://")
    finally:
        stopped = json.loads(run(capsys, "rp_embedded", "stop", "--data-dir", folder, "--json"))
    assert stopped["stopped"] is True


def test_registry_is_quiet_at_verbosity_0(redis_client, capsys):
    assert run(capsys, "rp_registry", "--verbosity", "0") == ""
    assert json.loads(run(capsys, "rp_registry", "--json", "--verbosity", "0"))["config"] == 0
