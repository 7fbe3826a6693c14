"""make test-matrix: the app suite on every server with every client, and on every
Django x Python x redis-py pair the dependency ranges promise.

``suite`` runs on the Makefile's virtualenvs (.venv: Python 3.11, Django 5.2, redis-py
5.2.1; .venv-newest: Python 3.13, Django 6.1, redis-py 8.1), so nox only picks the
combination. ``versions`` builds a virtualenv per pair (constraints.txt with the pair's
Django and redis-py) and runs the suite without its slow tests there. One of them, or a
few tests of each: ``make test-matrix NOX_ARGS="-s suite -k 'valkey8 and resp2' -- -k lock"``.
"""

import nox

from redisparts_app.exceptions import ServerBinaryNotFound
from redisparts_app.testing.servers import (
    PROTOCOL_ENV,
    SERVER_CHOICE_ENV,
    SERVER_CHOICES,
    server_choice,
)

nox.options.default_venv_backend = "none"

CLIENTS = {
    # name: (virtualenv, protocol argument of every client; "" for none)
    "redispy5": (".venv", ""),  # RESP2
    "redispy8": (".venv-newest", ""),  # RESP3 with RESP2's reply shapes
    "redispy8-resp3": (".venv-newest", "3"),  # RESP3 with RESP3's reply shapes
    "redispy8-resp2": (".venv-newest", "2"),
}

# The releases pyproject.toml admits, lowest and newest of each line that a user can get.
DJANGOS = ["5.2.19", "6.0.10", "6.1.3"]
PYTHONS = ["3.11", "3.12", "3.13"]
REDIS_PYS = ["5.2.1", "8.1.0"]


@nox.session
@nox.parametrize("client", list(CLIENTS), ids=list(CLIENTS))
@nox.parametrize("server", list(SERVER_CHOICES), ids=list(SERVER_CHOICES))
def suite(session: nox.Session, server: str, client: str) -> None:
    """Run the app suite (tests/, not the demo's) on one server with one client."""
    try:
        server_choice(server)
    except ServerBinaryNotFound as exc:
        session.skip(f"not on this machine: {exc}")
    venv, protocol = CLIENTS[client]
    session.run(
        f"{venv}/bin/python", "-m", "pytest", "-p", "no:cacheprovider", *session.posargs,
        env={SERVER_CHOICE_ENV: server, PROTOCOL_ENV: protocol},
        external=True,
    )  # fmt: skip


@nox.session(python=PYTHONS, venv_backend="venv")
@nox.parametrize("redis_py", REDIS_PYS)
@nox.parametrize("django", DJANGOS)
def versions(session: nox.Session, django: str, redis_py: str) -> None:
    """Run the app suite without its slow tests on one Django, Python and redis-py."""
    if django >= "6" and session.python == "3.11":
        session.skip("Django 6 needs Python 3.12 or newer")
    pins = f"{session.create_tmp()}/constraints.txt"
    with open("constraints.txt") as pinned, open(pins, "w") as out:
        out.writelines(
            line for line in pinned if not line.lower().startswith(("django==", "redis=="))
        )
        out.write(f"django=={django}\nredis=={redis_py}\n")
    session.install("-c", pins, "-e", ".[dev]")
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-m", "not slow",
                *session.posargs)  # fmt: skip
