"""Serve the demo as in production and put a bounded load on it (``make load``).

    .venv/bin/python -m bench.load [--users 20] [--duration 60] [--workers N]
        [--server asgi|wsgi] [--output var/load]

In a temporary folder it starts an embedded redis-server, migrates the database
(DATABASE_URL when set, else a throwaway SQLite), collects the static files, loads the
demo data and one account per simulated user, then serves the site as in production:
gunicorn with uvicorn workers (marketplace.asgi; ``--server wsgi``: gunicorn's sync
workers on marketplace.wsgi), production settings (debug off, whitenoise, manifest static
files), the task worker and the scheduler beside it. Loopback has no TLS, so the site runs
with DJANGO_HTTPS=0. locust (bench/load/locustfile.py) then runs headless on 127.0.0.1:
under ASGI each simulated user's open chat page holds its event stream, as a browser does,
and the time from sending a message to each member's receipt is measured; under WSGI the
page polls.

Writes to --output: report.md (requests/s, p50/p95/p99 latency, errors per request kind
and in all, status codes, CPU used), report.csv (the same figures), results.json (what
locust measured) and server.log (gunicorn, worker and scheduler output). Exit 1 on any
5xx response or when the run itself failed.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import psutil

from bench.harness import ROOT, machine_facts
from bench.load import scenario
from redisparts_app.testing import free_port

LOCUSTFILE = Path(__file__).resolve().parent / "locustfile.py"
START_TIMEOUT = 60.0


def production_env(folder: Path, database_url: str | None) -> dict[str, str]:
    """The environment of every process: production settings on the folder's servers."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "REDIS_", "REDISPARTS_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="marketplace.settings",
        DJANGO_DEBUG="0",
        DJANGO_HTTPS="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url or f"sqlite:///{folder / 'db.sqlite3'}",
        REDISPARTS_DATA_DIR=str(folder / "redis"),
        DJANGO_STATIC_ROOT=str(folder / "static"),
        DJANGO_EMAIL_FILE_PATH=str(folder / "outbox"),
        REDISPARTS_METRICS_TOKEN=secrets.token_urlsafe(32),
        PYTHONPATH=str(ROOT),
    )
    return env


def prepare(env: dict[str, str], users: int, stack: ExitStack) -> Path:
    """Start the embedded Redis and fill it and the database; return the pidfile."""
    os.environ.update(env)
    import django
    from django.core.management import call_command

    django.setup()
    from redisparts_app.embedded import EmbeddedRedis

    server = EmbeddedRedis.from_settings()
    server.start()
    stack.callback(server.stop)
    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    call_command("load_demo", verbosity=0)
    scenario.seed(users)
    return server.pidfile


def start(command: list[str], env: dict[str, str], log, stack: ExitStack) -> subprocess.Popen:
    """Start a server process; SIGTERM stops it when the stack closes."""
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=log)

    def stop() -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stack.callback(stop)
    return process


def wait_until_serving(url: str, process: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with {process.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - http://127.0.0.1
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"gunicorn did not answer {url} within {START_TIMEOUT:.0f}s; see {log_path}")


def count_sold_emails(outbox: Path, purchases: int, timeout: float = 30.0) -> int:
    """The e-mails the worker wrote, once it has one per purchase or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while True:
        # The file backend ends each message with a line of 79 dashes; files may hold several.
        sent = sum(
            path.read_bytes().count(b"\n" + b"-" * 79 + b"\n") for path in outbox.glob("*.log")
        )
        if sent >= purchases or time.monotonic() > deadline:
            return sent
        time.sleep(0.5)


def cpu_seconds(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each named group of processes."""
    used = {}
    for name, group in pids.items():
        total = 0.0
        for pid in group:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        used[name] = total
    return used


def children_cpu_seconds() -> float:
    """CPU seconds used by the children this process has waited for (locust)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# What gunicorn serves, by --server: the application and its worker class.
SERVERS = {
    "asgi": ["marketplace.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker"],
    "wsgi": ["marketplace.wsgi"],
}


def process_groups(gunicorn, worker, scheduler, redis_pidfile: Path) -> dict[str, list[int]]:
    """The pids whose CPU time the report shows: gunicorn's master and workers, and so on."""
    workers = [child.pid for child in psutil.Process(gunicorn.pid).children()]
    return {
        "gunicorn": [gunicorn.pid, *workers],
        "redis-server": [int(redis_pidfile.read_text())],
        "task worker and scheduler": [worker.pid, scheduler.pid],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20, help="simulated users (default 20)")
    parser.add_argument("--duration", type=int, default=60, help="seconds of load (default 60)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2 * os.cpu_count() + 1,
        help="gunicorn workers (default 2 x cores + 1)",
    )
    parser.add_argument(
        "--server",
        choices=sorted(SERVERS),
        default="asgi",
        help="asgi: uvicorn workers, chat pages on their event streams (the production "
        "profile, default); wsgi: sync workers, chat pages polling",
    )
    parser.add_argument("--output", type=Path, default=ROOT / "var" / "load")
    options = parser.parse_args()
    for name in ("users", "duration", "workers"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if importlib.util.find_spec("locust") is None:
        raise SystemExit("locust is not installed: run `make load`, which installs the load extra")
    options.output.mkdir(parents=True, exist_ok=True)
    try:
        results, machine = measure(options)
    except KeyboardInterrupt:
        raise SystemExit("interrupted; every server of the run was stopped") from None
    report = render_report(options, results, machine)
    (options.output / "report.md").write_text(report)
    write_csv(options.output / "report.csv", results)
    print(report)
    server_errors = sum(n for code, n in results["status_codes"].items() if int(code) >= 500)
    if server_errors:
        raise SystemExit(f"{server_errors} responses were 5xx; see {options.output}/server.log")
    if not results["total"]["requests"]:
        raise SystemExit("the run made no request")


def measure(options: argparse.Namespace) -> tuple[dict, dict]:
    """Serve the site, run locust; return what locust measured and what the machine did."""
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rp-load-")))
        env = production_env(folder, os.environ.get("DATABASE_URL"))
        print(f"preparing: redis, database, static files, demo data, {options.users} accounts")
        redis_pidfile = prepare(env, options.users, stack)
        log_path = options.output / "server.log"
        log = stack.enter_context(log_path.open("w"))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        manage = [sys.executable, str(ROOT / "manage.py")]
        # No control socket: it would go to the home folder, shared by every gunicorn there.
        gunicorn = start(
            [sys.executable, "-m", "gunicorn", *SERVERS[options.server],
             "--bind", f"127.0.0.1:{port}", "--workers", str(options.workers),
             "--no-control-socket"],
            env, log, stack,
        )  # fmt: skip
        worker = start([*manage, "rp_worker", "email", "default"], env, log, stack)
        scheduler = start([*manage, "rp_scheduler"], env, log, stack)
        wait_until_serving(f"{base}/", gunicorn, log_path)
        groups = process_groups(gunicorn, worker, scheduler, redis_pidfile)
        print(
            f"gunicorn ({options.server}) serves {base} with {options.workers} workers; "
            "locust starts"
        )
        results_path = options.output / "results.json"
        results_path.unlink(missing_ok=True)
        load_before = os.getloadavg()
        cpu_before = cpu_seconds(groups)
        locust_before = children_cpu_seconds()
        started = time.monotonic()
        locust = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
             "--users", str(options.users + 1), "--spawn-rate", str(scenario.SPAWN_RATE),
             "--run-time", f"{options.duration}s", "--stop-timeout", "10",
             "--host", base, "--only-summary"],
            env={**env, "LOAD_RESULTS": str(results_path), "LOAD_SERVER": options.server},
            cwd=ROOT,
            timeout=options.duration + 120,
        )  # fmt: skip
        elapsed = time.monotonic() - started
        cpu_after = cpu_seconds(groups)
        locust_cpu = children_cpu_seconds() - locust_before
        load_after = os.getloadavg()
        if not results_path.exists():
            raise SystemExit(f"locust exited with {locust.returncode} and wrote no results")
        results = json.loads(results_path.read_text())
        results["sold_emails"] = count_sold_emails(
            folder / "outbox", results["purchases"].get("bought", 0)
        )
    machine = {
        "seconds": elapsed,
        "cpu": {
            **{name: cpu_after[name] - cpu_before[name] for name in groups},
            "locust": locust_cpu,
        },
        "load_average": (load_before[0], load_after[0]),
    }
    return results, machine


# Requests every run must make; one missing means the scenario no longer fits the pages.
EXERCISED = ("POST /login/ (POST)", "POST /market/buy/", "POST /market/sell/",
             "POST /chat/[id]/send/", "GET /metrics", "GET /health/")  # fmt: skip
# And the chat page's own, by server: its event stream and each message's delivery
# through it, or its poll.
EXERCISED_CHAT = {
    "asgi": (f"GET {scenario.EVENTS}", f"SSE {scenario.DELIVERY}"),
    "wsgi": (f"GET {scenario.POLL}",),
}
WORKER_KINDS = {
    "asgi": "uvicorn workers (chat pages on their event streams)",
    "wsgi": "sync workers (chat pages polling)",
}
COLUMNS = ("requests", "requests_per_s", "p50_ms", "p95_ms", "p99_ms", "max_ms", "errors")


def write_csv(path: Path, results: dict) -> None:
    """One row per page and one for all of them (method "all")."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("method", "name", *COLUMNS))
        for row in [*results["pages"], {**results["total"], "method": "all", "name": ""}]:
            writer.writerow((row["method"], row["name"], *(row[column] for column in COLUMNS)))


def render_report(options: argparse.Namespace, results: dict, machine: dict) -> str:
    """The run's figures as Markdown."""
    facts = machine_facts()
    low, high = scenario.THINK_SECONDS
    elapsed = machine["seconds"]
    codes = {int(code): n for code, n in results["status_codes"].items()}
    server_errors = sum(n for code, n in codes.items() if code >= 500)
    lines = [
        "# Load test of the demo site",
        "",
        f"{facts['date']} · {facts['cpu']} · {facts['cores']} cores · 1-minute load average "
        f"{machine['load_average'][0]:.2f} before the run, {machine['load_average'][1]:.2f} after",
        "",
        f"{options.users} simulated users (one account each, {low}-{high} s between clicks, "
        f"{scenario.SPAWN_RATE} started per second) and a monitoring scraper (/metrics and "
        f"/health/ every {scenario.SCRAPE_SECONDS} s) for {options.duration} s on loopback; "
        f"gunicorn with {options.workers} {WORKER_KINDS[options.server]}, production settings, "
        "whitenoise; embedded redis-server; task worker and scheduler running.",
        "",
        "| request | requests | requests/s | p50 ms | p95 ms | p99 ms | max ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in [*results["pages"], {**results["total"], "method": "**all**", "name": ""}]:
        figures = " | ".join(str(row[column]) for column in COLUMNS)
        lines.append(f"| {row['method']} {row['name']} | {figures} |")
    lines += [
        "",
        "Status codes: " + ", ".join(f"{code}: {codes[code]}" for code in sorted(codes)),
        f"5xx responses: {server_errors}",
        "Purchases: "
        + (", ".join(f"{what}: {n}" for what, n in sorted(results["purchases"].items())) or "none"),
        f"Sold e-mails written by the task worker: {results['sold_emails']}",
        f"CPU used in the {elapsed:.0f} s of the run (of {facts['cores']} cores): "
        + ", ".join(
            f"{name} {seconds:.1f} s ({seconds / elapsed:.0%})"
            for name, seconds in machine["cpu"].items()
        ),
        "",
    ]
    made = {f"{row['method']} {row['name']}" for row in results["pages"] if row["requests"]}
    expected = (*EXERCISED, *EXERCISED_CHAT[options.server])
    if missing := [name for name in expected if name not in made]:
        lines += [f"Not exercised (the pages may have changed): {', '.join(missing)}", ""]
    if results["errors"]:
        lines += ["| errors | count |", "|---|---:|"]
        lines += [
            f"| {e['method']} {e['name']}: {e['error']} | {e['count']} |" for e in results["errors"]
        ]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
