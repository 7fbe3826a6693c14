"""Print the benchmarks as Markdown over the kept runs, or one run; or write them into the docs.

.venv/bin/python -m bench.report [--only locks,semaphores] [--summary] [--write-docs]
.venv/bin/python -m bench.report var/bench/latest.json [...]

Without a path: every run ``make bench`` kept in var/bench/runs/ (full-length runs only).
Each ratio is shown as its median over the runs that measured it and its spread
(lowest..highest) — never the best run alone — beside its target, then the latest run's
tables, each with the machine state it was measured in (load average, PING round trip).
With a path: that one run, as it was measured (no kept run: var/bench/latest.json).

``--write-docs`` replaces, in docs/benchmarks.md and docs/benchmark-tables.md, each block between
``<!-- bench: NAME -->`` and ``<!-- /bench -->`` whose module the runs hold (``summary``:
the table of targets and checks, when the runs cover every module: a module run again
alone after a change counts beside the others of the last full run); the prose around
the blocks is left as it is.
"""

import argparse
import json
import math
import re
import statistics
from pathlib import Path

from bench.harness import ROOT, Ratio, Section, describe_state, format_cell
from bench.run import RUNS, benchmark_modules


def markdown(section: Section) -> str:
    """Return one section as a Markdown table, its ratios, checks and notes as a list."""
    lines = [f"**{section.title}**", ""]
    lines.append("| " + " | ".join(section.columns) + " |")
    lines.append(
        "|" + "|".join("---" if i == 0 else "--:" for i in range(len(section.columns))) + "|"
    )
    for row in section.rows:
        lines.append("| " + " | ".join(format_cell(value) for value in row) + " |")
    lines.append("")
    lines += [f"- {item.describe()}" for item in [*section.ratios, *section.checks]]
    lines += [f"- {note}" for note in section.notes]
    lines.append(f"- machine state: {describe_state(section.machine)}")
    return "\n".join(lines)


def summary(report: dict) -> str:
    """Return one Markdown table of every target and check of a run."""
    lines = ["| benchmark | ratio or check | figure | target | result |", "|---|---|--:|--:|---|"]
    for name, result in report["modules"].items():
        if result["error"]:
            lines.append(f"| {name} | the module | | | FAILED |")
        for data in result["sections"]:
            section = Section.from_json(data)
            for ratio in section.ratios:
                if ratio.target is not None:
                    target = f"{'<=' if ratio.at_most else '>='} {ratio.target:g}x"
                    outcome = "met" if ratio.met else "MISSED"
                    lines.append(
                        f"| {name} | {ratio.label} | {ratio.figure} | {target} | {outcome} |"
                    )
            for check in section.checks:
                outcome = "ok" if check.ok else "FAILED"
                lines.append(f"| {name} | {check.label} | {check.detail} | | {outcome} |")
    return "\n".join(lines)


# -- over the kept runs -------------------------------------------------------------------


def load_runs(directory: Path = RUNS) -> list[dict]:
    """Return the runs kept in ``directory``, oldest first."""
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]


def _measured(runs: list[dict], name: str) -> list[dict]:
    """The runs that measured module ``name`` without failing."""
    return [r for r in runs if name in r["modules"] and not r["modules"][name]["error"]]


def ratio_series(runs: list[dict], name: str) -> list[tuple[str, Ratio, list[float]]]:
    """Return each ratio of module ``name``: (section title, the latest Ratio, its values
    over the runs and their repeats), in the latest run's order. A ratio is the same one
    in two runs when it has the same label in the section at the same place."""
    found: dict[tuple[int, str], list[float]] = {}
    for run in _measured(runs, name):
        for result in measurements(run["modules"][name]):
            for index, data in enumerate(result["sections"]):
                for ratio in data.get("ratios", []):
                    found.setdefault((index, ratio["label"]), []).append(ratio["value"])
    latest = _measured(runs, name)[-1]["modules"][name]["sections"] if found else []
    series = []
    for index, data in enumerate(latest):
        section = Section.from_json(data)
        for ratio in section.ratios:
            series.append((section.title, ratio, found[(index, ratio.label)]))
    return series


def measurements(result: dict) -> list[dict]:
    """A module's result and the repeats bench.run made of it, those that did not fail:
    each is one measurement of its ratios."""
    return [result, *(r for r in result.get("repeats", []) if not r["error"])]


def _spread(values: list[float]) -> str:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "n/a"
    return f"{min(finite):.2f}..{max(finite):.2f}"


def _median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _target(ratio: Ratio) -> str:
    return "" if ratio.target is None else f"{'<=' if ratio.at_most else '>='} {ratio.target:g}x"


def spread_markdown(runs: list[dict], name: str) -> str:
    """Return module ``name`` over the runs: each ratio's median and spread, each run's
    machine state, then the latest run's tables."""
    measured = _measured(runs, name)
    if not measured:
        return f"{name}: no run measured it"
    dates = [r["machine"]["date"] for r in measured]
    lines = [
        f"{len(measured)} run(s), {dates[0]} to {dates[-1]}: each ratio's median over the runs"
        " (a module with a ratio within 5% of its target was run again in the same run, and"
        " each repeat counts) and its spread (lowest..highest); a target counts as met when"
        " the median meets it.",
        "",
        "| ratio | median | spread | runs | target | result (median) |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for _title, ratio, values in ratio_series(runs, name):
        median = Ratio(ratio.label, _median(values), ratio.target, ratio.at_most)
        outcome = "" if median.met is None else ("met" if median.met else "MISSED")
        lines.append(
            f"| {ratio.label} | {median.figure} | {_spread(values)} | {len(values)} "
            f"| {_target(ratio)} | {outcome} |"
        )
    lines += ["", "Machine state of each run's tables (load average; PING round trip):", ""]
    for run in measured:
        states = "; ".join(
            describe_state(Section.from_json(data).machine)
            for data in run["modules"][name]["sections"]
        )
        lines.append(f"- {run['machine']['date']}: {states}")
    latest = measured[-1]
    lines += ["", f"The latest run, {machine_line(latest)}:", ""]
    lines.append(module_markdown(name, latest["modules"][name]))
    return "\n".join(lines)


def covered(runs: list[dict]) -> list[str]:
    """The modules the runs measured, in bench/'s order: a module measured again alone
    after a change stands beside the others of the last full run."""
    names = {name for run in runs for name in run["modules"]}
    return [name for name in benchmark_modules() if name in names]


def spread_summary(runs: list[dict]) -> str:
    """Return one Markdown table of every target (median and spread over the runs) and
    every check (in how many runs it held)."""
    lines = [
        "| benchmark | ratio or check | median | spread | runs | target | result |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for name in covered(runs):
        measured = _measured(runs, name)
        if not measured:
            lines.append(f"| {name} | the module | | | | | FAILED |")
            continue
        for _title, ratio, values in ratio_series(runs, name):
            if ratio.target is None:
                continue
            median = Ratio(ratio.label, _median(values), ratio.target, ratio.at_most)
            lines.append(
                f"| {name} | {ratio.label} | {median.figure} | {_spread(values)} | {len(values)}"
                f" | {_target(ratio)} | {'met' if median.met else 'MISSED'} |"
            )
        held: dict[str, list[bool]] = {}
        for run in measured:
            for data in run["modules"][name]["sections"]:
                for check in data.get("checks", []):
                    held.setdefault(check["label"], []).append(check["ok"])
        for label, oks in held.items():
            result = "ok" if all(oks) else "FAILED"
            lines.append(f"| {name} | {label} | | held in {sum(oks)} of {len(oks)} | "
                         f"{len(oks)} | | {result} |")  # fmt: skip
    return "\n".join(lines)


BENCHMARKS_PAGE = ROOT / "docs/benchmarks.md"
# The latest tables of every module, a page of their own (the summary stays on the first).
TABLES_PAGE = ROOT / "docs/benchmark-tables.md"
BLOCK = re.compile(r"(<!-- bench: (\w+) -->\n).*?(<!-- /bench -->)", re.S)


def machine_line(report: dict) -> str:
    """Return the run's date and the facts its figures depend on, as one sentence."""
    machine = report["machine"]
    return (
        f"{machine['date']}: {machine['cpu']}, {machine['cores']} cores (load average "
        f"{', '.join(map(str, machine['load_average']))}), Python {machine['python']}, "
        f"redis-server {machine['redis_server']}, redis-py {machine['redis_py']}, "
        f"hiredis {machine['hiredis']}, {machine['redis_benchmark'] or 'no redis-benchmark'}"
    )


def module_markdown(name: str, result: dict) -> str:
    """Return every section of one module's result, or the failure if it failed."""
    if result["error"]:
        return f"{name}: FAILED"
    return "\n\n".join(markdown(Section.from_json(data)) for data in result["sections"])


def write_docs(report: dict, page: Path | None = None, runs: list[dict] | None = None) -> list[str]:
    """Replace the blocks of the modules ``report`` holds in ``page`` (default: the
    benchmarks page and the tables page); return their names.

    With ``runs`` (the kept runs, ``report`` the latest of them), the blocks of every
    module the runs measured, each with the ratios' medians and spreads over the runs
    before the latest tables; the summary when the runs cover every module.
    """
    run = f"Run of {machine_line(report)}."
    if report.get("quick"):
        run += " A quick run (QUICK=1): its figures are not meaningful."
    blocks = {}
    measured = covered(runs) if runs else list(report["modules"])
    if set(measured) >= set(benchmark_modules()):  # the summary of every module only
        table = spread_summary(runs) if runs else summary(report)
        blocks["summary"] = f"{run}\n\n{table}" if not runs else table
    for name in measured:
        if runs:
            blocks[name] = spread_markdown(runs, name)
        else:
            blocks[name] = f"{run}\n\n{module_markdown(name, report['modules'][name])}"
    written = []

    def fill(match: re.Match[str]) -> str:
        if match[2] not in blocks:
            return match[0]
        written.append(match[2])
        return f"{match[1]}{blocks[match[2]]}\n{match[3]}"

    for each in [page] if page else [BENCHMARKS_PAGE, TABLES_PAGE]:
        each.write_text(BLOCK.sub(fill, each.read_text()))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "path", nargs="?", type=Path, help="one run's JSON (default: the kept runs)"
    )
    parser.add_argument("--only", default="", help="comma-separated module names")
    parser.add_argument("--summary", action="store_true", help="one table of targets and checks")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help=f"write the runs into {BENCHMARKS_PAGE.name} and {TABLES_PAGE.name}",
    )
    options = parser.parse_args()
    runs = [] if options.path else load_runs()
    if options.path is None and not runs:
        options.path = ROOT / "var/bench/latest.json"
        print(f"no run kept in {RUNS}: {options.path} alone\n")
    report = runs[-1] if runs else json.loads(options.path.read_text())
    if options.write_docs:
        written = write_docs(report, runs=runs or None)
        print(f"{BENCHMARKS_PAGE}: wrote {', '.join(written) or 'nothing'}")
        return
    if options.summary:
        print(spread_summary(runs) if runs else machine_line(report) + "\n\n" + summary(report))
        return
    if not runs:
        print(machine_line(report) + "\n")
    wanted = [name for name in options.only.split(",") if name]
    for name, result in report["modules"].items():
        if not wanted or name in wanted:
            text = spread_markdown(runs, name) if runs else module_markdown(name, result)
            print(f"## {name}\n\n{text}\n")


if __name__ == "__main__":
    main()
