"""The benchmark harness's bookkeeping: machine state per table, kept runs, module timeouts."""

import json

from bench.harness import Section, describe_state, render
from bench.run import keep_run, module_timeout


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
