"""Run every benchmark of bench/ (``make bench``), print its tables and write the JSON.

Each module ``bench/<name>.py`` that defines ``run(ctx)`` (see bench/harness.py) runs in
its own subprocess with its own throwaway redis-servers, so a failure or a hang is
reported and the others still run::

    .venv/bin/python -m bench.run [--only locks,semaphores] [--quick] [--repetitions N]
        [--repeat-close 2] [--output var/bench/latest.json] [--timeout 300]
        [--client-python .venv-bench-redis8/bin/python]

Writes the date, the machine's facts and every section (figures, ratios met or missed,
checks, notes, the machine state of each table) of every module to ``--output``, and
keeps a copy of every full-length run in ``--runs`` (``<date>-<time>-<µs>.json``; quick runs
are not kept), from which ``python -m bench.report`` gives each ratio's median and
spread over the runs. A module with a ratio that lands within 5% of its target, on
either side, runs again (``--repeat-close`` times, 2 by default; not in quick runs), so
that the verdict on that target rests on a median and a spread, not one draw: the
repeats are kept in the run beside the first measurement (``repeats``) and count as
runs of their own in ``bench.report``. Exits 1 when a module failed or a check (an
invariant) failed; a missed ratio target is reported, not an error.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import (
    ROOT,
    Section,
    machine_facts,
    redis_benchmark_path,
    setup_django,
)

BENCH = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"__init__", "harness", "run"}


def module_timeout(name: str, default: float) -> float:
    """Return the module's ``TIMEOUT = <seconds>`` when it sets a longer one, else ``default``."""
    tree = ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TIMEOUT" for t in node.targets
        ):
            return max(default, float(ast.literal_eval(node.value)))
    return default


def benchmark_modules() -> list[str]:
    """Return the names of the modules of bench/ with a top-level ``run`` function."""
    found = []
    for path in sorted(BENCH.glob("*.py")):
        if path.stem in NOT_BENCHMARKS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.FunctionDef) and node.name == "run" for node in tree.body):
            found.append(path.stem)
    return found


def run_module(name: str, options: argparse.Namespace) -> dict:
    """Run ``bench.<name>`` in a subprocess; return its status, duration and sections."""
    with tempfile.TemporaryDirectory(prefix="rp-bench-") as directory:
        output = Path(directory) / "sections.json"
        command = [sys.executable, "-m", f"bench.{name}", "--json", str(output)]
        if options.quick:
            command.append("--quick")
        if options.repetitions:
            command += ["--repetitions", str(options.repetitions)]
        if options.client_python:
            command += ["--client-python", options.client_python]
        started = time.monotonic()
        timeout = module_timeout(name, options.timeout)
        try:
            # The module prints its own tables; only its errors are captured.
            done = subprocess.run(
                command, cwd=ROOT, stderr=subprocess.PIPE, text=True, timeout=timeout
            )
            error = None if done.returncode == 0 else _tail(done.stderr)
        except subprocess.TimeoutExpired as exc:
            error = f"timed out after {timeout:g} s\n{_tail(exc.stderr)}"
        seconds = round(time.monotonic() - started, 1)
        sections = json.loads(output.read_text()) if output.exists() and not error else []
    return {"status": "failed" if error else "ok", "seconds": seconds, "error": error,
            "sections": sections}  # fmt: skip


def _tail(text: str | bytes | None, lines: int = 25) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-lines:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated module names (e.g. locks)")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument(
        "--repeat-close",
        type=int,
        default=2,
        help="runs more of a module with a ratio within 5%% of its target (default 2)",
    )
    parser.add_argument("--output", type=Path, default=ROOT / "var" / "bench" / "latest.json")
    parser.add_argument(
        "--runs", type=Path, default=RUNS, help="directory keeping every full-length run"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per module (or its TIMEOUT)"
    )
    parser.add_argument(
        "--client-python",
        help="the Python of a virtualenv with another redis-py, measured beside this one's "
        "by bench/clients.py (make bench: redis-py 8's)",
    )
    options = parser.parse_args()

    modules = benchmark_modules()
    wanted = [name for name in options.only.replace(" ", ",").split(",") if name]
    unknown = sorted(set(wanted) - set(modules))
    if unknown:
        sys.exit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(modules)}")
    if wanted:
        modules = [name for name in modules if name in wanted]

    setup_django()
    facts = machine_facts()
    print(
        f"{facts['date']}  {facts['cpu']}, {facts['cores']} cores, Python {facts['python']}, "
        f"redis-server {facts['redis_server']}, redis-py {facts['redis_py']}"
    )
    if redis_benchmark_path() is None:
        print(
            "redis-benchmark NOT FOUND on PATH (Debian: apt install redis-tools): "
            "its columns are skipped; everything else runs."
        )
    print(f"benchmarks: {', '.join(modules)}\n", flush=True)

    results = {}
    for name in modules:
        print(f"## {name}", flush=True)
        result = run_module(name, options)
        results[name] = result
        if result["error"]:
            print(f"!! {name} FAILED after {result['seconds']} s:\n{result['error']}\n", flush=True)
        else:
            print(f"({name}: {result['seconds']} s)\n", flush=True)

    for name in [] if options.quick else close_to_target(results):
        for repeat in range(1, options.repeat_close + 1):
            print(f"## {name}, again ({repeat} of {options.repeat_close}): a ratio is close "
                  "to its target", flush=True)  # fmt: skip
            result = run_module(name, options)
            results[name].setdefault("repeats", []).append(result)
            print(f"({name}: {result['error'] or str(result['seconds']) + ' s'})\n", flush=True)

    report = {
        "machine": facts,
        "quick": options.quick,
        "repetitions": options.repetitions,
        "modules": results,
    }
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(summary(results))
    print(f"\nwrote {options.output}")
    if not options.quick:
        kept = keep_run(report, options.runs)
        print(f"kept {kept}; python -m bench.report: medians and spreads over the kept runs")
    failed_checks = any(
        not check["ok"]
        for result in results.values()
        for section in result["sections"]
        for check in section.get("checks", [])
    )
    if failed_checks or any(result["error"] for result in results.values()):
        sys.exit(1)


RUNS = ROOT / "var" / "bench" / "runs"
# A ratio this close to its target (a share of the target, either side) is measured again.
CLOSE = 0.05


def close_to_target(results: dict) -> list[str]:
    """The modules of ``results`` with a ratio within CLOSE of its target, either side."""
    close = []
    for name, result in results.items():
        for section in result["sections"]:
            if any(
                ratio["target"] and abs(ratio["value"] / ratio["target"] - 1) <= CLOSE
                for ratio in section.get("ratios", [])
            ):
                close.append(name)
                break
    return close


def keep_run(report: dict, directory: Path) -> Path:
    """Write ``report`` to ``directory``/<date>-<time>.json (a new name that sorts after the
    earlier runs'); return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
        path = directory / f"{stamp}.json"
        if not path.exists():
            path.write_text(json.dumps(report, indent=1, ensure_ascii=False))
            return path


def summary(results: dict) -> str:
    """Return every target and check of the run, one line each, for a final look."""
    lines = ["== summary: targets and checks"]
    for name, result in results.items():
        if result["error"]:
            lines.append(f"{name}: FAILED")
            continue
        for data in result["sections"]:
            section = Section.from_json(data)
            for item in [r for r in section.ratios if r.target is not None] + section.checks:
                lines.append(f"{name}: {item.describe()}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
