"""make test-matrix: the app suite on every server with every redis-py.

The virtualenvs are the Makefile's (.venv with redis-py 5.2.1, .venv-redis8 with 8.x),
so nox only runs the combinations. One of them, or a few tests of each:
``make test-matrix NOX_ARGS="-k 'valkey8 and resp2' -- -k lock"``.
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
    "redispy8": (".venv-redis8", ""),  # RESP3 with RESP2's reply shapes
    "redispy8-resp3": (".venv-redis8", "3"),  # RESP3 with RESP3's reply shapes
    "redispy8-resp2": (".venv-redis8", "2"),
}


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
