"""Settings of the demo site.

Environment: REDIS_URL (an external Redis; default: the embedded server in
REDISPARTS_DATA_DIR, default var/redis), or REDIS_SENTINELS ("host:port,host:port") with
REDIS_SENTINEL_MASTER (default mymaster) and REDIS_SENTINEL_DB (default 0), or
REDIS_CLUSTER_NODES ("host:port,host:port": some nodes of a Redis Cluster),
DATABASE_URL (default SQLite in var/), DJANGO_SECRET_KEY, DJANGO_DEBUG,
DJANGO_ALLOWED_HOSTS, DJANGO_EMAIL_FILE_PATH (where the file e-mail backend writes, default
var/outbox; production without it sends through DJANGO_SMTP_HOST and DJANGO_SMTP_PORT,
default localhost:25), DJANGO_STATIC_ROOT (where collectstatic writes, default var/static),
REDISPARTS_METRICS_TOKEN (bearer token of /metrics and /health/), and with
DJANGO_DEBUG=0: DJANGO_HTTPS (default 1), DJANGO_SSL_REDIRECT (default 1),
DJANGO_HSTS_SECONDS (default 3600); DJANGO_CLIENT_ADDRESS_HEADER (e.g. X-Real-IP: the header
a proxy in front sets to the client's address, for the login rate limit).

DJANGO_DEBUG defaults to 1 for manage.py (the demo) and to 0 for marketplace.wsgi (the
WSGI server, production), where DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS are required.
"""

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from marketplace.mailers import FILE_BACKEND, SMTP_BACKEND, mail_settings
from redisparts_app.conf import sentinel_addresses
from redisparts_app.embedded import socket_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or "demo-only-insecure-key-set-DJANGO_SECRET_KEY"
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
    if host.strip()
]

# Production (DJANGO_DEBUG=0) refuses to start on the demo's secret key or without its host
# names. It is served over HTTPS, behind a proxy that sets X-Forwarded-Proto;
# DJANGO_HSTS_SECONDS=0 turns HSTS off. DJANGO_HTTPS=0 serves plain HTTP (a load test on
# loopback), which check --deploy then reports.
if not DEBUG:
    missing = [
        name
        for name in ("DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS")
        if not os.environ.get(name, "").strip()
    ]
    if missing:
        raise ImproperlyConfigured(
            f"{' and '.join(missing)} must be set when DJANGO_DEBUG=0 (production); "
            "see the README's section Production deployment"
        )
    HTTPS = os.environ.get("DJANGO_HTTPS", "1") == "1"
    SECURE_SSL_REDIRECT = HTTPS and os.environ.get("DJANGO_SSL_REDIRECT", "1") == "1"
    SESSION_COOKIE_SECURE = HTTPS
    CSRF_COOKIE_SECURE = HTTPS
    hsts = os.environ.get("DJANGO_HSTS_SECONDS", "3600").strip()
    if not hsts.isdecimal():
        raise ImproperlyConfigured(f"DJANGO_HSTS_SECONDS must be whole seconds, got {hsts!r}")
    SECURE_HSTS_SECONDS = int(hsts) if HTTPS else 0
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "health_check",  # the template of /health/
    "redisparts_app",
    "marketplace",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "marketplace.middleware.ErrorPageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "marketplace.middleware.RequestCounterMiddleware",
    "redisparts_app.middleware.RedisUnavailableMiddleware",
    "redisparts_app.middleware.MaintenanceMiddleware",
    "redisparts_app.middleware.PresenceMiddleware",
    "redisparts_app.middleware.ResponseTimeMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "marketplace.urls"
WSGI_APPLICATION = "marketplace.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "marketplace.context_processors.navigation",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}", conn_max_age=60
    )
}

# Redis: a Sentinel set-up from REDIS_SENTINELS, an external server from REDIS_URL, else
# the embedded one started on demand.
REDIS_DATA_DIR = Path(os.environ.get("REDISPARTS_DATA_DIR", VAR_DIR / "redis"))
REDIS_URL = os.environ.get("REDIS_URL") or socket_url(REDIS_DATA_DIR)
REDIS_SENTINELS = sentinel_addresses(os.environ.get("REDIS_SENTINELS", ""))
REDIS_SENTINEL_MASTER = os.environ.get("REDIS_SENTINEL_MASTER", "mymaster")
REDIS_SENTINEL_DB = int(os.environ.get("REDIS_SENTINEL_DB", "0"))
REDIS_CLUSTER_NODES = sentinel_addresses(
    os.environ.get("REDIS_CLUSTER_NODES", ""), what="cluster node address"
)
# Bounded waits, so a dead master is noticed and the client asks the sentinels again.
REDIS_OPTIONS = {"socket_connect_timeout": 2, "socket_timeout": 5}

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 2, "SOCKET_TIMEOUT": 5},
    }
}

REDISPARTS = {
    "KEY_PREFIX": "rp",
    "CONNECTIONS": {"default": {"CACHE": "default"}},
    # Opens /metrics and /health/ to a scraper (staff sessions always get in), and keeps
    # them answering while the maintenance page is up; /login/ too, so staff can sign in
    # where they always do (everyone else signed in still gets the maintenance page).
    "METRICS_TOKEN": os.environ.get("REDISPARTS_METRICS_TOKEN") or None,
    "MAINTENANCE_EXEMPT_PATHS": ["/admin/", "/metrics", "/health/", "/login/"],
    "EMBEDDED": None
    if os.environ.get("REDIS_URL") or REDIS_SENTINELS or REDIS_CLUSTER_NODES
    else {
        "DATA_DIR": REDIS_DATA_DIR,
        # Every process starts it when Django starts, but `manage.py demo`, which starts it
        # once it has read its arguments: `demo --help` starts nothing.
        "AUTOSTART": sys.argv[1:2] != ["demo"],
        "APPENDFSYNC": "everysec",
    },
}

if REDIS_SENTINELS:
    # Every process asks the sentinels for the current master and asks again after a
    # failover. Django's cache goes through django-redis' own Sentinel support.
    REDISPARTS["CONNECTIONS"] = {
        "default": {
            "SENTINELS": REDIS_SENTINELS,
            "SERVICE_NAME": REDIS_SENTINEL_MASTER,
            "DB": REDIS_SENTINEL_DB,
            "OPTIONS": REDIS_OPTIONS,
        }
    }
    CACHES["default"] = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{REDIS_SENTINEL_MASTER}/{REDIS_SENTINEL_DB}",
        "OPTIONS": {
            "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
            "SENTINELS": [tuple(address) for address in REDIS_SENTINELS],
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": 5,
        },
    }

if REDIS_CLUSTER_NODES:
    # The services follow the cluster's slot map; nothing of the site is kept in Django's
    # cache, whose Redis backends do not speak Cluster, so it stays in each process.
    REDISPARTS["CONNECTIONS"] = {
        "default": {
            "CLUSTER": [f"redis://{host}:{port}" for host, port in REDIS_CLUSTER_NODES],
            "OPTIONS": REDIS_OPTIONS,
        }
    }
    CACHES["default"] = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", VAR_DIR / "static"))
if not DEBUG:
    # whitenoise serves what `manage.py collectstatic` gathered: hashed names that browsers
    # may cache for good, with compressed copies.
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
        "whitenoise.middleware.WhiteNoiseMiddleware",
    )
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "market"
LOGOUT_REDIRECT_URL = "home"

# Sold e-mails go through Django's e-mail API (MAILERS on Django 6.1, EMAIL_* before it):
# written as files the Outbox page lists in the demo, or where DJANGO_EMAIL_FILE_PATH
# names a folder; production otherwise sends them to the SMTP server DJANGO_SMTP_HOST
# (default localhost) on DJANGO_SMTP_PORT (default 25). The tests use the in-memory one.
OUTBOX = os.environ.get("DJANGO_EMAIL_FILE_PATH")
if DEBUG or OUTBOX:
    globals().update(mail_settings(FILE_BACKEND, file_path=OUTBOX or VAR_DIR / "outbox"))
else:
    smtp = {"host": os.environ.get("DJANGO_SMTP_HOST", "localhost"),
            "port": int(os.environ.get("DJANGO_SMTP_PORT", "25"))}  # fmt: skip
    globals().update(mail_settings(SMTP_BACKEND, **smtp))
DEFAULT_FROM_EMAIL = "market@redisparts.test"

# Django's Tasks API on the redisparts task queues; `rp_worker default email` runs them.
TASKS = {
    "default": {
        "BACKEND": "redisparts_app.tasks_backend.RedisTaskBackend",
        "QUEUES": ["default", "email"],
        "OPTIONS": {"GROUP": "default", "CONNECTION": "default", "ENQUEUE_ON_COMMIT": True},
    }
}

# The demo site's own knobs.
MARKETPLACE = {
    # At most this many market operations (buy, list, cancel) run at once per account.
    "MAX_CONCURRENT_OPERATIONS": 3,
    # Seconds a market operation's semaphore permit lives if its holder dies.
    "OPERATION_TIMEOUT": 10,
    # Listings per market page.
    "PAGE_SIZE": 20,
    # The queues the demo's worker serves, in priority order.
    "WORKER_QUEUES": ["email", "default"],
    # Two child processes; an e-mail stuck on SMTP is interrupted at 30 s and its process
    # replaced at 60 s, so one hung send never holds the worker.
    "WORKER_OPTIONS": ["--concurrency", "2", "--soft-time-limit", "30", "--time-limit", "60"],
    # (events, seconds): login attempts per account name and client address, chat
    # messages and guild mails per sender. Beyond: 429 with Retry-After.
    "RATE_LIMITS": {"login": (10, 60), "chat": (60, 60), "mail": (20, 60)},
    # The header holding the client's address, set (never passed on) by a proxy in front;
    # None: the connection's address (REMOTE_ADDR).
    "CLIENT_ADDRESS_HEADER": os.environ.get("DJANGO_CLIENT_ADDRESS_HEADER") or None,
}

# Warnings of Django and everything the site logs go to the recent and common logs in Redis
# (redisparts_app.services.logs.RedisLogHandler), which the Stats page shows. Redis' own
# trouble ("redisparts", "marketplace.redis") stays on the console only.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "redis_django": {
            "class": "marketplace.log_handlers.SiteLogHandler",
            "name": "django",
            "level": "WARNING",
        },
        "redis_site": {
            "class": "marketplace.log_handlers.SiteLogHandler",
            "name": "marketplace",
            "level": "INFO",
        },
    },
    "loggers": {
        "redisparts": {"handlers": ["console"], "level": "INFO"},
        "django": {"handlers": ["console", "redis_django"], "level": "INFO"},
        "marketplace": {"handlers": ["console", "redis_site"], "level": "INFO"},
        "marketplace.redis": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
