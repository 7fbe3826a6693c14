"""Settings of the app's own tests: redisparts_app in a minimal project, no demo site.

The session fixture in conftest.py points CACHES at the redis-server the tests start.
CONNECTIONS stays at its default (conftest.py points the default at a cluster for tests
marked cluster). The demo's tests use tests/demo/settings.py instead.
"""

import django

SECRET_KEY = "redisparts-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "health_check",  # the template of /health/ (the monitoring extra)
    "redisparts_app",
    # A test-only app whose model guards writes with lock fencing tokens (test_locks.py).
    "tests.fencing",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "redisparts_app.middleware.RedisUnavailableMiddleware",
    "redisparts_app.middleware.MaintenanceMiddleware",
    "redisparts_app.middleware.PresenceMiddleware",
    "redisparts_app.middleware.ResponseTimeMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tests.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
# A placeholder: the session fixture in conftest.py overrides it with its own server.
CACHES = {
    "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
}

REDISPARTS = {
    "KEY_PREFIX": "rp",
    "MAINTENANCE_EXEMPT_PATHS": ["/admin/", "/metrics", "/health/"],
    "EMBEDDED": None,
}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The in-memory mailer also in the worker processes the tests start: MAILERS on Django
# 6.1, which deprecates EMAIL_BACKEND.
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
else:
    EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
DEFAULT_FROM_EMAIL = "app@redisparts.test"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
