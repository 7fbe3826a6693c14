"""`pip install .` gives a working app to a second, unrelated Django project."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SECOND_PROJECT_SETTINGS = """
SECRET_KEY = "second-project"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "redisparts_app"]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}}}
CACHES = {{"default": {{"BACKEND": "django_redis.cache.RedisCache", "LOCATION": {url!r}}}}}
REDISPARTS = {{"KEY_PREFIX": "second", "CHECK_TIMEOUT": 1.0}}
USE_TZ = True
"""


@pytest.fixture(scope="module")
def installed_app(tmp_path_factory) -> Path:
    """The app installed from a build of this repository into a folder of its own."""
    target = tmp_path_factory.mktemp("site-packages")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, REPO],
        check=True,
        capture_output=True,
    )
    return target


def run_check(installed_app: Path, project: Path, redis_url: str) -> subprocess.CompletedProcess:
    (project / "secondsite").mkdir(parents=True)
    (project / "secondsite" / "__init__.py").write_text("")
    (project / "secondsite" / "settings.py").write_text(
        SECOND_PROJECT_SETTINGS.format(url=redis_url)
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{installed_app}{os.pathsep}{project}",
        "DJANGO_SETTINGS_MODULE": "secondsite.settings",
    }
    code = "import redisparts_app, sys; print(redisparts_app.__file__); " \
           "from django.core.management import execute_from_command_line; " \
           "execute_from_command_line(['manage.py', 'check'])"  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True
    )


@pytest.mark.slow
def test_wheel_carries_templates_scripts_and_type_marker(installed_app):
    package = installed_app / "redisparts_app"
    assert (package / "py.typed").is_file()
    assert (package / "templates" / "redisparts_app" / "503.html").is_file()
    assert list((package / "lua").glob("*.lua"))


@pytest.mark.slow
def test_second_project_passes_check_from_the_installed_copy(installed_app, tmp_path, redis_url):
    result = run_check(installed_app, tmp_path, redis_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith(str(installed_app))
    assert "System check identified no issues" in result.stdout


@pytest.mark.slow
def test_second_project_pointed_at_a_stopped_redis_reports_w001(
    installed_app, tmp_path, redis_server_factory
):
    server = redis_server_factory()
    server.stop()
    result = run_check(installed_app, tmp_path, server.url)
    output = result.stdout + result.stderr
    assert "redisparts.W001" in output
    assert "HINT:" in output
