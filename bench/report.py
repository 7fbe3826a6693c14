"""Print the sections of a ``make bench`` JSON file as Markdown, or write them into the docs.

.venv/bin/python -m bench.report [var/bench/latest.json] [--only locks,semaphores] [--summary]
.venv/bin/python -m bench.report [var/bench/latest.json] --write-docs

``--write-docs`` replaces, in docs/benchmarks.md, each block between
``<!-- bench: NAME -->`` and ``<!-- /bench -->`` whose module the run holds (``summary``:
the table of targets and checks, from a run of every module); the prose around the blocks
is left as it is.
"""

import argparse
import json
import re
from pathlib import Path

from bench.harness import ROOT, Section, format_cell
from bench.run import benchmark_modules


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


BENCHMARKS_PAGE = ROOT / "docs/benchmarks.md"
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


def write_docs(report: dict, page: Path = BENCHMARKS_PAGE) -> list[str]:
    """Replace the page's blocks of the modules ``report`` holds; return their names."""
    run = f"Run of {machine_line(report)}."
    if report.get("quick"):
        run += " A quick run (QUICK=1): its figures are not meaningful."
    blocks = {}
    if set(report["modules"]) >= set(benchmark_modules()):  # the summary of a full run only
        blocks["summary"] = f"{run}\n\n{summary(report)}"
    for name, result in report["modules"].items():
        blocks[name] = f"{run}\n\n{module_markdown(name, result)}"
    written = []

    def fill(match: re.Match[str]) -> str:
        if match[2] not in blocks:
            return match[0]
        written.append(match[2])
        return f"{match[1]}{blocks[match[2]]}\n{match[3]}"

    page.write_text(BLOCK.sub(fill, page.read_text()))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=ROOT / "var/bench/latest.json")
    parser.add_argument("--only", default="", help="comma-separated module names")
    parser.add_argument("--summary", action="store_true", help="one table of targets and checks")
    parser.add_argument(
        "--write-docs", action="store_true", help=f"write the run into {BENCHMARKS_PAGE.name}"
    )
    options = parser.parse_args()
    report = json.loads(options.path.read_text())
    if options.write_docs:
        written = write_docs(report)
        print(f"{BENCHMARKS_PAGE}: wrote {', '.join(written) or 'nothing'}")
        return
    print(machine_line(report) + "\n")
    if options.summary:
        print(summary(report))
        return
    wanted = [name for name in options.only.split(",") if name]
    for name, result in report["modules"].items():
        if not wanted or name in wanted:
            print(module_markdown(name, result) + "\n")


if __name__ == "__main__":
    main()
