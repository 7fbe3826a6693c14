"""The wheel holds the library and nothing else, and installed from it the app works in a
second, unrelated Django project."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
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


# What a checkout holds besides its sources: never part of a build, and a stale build/ folder
# would leak old modules into the wheel.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "var", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
    ".hypothesis", "test-artifacts",
)  # fmt: skip

# Benchmarks, the demo site, tests and scripts of the repository: never in the wheel.
NOT_LIBRARY = re.compile(
    r"^(bench|marketplace|tests|scripts|templates)/"
    r"|market_load|rp_bench|demo|echo_keys\.lua|generate"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``pip`` builds from a clean copy of this repository."""
    source = tmp_path_factory.mktemp("source") / "redisparts"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", out, source],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed_app(tmp_path_factory, wheel) -> Path:
    """The app installed from that wheel into a folder of its own."""
    target = tmp_path_factory.mktemp("site-packages")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, wheel],
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
def test_the_wheel_carries_the_packages_version(wheel):
    import redisparts_app

    assert wheel.name.startswith(f"redisparts-{redisparts_app.__version__}-")


@pytest.mark.slow
def test_wheel_holds_the_library_and_its_data_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"redisparts_app"}
    assert [name for name in names if NOT_LIBRARY.search(name)] == []
    # Every template, Lua script and data file of the package, and the type marker.
    package = REPO / "redisparts_app"
    shipped = {
        path.relative_to(REPO).as_posix()
        for pattern in ("templates/**/*", "lua/*.lua", "data/**/*.csv", "py.typed")
        for path in package.glob(pattern)
        if path.is_file()
    }
    assert "redisparts_app/data/geoip/GeoLite2-City-Blocks-IPv4.csv" in shipped
    assert "redisparts_app/templates/redisparts_app/503.html" in shipped
    assert len([name for name in shipped if name.endswith(".lua")]) > 10
    assert shipped - set(names) == set()


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
