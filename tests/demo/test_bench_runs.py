"""The benchmark harness's bookkeeping (machine state per table, kept runs, module timeouts)
and the clients benchmark's quick run."""

import argparse
import json
import subprocess
import sys

import pytest

from bench.harness import Context, Section, describe_state, execute, render
from bench.report import covered, ratio_series, spread_summary
from bench.run import close_to_target, keep_run, module_timeout


def test_a_section_records_the_machine_state_it_was_made_in():
    section = Section("a table", ["x"], [[1]])
    assert len(section.machine["load_average"]) == 3
    assert "ping_us" not in section.machine  # outside a benchmark run no server to PING
    assert render(section).endswith("machine: " + describe_state(section.machine))
    assert describe_state({"load_average": [1.5, 2, 0.25], "ping_us": 41.2}) == (
        "load average 1.5, 2, 0.25; PING 41.2 µs"
    )
    # A section read back from a run made before states were recorded says so.
    old = Section.from_json({"title": "t", "columns": ["x"], "rows": [[1]]})
    assert describe_state(old.machine) == "not recorded"
    assert Section.from_json(section.to_json()).machine == section.machine


def test_every_kept_run_gets_a_file_of_its_own(tmp_path):
    first = keep_run({"run": 1}, tmp_path / "runs")
    second = keep_run({"run": 2}, tmp_path / "runs")
    assert first != second
    assert [json.loads(p.read_text())["run"] for p in (first, second)] == [1, 2]
    assert sorted(tmp_path.joinpath("runs").iterdir()) == [first, second]


def test_a_module_may_ask_for_a_longer_timeout_than_the_default():
    assert module_timeout("market", 300.0) == 2400.0  # 10 s runs: TIMEOUT in bench/market.py
    assert module_timeout("locks", 300.0) == 300.0
    assert module_timeout("market", 5000.0) == 5000.0  # never shorter than asked


def _result(*ratios, error=None):
    """A module's result as bench.run records it: one section with these (value, target)."""
    section = {"title": "t", "columns": ["x"], "rows": [[1]]}
    section["ratios"] = [
        {"label": f"r{i}", "value": value, "target": target, "at_most": False}
        for i, (value, target) in enumerate(ratios)
    ]
    return {"status": "ok", "seconds": 1.0, "error": error, "sections": [section]}


def test_a_module_with_a_ratio_near_its_target_is_picked_to_run_again():
    results = {
        "far": _result((0.5, 1.0), (2.0, 1.0), (3.0, None)),
        "just_under": _result((0.96, 1.0)),
        "just_over": _result((2.0, 1.0), (1.45, 1.4)),
        "failed": {"status": "failed", "seconds": 1.0, "error": "boom", "sections": []},
    }
    assert close_to_target(results) == ["just_under", "just_over"]


def test_the_repeats_of_a_run_count_in_the_median_and_the_spread():
    first = _result((0.96, 1.0))
    first["repeats"] = [_result((1.02, 1.0)), _result((1.01, 1.0)), _result(error="timed out")]
    runs = [{"machine": {"date": "d"}, "modules": {"chat": first}}]
    [(_title, _ratio, values)] = ratio_series(runs, "chat")
    assert values == [0.96, 1.02, 1.01]  # the failed repeat is no measurement
    assert "| r0 | 1.01x | 0.96..1.02 | 3 | >= 1x | met |" in spread_summary(runs)


def test_a_module_run_again_alone_stands_beside_the_others_of_the_full_run():
    full = {
        "machine": {"date": "d1"},
        "modules": {"locks": _result((0.8, 0.9)), "chat": _result((2.1, 2.0))},
    }
    again = {"machine": {"date": "d2"}, "modules": {"locks": _result((0.95, 0.9))}}
    runs = [full, again]
    assert covered(runs) == ["chat", "locks"]  # bench/'s order
    table = spread_summary(runs)
    assert "| chat | r0 | 2.10x | 2.10..2.10 | 1 | >= 2x | met |" in table
    assert "| locks | r0 | 0.88x | 0.80..0.95 | 2 | >= 0.9x | MISSED |" in table


@pytest.mark.slow
def test_the_clients_benchmark_measures_every_case_of_every_variant():
    """A quick bench/clients.py run with this interpreter on both sides: three workers,
    every case measured, the protocol=2 variant checked to speak RESP2."""
    from bench import clients

    cpu_sync, cpu_async, wall_sync, wall_async = execute(clients.run, 1, True, sys.executable)
    assert [row[0] for row in cpu_sync.rows + cpu_async.rows] == [c[0] for c in clients.CASES]
    assert [row[0] for row in wall_sync.rows + wall_async.rows] == [c[0] for c in clients.CASES]
    for section in (cpu_sync, cpu_async, wall_sync, wall_async):
        assert all(figure > 0 for row in section.rows for figure in row[2:5])
        assert all(ratio.value > 0 for ratio in section.ratios)
    # Three ratios per case in the CPU tables, and the medians of each table's cases.
    assert len(cpu_sync.ratios) == 3 * len(cpu_sync.rows) + 3
    assert len(wall_async.ratios) == 3
    [check] = cpu_sync.checks
    assert check.ok, check.detail


def test_the_clients_benchmark_says_when_it_has_nothing_to_compare():
    from bench import clients

    [section] = clients.run(Context({}, 1, True))
    assert section.rows == []
    assert "--client-python" in section.notes[0]


def test_bench_run_hands_the_other_interpreter_to_every_module(monkeypatch, tmp_path):
    from bench import run

    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, stderr="")

    monkeypatch.setattr(run.subprocess, "run", fake_run)
    options = argparse.Namespace(
        quick=True, repetitions=None, timeout=10.0, client_python="/venv8/bin/python"
    )
    run.run_module("chat", options)
    assert commands[0][-2:] == ["--client-python", "/venv8/bin/python"]
