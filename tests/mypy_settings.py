"""Settings for type checking: redisparts_app and what it needs, no demo.

The django-stubs mypy plugin imports this module to learn the installed apps and
models; nothing here starts or reaches Redis.
"""

SECRET_KEY = "mypy-only"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "redisparts_app",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
CACHES = {
    "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
}
REDISPARTS = {"EMBEDDED": None}
USE_TZ = True
