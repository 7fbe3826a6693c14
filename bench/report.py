"""Print the sections of a ``make bench`` JSON file as Markdown, for the README.

.venv/bin/python -m bench.report [var/bench/latest.json] [--only locks,semaphores] [--summary]
"""

import argparse
import json
from pathlib import Path

from bench.harness import ROOT, Section, format_cell


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=ROOT / "var/bench/latest.json")
    parser.add_argument("--only", default="", help="comma-separated module names")
    parser.add_argument("--summary", action="store_true", help="one table of targets and checks")
    options = parser.parse_args()
    report = json.loads(options.path.read_text())
    machine = report["machine"]
    print(
        f"{machine['date']}: {machine['cpu']}, {machine['cores']} cores (load average "
        f"{', '.join(map(str, machine['load_average']))}), Python {machine['python']}, "
        f"redis-server {machine['redis_server']}, redis-py {machine['redis_py']}, "
        f"hiredis {machine['hiredis']}, {machine['redis_benchmark'] or 'no redis-benchmark'}\n"
    )
    if options.summary:
        print(summary(report))
        return
    wanted = [name for name in options.only.split(",") if name]
    for name, result in report["modules"].items():
        if wanted and name not in wanted:
            continue
        if result["error"]:
            print(f"{name}: FAILED\n")
        for data in result["sections"]:
            print(markdown(Section.from_json(data)) + "\n")


if __name__ == "__main__":
    main()
