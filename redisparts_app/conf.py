"""The ``REDISPARTS`` settings dict and its defaults.

Import: ``from redisparts_app.conf import app_settings``.

Values are read on first access and kept until Django reports a change of
``REDISPARTS`` (``setting_changed``), so ``override_settings`` works in tests::

    REDISPARTS = {
        "KEY_PREFIX": "shop",
        "CONNECTIONS": {"default": {"CACHE": "default"}},
    }
"""

from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

__all__ = [
    "DEFAULTS",
    "AppSettings",
    "SettingsCache",
    "app_settings",
    "positive_int_setting",
    "sentinel_addresses",
]

DEFAULTS: dict[str, Any] = {
    # First segment of every key; no braces or glob characters.
    "KEY_PREFIX": "rp",
    # Connection aliases; see connection.py for the accepted shapes.
    "CONNECTIONS": {"default": {"CACHE": "default"}},
    # Alias used when a service is given no client.
    "DEFAULT_CONNECTION": "default",
    # Longest user-supplied key part (user, guild, chat, queue names), in characters.
    "MAX_KEY_PART_LENGTH": 200,
    # Seconds the connectivity system check waits for PING.
    "CHECK_TIMEOUT": 3.0,
    # Embedded redis-server for development; None disables it. See embedded.py.
    "EMBEDDED": None,
    # Guild mail: longest subject and body, in characters.
    "MAIL_MAX_SUBJECT_LENGTH": 200,
    "MAIL_MAX_BODY_LENGTH": 10_000,
    # Guild mail: messages kept per mailbox; sending beyond it drops the oldest.
    "MAIL_MAX_MESSAGES": 1000,
    # Guild mail: most messages one fetch returns.
    "MAIL_MAX_PAGE_SIZE": 100,
    # Group chat: longest message text, in characters.
    "CHAT_MAX_MESSAGE_LENGTH": 4000,
    # Group chat: most messages one fetch takes from one chat (the rest wait for the next).
    "CHAT_FETCH_LIMIT": 1000,
    # Group chat history: the last messages kept per chat, whoever has fetched them
    # (0 keeps none), and the days a message stays in it (0: no age limit).
    "CHAT_HISTORY_LENGTH": 1000,
    "CHAT_HISTORY_DAYS": 0,
    # Group chat push: messages each chat's push stream keeps at least (approximately; the
    # server trims whole nodes of 100); a reader further behind gets ChatPushGap.
    "CHAT_PUSH_LENGTH": 1000,
    # File distribution: largest chunk key, in bytes.
    "FILES_CHUNK_SIZE": 1 << 20,
    # File distribution: bytes a processor reads per GETRANGE.
    "FILES_BLOCK_SIZE": 1 << 17,
    # File distribution: seconds file keys live if nobody finishes them (abandoned uploads).
    "FILES_KEY_TTL": 86_400,
    # Recent contacts kept per user (autocomplete).
    "AUTOCOMPLETE_RECENT_MAX": 100,
    # Pick counts kept per user; the least picked names beyond it are dropped.
    "AUTOCOMPLETE_PICKS_MAX": 1000,
    # Names returned by a completion when no limit is given.
    "AUTOCOMPLETE_LIMIT": 10,
    # Address-book method: "lex" (ZRANGEBYLEX in Lua) or "book" (sentinels + WATCH).
    "AUTOCOMPLETE_METHOD": "lex",
    # Longest contact or member name, in characters.
    "AUTOCOMPLETE_NAME_MAX_LENGTH": 200,
    # Seconds a session token's viewed-items list lives after its last view.
    "SESSION_TTL": 7 * 24 * 3600,
    # Largest stored JSON configuration of one component, in bytes (UTF-8).
    "CONFIG_MAX_BYTES": 64 * 1024,
    # Retry-After seconds of the maintenance page when set_maintenance() was given none.
    "MAINTENANCE_RETRY_AFTER": 300,
    # Path prefixes the maintenance middleware lets through (so staff can still log in).
    "MAINTENANCE_EXEMPT_PATHS": ["/admin/"],
    # Minutes a user stays online after their last activity (current minute included).
    "PRESENCE_WINDOW_MINUTES": 10,
    # Purchase strategy used when none is named: "watch", "market_lock", "item_lock" or "lua".
    "MARKET_PURCHASE_STRATEGY": "lua",
    # Highest accepted price, in cents.
    "MARKET_MAX_PRICE": 10**11,
    # Highest accepted starting funds of a user, in cents (below 2**53, exact in a zset score).
    "MARKET_MAX_FUNDS": 10**14,
    # Seconds a WATCH loop keeps retrying before MarketBusy.
    "MARKET_RETRY_TIMEOUT": 10.0,
    # Seconds a purchase lock lives (market_lock, item_lock strategies).
    "MARKET_LOCK_TTL": 10.0,
    # Seconds a purchase waits for its lock before MarketBusy.
    "MARKET_LOCK_WAIT": 10.0,
    # Seconds rp_backup waits for BGSAVE to finish.
    "BACKUP_TIMEOUT": 600.0,
    # Logs: entries kept per recent log (one per name and severity).
    "LOG_RECENT_LIMIT": 100,
    # Logs: longer messages are cut to this many characters before they are stored.
    "LOG_MAX_MESSAGE_LENGTH": 4000,
    # Logs: seconds a recent log lives after its last entry (abandoned names disappear).
    "LOG_RECENT_TTL": 7 * 86400,
    # Counters: bucket sizes in seconds; every update increments one bucket of each.
    "COUNTER_PRECISIONS": [1, 5, 60, 300, 3600, 18000, 86400],
    # Counters: samples (buckets) kept per precision by the cleaner (rp_clean_counters).
    "COUNTER_SAMPLES": 120,
    # Response times: views kept in the slowest-views ranking.
    "SLOWEST_VIEWS_LIMIT": 100,
    # Task queues (services/tasks): queue group (hash tag) used when none is given.
    "QUEUE_GROUP": "default",
    # Seconds a worker holds a task before the reaper may hand it to another worker;
    # the worker's heartbeat extends it while the task runs.
    "QUEUE_LEASE": 60.0,
    # Seconds between a worker's heartbeats (which also extend its tasks' leases), and
    # seconds without one after which the reaper hands a worker's tasks to others.
    "QUEUE_HEARTBEAT": 1.0,
    "QUEUE_WORKER_TIMEOUT": 3.0,
    # Default time limits of a task, in seconds (None: none); a task's own limits win.
    # Soft: SoftTimeLimitExceeded is raised in the task. Hard: the process running it is
    # killed and replaced (prefork pool; the other pools stop renewing its lease).
    "QUEUE_SOFT_TIME_LIMIT": None,
    "QUEUE_TIME_LIMIT": None,
    # Deliveries after which a task whose worker died goes to quarantine.
    "QUEUE_MAX_DELIVERIES": 5,
    # Retries of a task that raises, when its @task gives none.
    "QUEUE_MAX_RETRIES": 3,
    # Seconds before the first retry; doubles per retry up to QUEUE_RETRY_MAX_DELAY.
    "QUEUE_RETRY_DELAY": 2.0,
    "QUEUE_RETRY_MAX_DELAY": 3600.0,
    # Largest JSON encoding of a task's arguments, in bytes.
    "QUEUE_MAX_ARGS_BYTES": 65536,
    # Seconds a de-duplication key blocks a second enqueue, when enqueue gives none.
    "QUEUE_DEDUP_TTL": 3600.0,
    # Replicas that must acknowledge an enqueue (Redis WAIT) before it returns; 0: don't
    # wait. With 1 behind Sentinel, an acknowledged task survives a failover (README).
    "QUEUE_WAIT_REPLICAS": 0,
    # Seconds an enqueue waits for those replicas before raising TaskNotReplicated.
    "QUEUE_WAIT_TIMEOUT": 1.0,
    # Seconds a Django Tasks result stays readable after its last update.
    "QUEUE_RESULT_TTL": 86400.0,
    # Seconds a running task has, once cancelled, to stop on its own (``aborted()``)
    # before its pool ends it as the hard time limit does.
    "QUEUE_CANCEL_GRACE": 10.0,
    # Seconds a lock is held before it expires unless extended (services.locks.Lock ttl).
    "LOCK_TTL": 10.0,
    # Seconds Lock.acquire waits for a held lock before raising LockTimeout.
    "LOCK_TIMEOUT": 10.0,
    # Health checks (health.py): seconds the next task of a queue may have waited.
    "HEALTH_QUEUE_MAX_AGE": 300.0,
    # Seconds an in-flight task may stay past its lease deadline (a reaper runs at each
    # deadline in rp_scheduler, and every 2 s in each rp_worker).
    "HEALTH_LEASE_GRACE": 30.0,
    # Seconds since a replica's last acknowledgement (or a replica's last word from its
    # master) the replication check accepts.
    "HEALTH_REPLICATION_MAX_LAG": 10.0,
    # Bytes a replica may be behind its master's offset; None: not checked (write bursts
    # make it jump between the replica's once-a-second acknowledgements).
    "HEALTH_REPLICATION_MAX_LAG_BYTES": None,
    # Share of maxmemory in use above which the memory check fails (0 < share <= 1); servers
    # without a maxmemory are not checked.
    "HEALTH_MEMORY_MAX_SHARE": 0.9,
    # Bearer token that opens the metrics and health endpoints (urls.py) to a scraper,
    # besides staff sessions; None: staff sessions only. At least 16 characters.
    "METRICS_TOKEN": None,
}


class AppSettings:
    """Attribute access to ``settings.REDISPARTS`` with ``DEFAULTS`` filled in.

    Values are cached as instance attributes: the services read settings on every
    call, and a plain attribute read is much cheaper than one through Django's lazy
    settings (or through ``__getattr__``).
    """

    def __getattr__(self, name: str) -> Any:
        # Called only for a setting not read yet since the last reload.
        if name not in DEFAULTS:
            raise AttributeError(f"unknown REDISPARTS setting {name!r}")
        value = getattr(settings, "REDISPARTS", {}).get(name, DEFAULTS[name])
        self.__dict__[name] = value
        return value

    def reload(self) -> None:
        """Forget the cached values (done when ``REDISPARTS`` changes)."""
        self.__dict__.clear()


app_settings = AppSettings()


_K = TypeVar("_K")
_V = TypeVar("_V")


class SettingsCache(dict[_K, _V]):
    """A bounded dict of what services derive from the settings on hot paths (checked
    names, their keys): emptied when it is full and whenever ``REDISPARTS`` changes."""

    __slots__ = ("limit",)  # no instance dict: lookups stay a plain dict's

    def __init__(self, limit: int = 4096) -> None:
        super().__init__()
        self.limit = limit
        _settings_caches.append(self)

    def remember(self, key: _K, value: _V) -> _V:
        """Store ``value`` under ``key`` (emptying a full cache first); return ``value``."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


_settings_caches: list[SettingsCache[Any, Any]] = []


@receiver(setting_changed)
def _reload_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "REDISPARTS":
        app_settings.reload()
        for cache in _settings_caches:
            cache.clear()


def positive_int_setting(name: str, *, zero: bool = False) -> int:
    """Return the REDISPARTS setting ``name``; ImproperlyConfigured unless a positive int
    (or 0, with ``zero``: a setting whose 0 turns something off)."""
    value = getattr(app_settings, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        what = "a whole number of at least 0" if zero else "a positive integer"
        raise ImproperlyConfigured(f"REDISPARTS[{name!r}] must be {what}, got {value!r}")
    return value


def sentinel_addresses(text: str, what: str = "sentinel address") -> list[list[Any]]:
    """Parse ``"host:port,host:port"`` (e.g. an environment variable) into SENTINELS pairs
    (also the nodes of a cluster; ``what`` names an entry in the error).

    Empty text gives an empty list; a malformed entry raises ImproperlyConfigured.
    """
    addresses: list[list[Any]] = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, _, port = entry.rpartition(":")
        if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise ImproperlyConfigured(f"{what} {entry!r} is not host:port (e.g. 10.0.0.1:26379)")
        addresses.append([host.strip("[]"), int(port)])
    return addresses
