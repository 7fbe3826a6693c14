"""The benchmark harness: throwaway servers, paired measurements, tables and JSON.

A benchmark is a module ``bench/<name>.py`` with a top-level function::

    def run(ctx: Context) -> list[Section]: ...

``bench/run.py`` (``make bench``) finds every module of ``bench/`` that defines ``run``
and runs each in its own subprocess (``python -m bench.<name> --json FILE``), so one
failing benchmark is reported and the others still run. Each module also runs alone::

    .venv/bin/python -m bench.locks [--quick] [--repetitions 5] [--json out.json]

What ``ctx`` (a ``Context``) gives a benchmark:

- ``ctx.servers``: ``{"tcp": RedisServer, "unix": RedisServer}``, two redis-servers this
  process started (127.0.0.1 on a free port, and a unix socket), stopped when it ends;
  ``ctx.url(transport)`` their ``redis://`` / ``unix://`` URLs;
- ``ctx.client(transport="tcp")``: a new client on an emptied server (FLUSHALL first);
  ``ctx.flush()`` empties both servers;
- ``ctx.repetitions``: how many times each variant is measured (default 3);
- ``ctx.quick``: a smoke run (``--quick`` / ``make bench QUICK=1``): use short durations
  and small sizes; the figures only show that the code runs.
- ``ctx.client_python``: the Python of a virtualenv with another redis-py
  (``--client-python``; ``make bench``: redis-py 8's), for the benchmarks that measure
  the services on it beside this interpreter's (``bench/clients.py``), or None.

Measuring: ``alternate(variants, ctx.repetitions)`` calls each variant's function once
per round, in turn (A, B, C, A, B, C, ...), so slow phases of a shared machine hit every
variant alike. It returns a ``Samples`` holding every figure: ``median(label)``,
``spread(label)``, and ``ratio(a, b)``, the median of the per-round ratios a/b (a and b
measured side by side in the same round). ``rate(function, seconds)`` is calls per second
of a function; ``run_processes(target, args_list)`` runs a function in forked processes
and returns what each one returned, for contended benchmarks.

Reporting: a benchmark returns ``Section`` objects: a title, column names, rows (numbers
are formatted by the table printer), ``ratios`` (``Ratio``: a label, the measured value
and, when there is one, the target it must reach, met or missed), ``checks`` (``Check``:
an invariant that held or not, e.g. no lost update), ``notes`` (free text: what was
measured, what limits a figure) and ``machine``, the state the table was measured in,
stamped when the section is made: the load average and the median PING round trip to
the TCP server, so a table from a loaded machine says so. ``run.py`` prints each section
as a table and writes all of them, with the date and the machine's facts, to
``var/bench/latest.json`` and keeps a copy per run in ``var/bench/runs/``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TRANSPORTS = ("tcp", "unix")
DEFAULT_REPETITIONS = 3


def setup_django() -> None:
    """Configure minimal Django settings (key prefix ``bench``) so the services import."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(INSTALLED_APPS=[], REDISPARTS={"KEY_PREFIX": "bench"})
        django.setup()


# -- results ------------------------------------------------------------------------------


@dataclass
class Ratio:
    """A same-run ratio; with a ``target``, it must be at least (or, ``at_most``, at most) it."""

    label: str
    value: float
    target: float | None = None
    at_most: bool = False

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        if math.isnan(self.value):
            return False
        return self.value <= self.target if self.at_most else self.value >= self.target

    @property
    def figure(self) -> str:
        # A value just under its target would print as the target itself at two decimals.
        close_miss = self.met is False and round(self.value, 2) == self.target
        return f"{self.value:.{3 if close_miss else 2}f}x"

    def describe(self) -> str:
        text = f"{self.label}: {self.figure}"
        if self.target is not None:
            sign = "<=" if self.at_most else ">="
            text += f"  (target {sign} {self.target:g}x: {'met' if self.met else 'MISSED'})"
        return text


@dataclass
class Check:
    """An invariant checked during the run: ``ok`` or not, with what was seen."""

    label: str
    ok: bool
    detail: str = ""

    def describe(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.label}: {'ok' if self.ok else 'FAILED'}{detail}"


@dataclass
class Section:
    """One printed table of a benchmark, with its ratios, checks and notes.

    ``machine``: the state it was measured in (``machine_state()`` when made).
    """

    title: str
    columns: list[str]
    rows: list[list[Any]]
    ratios: list[Ratio] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.machine:
            self.machine = machine_state()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for ratio, stored in zip(self.ratios, data["ratios"], strict=True):
            stored["met"] = ratio.met
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Section:
        ratios = [
            Ratio(**{k: v for k, v in r.items() if k != "met"}) for r in data.get("ratios", [])
        ]
        checks = [Check(**c) for c in data.get("checks", [])]
        return cls(
            data["title"],
            data["columns"],
            data["rows"],
            ratios,
            checks,
            data.get("notes", []),
            data.get("machine") or {"unknown": True},
        )


_ping: Callable[[], float] | None = None  # set by ``execute``: PING round trip, µs


def machine_state() -> dict[str, Any]:
    """Return the load average now and, in a benchmark run, the median PING round trip
    (µs, of 20) to the run's TCP redis-server: what the figures measured next to it met."""
    state: dict[str, Any] = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    if _ping is not None:
        state["ping_us"] = round(_ping(), 1)
    return state


def describe_state(state: dict[str, Any]) -> str:
    """Return a section's machine state as text, e.g. 'load average 0.5, 0.4, 0.3; PING 41 µs'."""
    if "load_average" not in state:
        return "not recorded"
    text = "load average " + ", ".join(f"{x:g}" for x in state["load_average"])
    if "ping_us" in state:
        text += f"; PING {state['ping_us']:g} µs"
    return text


def format_cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render(section: Section) -> str:
    """Return the section as a plain-text table followed by its ratios, checks and notes."""
    cells = [[format_cell(value) for value in row] for row in section.rows]
    widths = [
        max([len(name)] + [len(row[index]) for row in cells if index < len(row)])
        for index, name in enumerate(section.columns)
    ]

    def line(values: Sequence[str]) -> str:
        first, *rest = values
        parts = [first.ljust(widths[0])] + [
            v.rjust(w) for v, w in zip(rest, widths[1:], strict=False)
        ]
        return "  ".join(parts).rstrip()

    out = [f"== {section.title}", line(section.columns), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    out += ["  " + ratio.describe() for ratio in section.ratios]
    out += ["  " + check.describe() for check in section.checks]
    out += ["  note: " + note for note in section.notes]
    out += ["  machine: " + describe_state(section.machine)]
    return "\n".join(out)


# -- measuring ----------------------------------------------------------------------------


class Samples:
    """Figures of several variants measured in alternating rounds (see ``alternate``)."""

    def __init__(self, rounds: list[dict[str, Any]]) -> None:
        self.rounds = rounds

    def values(self, label: str, key: str | None = None) -> list[float]:
        return [self._figure(row[label], key) for row in self.rounds]

    @staticmethod
    def _figure(value: Any, key: str | None) -> float:
        return value[key] if key is not None else value

    def median(self, label: str, key: str | None = None) -> float:
        return statistics.median(self.values(label, key))

    def spread(self, label: str, key: str | None = None) -> str:
        """Return 'min..max' of the rounds, to show the noise next to a median."""
        values = self.values(label, key)
        return f"{format_cell(float(min(values)))}..{format_cell(float(max(values)))}"

    def ratio(self, a: str, b: str, key: str | None = None) -> float:
        """Median over rounds of a/b, each round's a and b measured side by side."""
        pairs = [
            self._figure(row[a], key) / self._figure(row[b], key)
            for row in self.rounds
            if self._figure(row[b], key)
        ]
        return statistics.median(pairs) if pairs else math.nan

    def to_json(self) -> list[dict[str, Any]]:
        return self.rounds


def alternate(
    variants: dict[str, Callable[[], Any]], repetitions: int, *, warmup: bool = False
) -> Samples:
    """Measure each variant once per round, in turn, for ``repetitions`` rounds.

    A variant's function returns its figure (a number, or a dict of numbers). With
    ``warmup``, each variant runs once first and that figure is dropped.
    """
    if warmup:
        for function in variants.values():
            function()
    rounds = []
    for index in range(repetitions):
        # Alternate the order too, so no variant always follows the same one.
        order = list(variants.items())
        if index % 2:
            order.reverse()
        rounds.append({label: function() for label, function in order})
    return Samples(rounds)


def rate(function: Callable[[], Any], seconds: float, batch: int = 50) -> float:
    """Return calls per second of ``function`` over about ``seconds`` of wall time."""
    count = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(batch):
            function()
        count += batch
        now = time.perf_counter()
        if now >= end:
            return count / (now - start)


def append_line(path: str, line: str) -> None:
    """Append ``line`` to the file ``path`` in one write (O_APPEND): how a benchmark's
    tasks count their runs outside Redis, from several processes at once."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def serve_celery(app: Any) -> None:
    """Run a Celery worker of ``app`` in this process until it stops: the solo pool, quiet,
    as the benchmarks beside Celery run it."""
    import contextlib
    import logging
    import warnings

    logging.getLogger("celery").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="You're running the worker with superuser")
    worker = app.Worker(
        pool="solo",
        concurrency=1,
        loglevel="ERROR",
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        quiet=True,
    )
    with contextlib.suppress(SystemExit):
        worker.start()


def start_process(target: Callable[..., Any], *args: Any) -> Any:
    """Start ``target(*args)`` in a forked daemon process and return the process."""
    import multiprocessing

    process = multiprocessing.get_context("fork").Process(target=target, args=args, daemon=True)
    process.start()
    return process


def stop_process(process: Any, sig: int = signal.SIGTERM) -> None:
    """Stop a process of ``start_process`` with ``sig``; killed if still alive after 10 s."""
    if process.is_alive():
        os.kill(process.pid, sig)
    process.join(10)
    if process.is_alive():
        process.kill()
        process.join()


def run_processes(
    target: Callable[..., Any], args_list: Sequence[Sequence[Any]], timeout: float = 300.0
) -> list[Any]:
    """Run ``target(*args)`` in a forked process per entry; return the results in order.

    The test suite's helper: a child that fails or outlives ``timeout`` raises with its
    traceback. Children must open their own Redis connections.
    """
    from tests.processes import run_in_processes

    return run_in_processes(target, args_list, timeout)


# -- servers and context ------------------------------------------------------------------


class Context:
    """What a benchmark's ``run(ctx)`` gets; see the module docstring."""

    def __init__(
        self,
        servers: dict[str, Any],
        repetitions: int,
        quick: bool,
        client_python: str | None = None,
    ) -> None:
        self.servers = servers
        self.repetitions = repetitions
        self.quick = quick
        self.client_python = client_python

    def url(self, transport: str = "tcp") -> str:
        return self.servers[transport].url

    def flush(self) -> None:
        for server in self.servers.values():
            with server.client() as client:
                client.flushall()

    def client(self, transport: str = "tcp", **kwargs: Any):
        """Return a new redis-py client on an emptied server."""
        client = self.servers[transport].client(**kwargs)
        client.flushall()
        return client

    def seconds(self, full: float, quick: float = 0.3) -> float:
        """Return ``full`` seconds, or ``quick`` in a quick run."""
        return quick if self.quick else full


def start_servers(stack: ExitStack) -> dict[str, Any]:
    """Start a TCP and a unix-socket redis-server, stopped when ``stack`` closes."""
    from redisparts_app.testing import RedisServer

    servers = {}
    for transport in TRANSPORTS:
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="rp-bench-"))
        server = RedisServer(directory, unix_socket=transport == "unix")
        servers[transport] = stack.enter_context(server)
    return servers


def redis_benchmark_path() -> str | None:
    """Return the redis-benchmark found on PATH (Debian's redis-tools), or None."""
    return shutil.which("redis-benchmark")


def machine_facts() -> dict[str, Any]:
    """Return the date and the facts that figures depend on: CPU, cores, versions."""
    import redis

    from redisparts_app.embedded import find_redis_server, server_version

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    binary = find_redis_server()
    benchmark = redis_benchmark_path()
    benchmark_version = None
    if benchmark:
        out = subprocess.run([benchmark, "--version"], capture_output=True, text=True)
        benchmark_version = out.stdout.strip() or None
    try:
        import hiredis

        hiredis_version = hiredis.__version__
    except ImportError:
        hiredis_version = None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "redis_server": ".".join(map(str, server_version(binary))),
        "redis_server_binary": str(binary),
        "redis_py": redis.__version__,
        "hiredis": hiredis_version,
        "redis_benchmark": benchmark_version,
    }


def execute(
    run: Callable[[Context], list[Section]],
    repetitions: int,
    quick: bool,
    client_python: str | None = None,
):
    """Start the servers, call ``run(ctx)``, stop the servers; return the sections."""
    global _ping
    setup_django()
    with ExitStack() as stack:
        ctx = Context(start_servers(stack), repetitions, quick, client_python)
        probe = stack.enter_context(ctx.servers["tcp"].client())

        def ping() -> float:
            times = []
            for _ in range(20):
                started = time.perf_counter()
                probe.ping()
                times.append(time.perf_counter() - started)
            return 1e6 * statistics.median(times)

        _ping = ping
        try:
            return run(ctx)
        finally:
            _ping = None


def main(run: Callable[[Context], list[Section]], description: str = "") -> None:
    """Command line of one benchmark module: run it, print its tables, maybe write JSON."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--json", type=Path, help="write the sections to this JSON file")
    parser.add_argument(
        "--client-python", help="the Python of a virtualenv with another redis-py (ctx)"
    )
    options = parser.parse_args()
    repetitions = options.repetitions or (1 if options.quick else DEFAULT_REPETITIONS)
    sections = execute(run, repetitions, options.quick, options.client_python)
    for section in sections:
        print(render(section), flush=True)
        print(flush=True)
    if options.json:
        options.json.write_text(json.dumps([s.to_json() for s in sections], indent=1))
