"""The demo's upkeep as periodic schedules: the counter cleaner, the registry prune and a
nightly backup are declared by marketplace/tasks.py and each does its work when run."""

import dataclasses
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from marketplace import tasks  # noqa: F401  (declares the schedules)
from redisparts_app.services import counters, registry
from redisparts_app.services.tasks import TaskQueue, Worker
from redisparts_app.services.tasks import schedules as periodic


def test_demo_declares_its_upkeep_schedules(capsys):
    call_command("rp_schedule", "list", "--json")
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["clean-counters"]["timing"]["every"] == 60
    assert rows["prune-registries"]["timing"]["every"] == 300
    assert rows["nightly-backup"]["timing"] == {
        "cron": "30 2 * * *", "every": None, "tz": settings.TIME_ZONE,
    }  # fmt: skip
    assert all(len(row["next"]) == 5 for row in rows.values())


@pytest.mark.django_db
def test_each_upkeep_schedule_does_its_work_when_run(redis_client, tmp_path, monkeypatch):
    counters.update_counter("hits", clock=lambda: 1.0)  # samples long past the kept ones
    registry.note("lock", "gone-lock")  # a name whose lock no longer exists
    redis_client.zadd(registry.registry_key("lock"), {"gone-lock": 0})  # noted long ago
    backups = tmp_path / "backups"
    schedule = periodic.get_schedule("nightly-backup")
    monkeypatch.setitem(
        periodic._schedules, schedule.name, dataclasses.replace(schedule, args=(str(backups),))
    )
    for name in ("clean-counters", "prune-registries", "nightly-backup"):
        periodic.run_now(name)
    Worker(["default"]).run(burst=True)
    runs = {name: periodic.state(name).run for name in periodic.schedule_names()}
    assert {runs[n]["outcome"] for n in ("clean-counters", "prune-registries")} == {"done"}
    assert runs["nightly-backup"]["outcome"] == "done", TaskQueue().failed()
    assert list(Path(backups).glob("dump-*.rdb"))
    assert "gone-lock" not in registry.names("lock")
    assert counters.get_counter("hits", 1) == []  # trimmed, then forgotten
