"""The benchmark harness's bookkeeping: machine state per table, kept runs, module timeouts."""

import json

from bench.harness import Section, describe_state, render
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
