"""The app's tests need only the app: they collect with the demo site and the benchmarks
made unimportable, under the app's own settings (tests/settings.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# `import marketplace` (or bench) raises ImportError once its sys.modules entry is None.
COLLECT = """
import sys
sys.modules["marketplace"] = None
sys.modules["bench"] = None
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--ds=tests.settings"]))
"""


@pytest.mark.slow
def test_app_tests_collect_without_the_demo_site_or_the_benchmarks():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env.pop("PYTEST_ADDOPTS", None)
    result = subprocess.run(
        [sys.executable, "-c", COLLECT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    collected = re.search(r"^(\d+) tests? collected", result.stdout, re.MULTILINE)
    assert collected, output
    assert int(collected.group(1)) > 1000
    modules = {line.split("::")[0] for line in result.stdout.splitlines() if "::" in line}
    assert "tests/test_standalone.py" in modules
    assert not [module for module in modules if module.startswith("tests/demo/")]


def test_app_settings_name_no_demo_app():
    from django.conf import settings

    assert os.environ["DJANGO_SETTINGS_MODULE"] == "tests.settings"
    assert settings.ROOT_URLCONF == "tests.urls"
    assert not [app for app in settings.INSTALLED_APPS if app.split(".")[0] == "marketplace"]
    assert "marketplace" not in sys.modules
