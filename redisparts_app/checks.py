"""System checks: settings, reachability and version of each Redis connection.

Import: ``from redisparts_app.checks import check_settings, check_servers``.

Ids: E001 unknown or malformed settings, E002 bad KEY_PREFIX, E003 bad
connection entry, E004 server too old, E005 bad EMBEDDED entry, E006 TLS
refused (the server's certificate not trusted, or ours refused), E007 login
refused (user or password); W001 server unreachable (a warning, so the site can
still start and answer its 503 page).
"""

import re
import ssl
import threading
from typing import Any, NamedTuple

import redis
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from .conf import DEFAULTS, app_settings
from .connection import config_problems, get_redis, is_cluster
from .keys import validate_key_part

__all__ = [
    "Probe",
    "check_servers",
    "check_settings",
    "probe",
    "version_error",
]

MIN_SERVER_VERSION = (6, 2, 0)
TAG = "redisparts"
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-]+)*$")


@register(TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report unknown keys and malformed values in REDISPARTS."""
    raw = getattr(settings, "REDISPARTS", {})
    if not isinstance(raw, dict):
        return [
            Error("REDISPARTS must be a dict.", hint="See conf.DEFAULTS.", id="redisparts.E001")
        ]
    errors: list[CheckMessage] = []
    for name in sorted(set(raw) - set(DEFAULTS)):
        errors.append(
            Error(
                f"Unknown REDISPARTS setting {name!r}.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="redisparts.E001",
            )
        )
    for name in ("MAX_KEY_PART_LENGTH", "CHECK_TIMEOUT", "LOCK_TTL", "LOCK_TIMEOUT"):
        value = getattr(app_settings, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            errors.append(
                Error(
                    f"REDISPARTS[{name!r}] must be a positive number, got {value!r}.",
                    id="redisparts.E001",
                )
            )
    errors.extend(_queue_errors())
    errors.extend(_monitoring_errors())
    prefix = app_settings.KEY_PREFIX
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        errors.append(
            Error(
                f"REDISPARTS['KEY_PREFIX'] = {prefix!r} is not a valid key prefix.",
                hint="Use letters, digits, '_', '-', '.' and ':' between words; "
                "no braces, glob characters or spaces.",
                id="redisparts.E002",
            )
        )
    errors.extend(_connection_errors())
    errors.extend(_embedded_errors())
    return errors


@register(TAG)
def check_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Ping every configured connection and check its server version."""
    connections = app_settings.CONNECTIONS
    if not isinstance(connections, dict):
        return []
    messages: list[CheckMessage] = []
    for alias, config in connections.items():
        if config_problems(config):
            continue  # already reported by check_settings
        version, error, kind = probe(alias, float(app_settings.CHECK_TIMEOUT))
        if kind in _REFUSALS:
            text, hint, check_id = _REFUSALS[kind]
            messages.append(
                Error(f"Redis connection {alias!r}: {text}: {error}", hint=hint, id=check_id)
            )
        elif error is not None:
            messages.append(
                Warning(
                    f"Redis connection {alias!r} is unreachable: {error}",
                    hint="Start the server (python manage.py rp_embedded start for the "
                    "embedded one) or fix REDISPARTS['CONNECTIONS'] / REDIS_URL.",
                    id="redisparts.W001",
                )
            )
        elif (problem := version_error(alias, version)) is not None:
            messages.append(problem)
    return messages


def version_error(alias: str, version: tuple[int, ...]) -> CheckMessage | None:
    """Return E004 when ``version`` is older than MIN_SERVER_VERSION."""
    if version >= MIN_SERVER_VERSION:
        return None
    shown = ".".join(map(str, version))
    return Error(
        f"Redis connection {alias!r} runs Redis {shown}; redisparts needs 6.2 or newer.",
        hint="Upgrade the server (GETDEL, ZRANGESTORE and LMOVE are used).",
        id="redisparts.E004",
    )


def _queue_errors() -> list[CheckMessage]:
    """Report task-queue settings that would only fail once a worker runs."""
    # name -> (whole numbers only, smallest allowed value)
    rules = {
        "QUEUE_LEASE": (False, 0.001),
        "QUEUE_HEARTBEAT": (False, 0.001),
        "QUEUE_WORKER_TIMEOUT": (False, 0.001),
        "QUEUE_RETRY_DELAY": (False, 0.001),
        "QUEUE_RETRY_MAX_DELAY": (False, 0.001),
        "QUEUE_DEDUP_TTL": (False, 0.001),
        "QUEUE_RESULT_TTL": (False, 1),
        "QUEUE_CANCEL_GRACE": (False, 0),
        "QUEUE_MAX_DELIVERIES": (True, 1),
        "QUEUE_MAX_ARGS_BYTES": (True, 1),
        "QUEUE_MAX_RETRIES": (True, 0),
    }
    errors: list[CheckMessage] = []
    for name, (whole, least) in rules.items():
        value = getattr(app_settings, name)
        kinds = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, kinds) or not value >= least:
            errors.append(
                Error(
                    f"REDISPARTS[{name!r}] must be a {'whole ' if whole else ''}number of at "
                    f"least {least}, got {value!r}.",
                    id="redisparts.E001",
                )
            )
        elif not whole and value == float("inf"):
            errors.append(Error(f"REDISPARTS[{name!r}] must be finite.", id="redisparts.E001"))
    try:
        validate_key_part(app_settings.QUEUE_GROUP, "queue group")
    except (TypeError, ValueError) as exc:
        errors.append(Error(f"REDISPARTS['QUEUE_GROUP']: {exc}.", id="redisparts.E001"))
    return errors


def _monitoring_errors() -> list[CheckMessage]:
    """Report health-check thresholds and a metrics token that could not work."""
    errors: list[CheckMessage] = []
    limits = ["HEALTH_QUEUE_MAX_AGE", "HEALTH_LEASE_GRACE", "HEALTH_REPLICATION_MAX_LAG"]
    if app_settings.HEALTH_REPLICATION_MAX_LAG_BYTES is not None:
        limits.append("HEALTH_REPLICATION_MAX_LAG_BYTES")
    for name in limits:
        value = getattr(app_settings, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e15:
            errors.append(
                Error(
                    f"REDISPARTS[{name!r}] must be a number of at least 0, got {value!r}.",
                    id="redisparts.E001",
                )
            )
    share = app_settings.HEALTH_MEMORY_MAX_SHARE
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        errors.append(
            Error(
                f"REDISPARTS['HEALTH_MEMORY_MAX_SHARE'] must be a number above 0 and at most 1, "
                f"got {share!r}.",
                id="redisparts.E001",
            )
        )
    token = app_settings.METRICS_TOKEN
    if token is not None and (
        not isinstance(token, str) or len(token) < 16 or not token.isprintable()
    ):
        errors.append(
            Error(
                "REDISPARTS['METRICS_TOKEN'] must be None or a string of at least 16 printable "
                "characters.",
                hint="Make one with python -c 'import secrets; print(secrets.token_urlsafe())'",
                id="redisparts.E001",
            )
        )
    return errors


def _connection_errors() -> list[CheckMessage]:
    connections = app_settings.CONNECTIONS
    hint = "See the Configuration section of the README for the accepted shapes."
    if not isinstance(connections, dict) or not connections:
        return [
            Error(
                "REDISPARTS['CONNECTIONS'] must be a non-empty dict.",
                hint=hint,
                id="redisparts.E003",
            )
        ]
    errors: list[CheckMessage] = [
        Error(f"Redis connection {alias!r}: {problem}", hint=hint, id="redisparts.E003")
        for alias, config in connections.items()
        for problem in config_problems(config)
    ]
    default = app_settings.DEFAULT_CONNECTION
    if default not in connections:
        errors.append(
            Error(
                f"REDISPARTS['DEFAULT_CONNECTION'] = {default!r} is not in CONNECTIONS.",
                hint=f"Use one of {sorted(connections)}.",
                id="redisparts.E003",
            )
        )
    return errors


def _embedded_errors() -> list[CheckMessage]:
    from .embedded import embedded_config_problems

    return [
        Error(f"REDISPARTS['EMBEDDED']: {problem}", hint="See embedded.py.", id="redisparts.E005")
        for problem in embedded_config_problems(app_settings.EMBEDDED)
    ]


# Errors that are no outage but settings to fix: (what, hint, id) by Probe.kind.
_REFUSALS = {
    "tls": (
        "TLS handshake refused, a certificate problem",
        "Check OPTIONS ssl_ca_certs (the CA that signed the server's certificate; for "
        "django-redis, CONNECTION_POOL_KWARGS) and, if the server asks for one, the "
        "client certificate ssl_certfile and ssl_keyfile. See docs/howto/security.md.",
        "redisparts.E006",
    ),
    "auth": (
        "login refused",
        "Check the user and password of the connection (in the URL or OPTIONS username "
        "and password) and that the ACL user is on; python manage.py rp_acl prints its rules.",
        "redisparts.E007",
    ),
}


class Probe(NamedTuple):
    """What probe() found: the server's version, or an error and its kind ("tls": a
    certificate problem, "auth": login refused, "unreachable": anything else)."""

    version: tuple[int, ...]
    error: str | None
    kind: str | None


def _kind(exc: BaseException, tls: bool) -> str:
    """The kind of a probe's error; ``tls``: the client connects over TLS."""
    if isinstance(exc, redis.AuthenticationError):
        return "auth"
    # redis-py wraps the ssl module's error in its ConnectionError. In TLS 1.3 a server
    # checks the client's certificate after the handshake, and its refusal may reach the
    # client as a plain reset of the connection rather than as the TLS alert.
    refusals = (ssl.SSLError, ConnectionResetError, BrokenPipeError) if tls else ssl.SSLError
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, refusals):
            return "tls"
        cause = cause.__cause__ or cause.__context__
    return "unreachable"


def _uses_tls(client: Any) -> bool:
    kwargs = client.nodes_manager.connection_kwargs if is_cluster(client) else {}
    kind = kwargs.get("connection_class") or getattr(
        client.connection_pool, "connection_class", None
    )
    return isinstance(kind, type) and issubclass(kind, redis.connection.SSLConnection)


def probe(alias: str, timeout: float) -> Probe:
    """Ping ``alias`` and read its version, giving up after ``timeout`` seconds."""
    result: dict[str, Any] = {}

    def run() -> None:
        client = None
        try:
            client = get_redis(alias)
            client.ping()
            info = client.info("server")
            if "redis_version" not in info:  # a cluster client answers per node
                info = next(iter(info.values()))
            result["version"] = tuple(int(p) for p in str(info["redis_version"]).split(".")[:3])
        except Exception as exc:  # reported as the check's message, not hidden
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["kind"] = _kind(exc, client is not None and _uses_tls(client))

    thread = threading.Thread(target=run, daemon=True, name=f"redisparts-check-{alias}")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return Probe((), f"no answer within {timeout:g}s", "unreachable")
    return Probe(result.get("version", ()), result.get("error"), result.get("kind"))
