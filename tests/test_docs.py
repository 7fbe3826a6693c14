"""The documentation: it builds with warnings as errors, names every module of the package
in its layout page, module docstrings stay short, and the README stays a front page."""

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PACKAGE = REPO / "redisparts_app"


@pytest.mark.slow
def test_docs_build_with_warnings_as_errors(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html",
         DOCS, tmp_path / "html"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "html" / "components" / "locks.html").is_file()
    assert "Lock" in (tmp_path / "html" / "components" / "locks.html").read_text()


def test_layout_page_names_every_module_and_subpackage():
    names = {path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}
    names |= {
        f"{path.name}/"
        for path in PACKAGE.iterdir()
        if (path / "__init__.py").is_file() and path.name != "migrations"
    }
    layout = (DOCS / "layout.md").read_text()
    assert sorted(name for name in names if name not in layout) == []


def test_module_docstrings_say_purpose_import_keys_and_guarantee_in_twenty_lines():
    lengths = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        lengths[path.relative_to(PACKAGE).as_posix()] = len(
            inspect.cleandoc(docstring).splitlines()
        )
    assert {name: lines for name, lines in lengths.items() if lines > 20} == {}


def test_readme_is_a_front_page():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_every_component_page_documents_its_module():
    pages = sorted((DOCS / "components").glob("*.md"))
    assert len(pages) >= 14
    for page in pages:
        if page.name in ("index.md", "admin.md"):
            continue
        assert ".. automodule:: redisparts_app." in page.read_text(), page.name


def _both_benchmark_pages(folder: Path) -> Path:
    """The benchmarks page and the tables page as one page of ``folder``."""
    from bench.report import BENCHMARKS_PAGE, TABLES_PAGE

    page = folder / "benchmarks.md"
    page.write_text(BENCHMARKS_PAGE.read_text() + TABLES_PAGE.read_text())
    return page


def test_the_benchmarks_page_is_for_users_and_its_tables_are_generated():
    """The method, the summary and what each benchmark compares; the tables a page of
    their own, only headings around the generated blocks."""
    from bench.report import BENCHMARKS_PAGE, TABLES_PAGE
    from bench.run import benchmark_modules

    page = BENCHMARKS_PAGE.read_text()
    assert len(page.splitlines()) <= 300
    assert re.findall(r"<!-- bench: (\w+) -->", page) == ["summary"]
    tables = TABLES_PAGE.read_text()
    blocks = re.findall(r"<!-- bench: (\w+) -->", tables)
    assert sorted(blocks) == sorted(benchmark_modules())
    outside = re.sub(r"<!-- bench: (\w+) -->\n.*?<!-- /bench -->", "", tables, flags=re.S)
    after_intro = outside.split("\n## ", 1)[1].splitlines()[1:]
    assert [line for line in after_intro if line and not line.startswith("## ")] == []


def test_the_benchmarks_page_is_written_from_a_run(tmp_path):
    """bench.report --write-docs fills the blocks of the modules a run holds, nothing else."""
    from bench.harness import Check, Ratio, Section
    from bench.report import write_docs
    from bench.run import benchmark_modules

    page = _both_benchmark_pages(tmp_path)
    section = Section(
        "Locks: a test table", ["lock", "pairs/s"], [["ours", 1000.0], ["theirs", 500.0]],
        ratios=[Ratio("ours / theirs", 2.0, target=1.0)], checks=[Check("no lost update", True)],
    )  # fmt: skip
    machine = {"date": "2030-01-01 00:00 UTC", "cpu": "a CPU", "cores": 2,
               "load_average": [0.1, 0.2, 0.3], "python": "3.11", "redis_server": "6.2",
               "redis_py": "5.2.1", "hiredis": "3.5.0", "redis_benchmark": None}  # fmt: skip
    report = {"machine": machine, "quick": False,
              "modules": {"locks": {"error": None, "sections": [section.to_json()]}}}  # fmt: skip
    before = page.read_text()
    assert write_docs(report, page) == ["locks"]  # a run of some modules: no summary
    after = page.read_text()
    locks_block = after.split("<!-- bench: locks -->\n")[1].split("<!-- /bench -->")[0]
    assert locks_block.startswith("Run of 2030-01-01 00:00 UTC: a CPU, 2 cores")
    assert "| ours | 1,000 |" in locks_block
    assert "- ours / theirs: 2.00x  (target >= 1x: met)" in locks_block
    # Every other block and all the prose are as they were.
    for name in ("client_floor", "semaphores", "queues", "chat"):
        marker = f"<!-- bench: {name} -->"
        assert (
            after.split(marker)[1].split("<!-- /bench -->")[0]
            == (before.split(marker)[1].split("<!-- /bench -->")[0])
        )
    outside = re.sub(r"<!-- bench: (\w+) -->\n.*?<!-- /bench -->", "", after, flags=re.S)
    assert outside == re.sub(r"<!-- bench: (\w+) -->\n.*?<!-- /bench -->", "", before, flags=re.S)
    write_docs(report, page)
    assert page.read_text() == after  # a second write changes nothing
    # A run of every module writes the summary of its targets and checks too.
    report["modules"] = dict.fromkeys(benchmark_modules(), report["modules"]["locks"])
    assert "summary" in write_docs(report, page)
    assert "| locks | ours / theirs | 2.00x | >= 1x | met |" in page.read_text()


def test_the_benchmarks_page_shows_median_and_spread_over_the_kept_runs(tmp_path):
    """Over several runs a block gives each ratio's median and spread, never one run's best."""
    from bench.harness import Ratio, Section
    from bench.report import write_docs

    page = _both_benchmark_pages(tmp_path)

    def run(date: str, value: float, load: float) -> dict:
        section = Section(
            "Locks: a test table", ["lock", "pairs/s"], [["ours", value * 100]],
            ratios=[Ratio("ours / theirs", value, target=1.0)],
            machine={"load_average": [load, load, load], "ping_us": 40.0},
        )  # fmt: skip
        machine = {"date": date, "cpu": "a CPU", "cores": 2, "load_average": [load] * 3,
                   "python": "3.11", "redis_server": "6.2", "redis_py": "5.2.1",
                   "hiredis": "3.5.0", "redis_benchmark": None}  # fmt: skip
        return {"machine": machine, "quick": False,
                "modules": {"locks": {"error": None, "sections": [section.to_json()]}}}  # fmt: skip

    runs = [run("2030-01-01", 0.5, 9.0), run("2030-01-02", 3.0, 0.5), run("2030-01-03", 0.8, 1.0)]
    assert write_docs(runs[-1], page, runs=runs) == ["locks"]
    block = page.read_text().split("<!-- bench: locks -->\n")[1].split("<!-- /bench -->")[0]
    # The median of 0.5, 3.0 and 0.8 misses the target, though one run met it 3x over.
    assert "| ours / theirs | 0.80x | 0.50..3.00 | 3 | >= 1x | MISSED |" in block
    assert "- 2030-01-01: load average 9, 9, 9; PING 40 µs" in block
    # The latest run's table follows, with its machine state.
    assert "| ours | 80.0 |" in block
    assert "- machine state: load average 1, 1, 1; PING 40 µs" in block


# Exceptions of other libraries the docs name (in comparisons and how-tos), and where.
OUTSIDE_EXCEPTIONS = {
    "CommandError": "django.core.management",
    "MaxConnectionsError": "redis.exceptions",
    "NoPermissionError": "redis.exceptions",
    "ResponseError": "redis.exceptions",
    "TaskException": "huey.exceptions",
}
_EXCEPTION_LIKE = re.compile(
    r"Invalid\w+|\w+(Error|Exception|Exceeded|Timeout|NotFound|NotOwned|NotHeld|Exists|Lost"
    r"|Busy|Failed|Expired|Conflict|Full|Gap|Listed|AlreadyHeld)"
)


def _pages() -> list[Path]:
    return [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]


def _exported() -> dict[str, str]:
    """Every name in the ``__all__`` of a module of the package: name -> module."""
    import importlib
    import pkgutil

    import redisparts_app

    found = {}
    for info in pkgutil.walk_packages(redisparts_app.__path__, "redisparts_app."):
        if ".migrations" not in info.name:
            module = importlib.import_module(info.name)
            found.update(dict.fromkeys(getattr(module, "__all__", []), info.name))
    return found


def test_every_exception_the_docs_name_exists_and_is_public():
    import builtins
    import importlib
    from importlib.util import find_spec

    exported = _exported()
    unknown = []
    for page in _pages():
        for name in set(re.findall(r"`(\w+)`", page.read_text())):
            if not _EXCEPTION_LIKE.fullmatch(name) or hasattr(builtins, name):
                continue
            if name in exported:
                assert isinstance(getattr(importlib.import_module(exported[name]), name), type)
            elif name in OUTSIDE_EXCEPTIONS:
                module = OUTSIDE_EXCEPTIONS[name]
                if find_spec(module.split(".")[0]):
                    assert hasattr(importlib.import_module(module), name), name
            else:
                unknown.append(f"{page.relative_to(REPO)}: {name}")
    assert unknown == []


def test_every_error_raised_on_purpose_is_exported():
    from redisparts_app import exceptions

    classes = {
        name
        for name, value in vars(exceptions).items()
        if isinstance(value, type) and issubclass(value, exceptions.RedisPartsError)
    }
    assert sorted(classes - set(exceptions.__all__)) == []


def test_every_setting_is_in_the_configuration_table_and_read_by_the_app():
    from django.test import override_settings

    from redisparts_app.checks import check_settings
    from redisparts_app.conf import DEFAULTS, app_settings

    page = (DOCS / "configuration.md").read_text()
    settings_table = page.split("| setting | default | meaning |")[1].split("\n\n")[0]
    table = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", settings_table, re.M)
    assert len(table) == len(set(table))
    assert sorted(set(DEFAULTS) - set(table)) == []
    assert sorted(set(table) - set(DEFAULTS)) == []
    for name in table:
        with override_settings(REDISPARTS={name: DEFAULTS[name]}):
            app_settings.reload()
            assert getattr(app_settings, name) == DEFAULTS[name]
            assert not [error for error in check_settings() if "Unknown" in error.msg], name
    app_settings.reload()
    with pytest.raises(AttributeError):
        _ = app_settings.NOT_A_SETTING


def test_every_setting_the_docs_name_exists():
    """A name with the prefix of a setting (QUEUE_, LOCK_, ...) or written REDISPARTS["X"]
    is one of the settings."""
    from redisparts_app.conf import DEFAULTS

    groups = {name.split("_")[0] for name in DEFAULTS if "_" in name} - {"MAX"}
    unknown = []
    for page in _pages():
        text = page.read_text()
        named = {n for n in re.findall(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`", text)
                 if n.split("_")[0] in groups}  # fmt: skip
        named |= set(re.findall(r"""REDISPARTS\[["'](\w+)["']\]""", text))
        unknown += [f"{page.relative_to(REPO)}: {name}" for name in named - set(DEFAULTS)]
    assert sorted(unknown) == []


def test_the_version_is_written_once_and_the_changelog_says_what_it_changed():
    import tomllib

    import redisparts_app

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "redisparts_app.__version__"
    }
    changelog = (REPO / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (\d+)\.(\d+)\.(\d+) \(\d{4}-\d\d-\d\d\)$", changelog, re.M)
    versions = [tuple(map(int, release)) for release in releases]
    assert ".".join(map(str, versions[0])) == redisparts_app.__version__
    assert versions == sorted(set(versions), reverse=True)
    assert len(versions) == changelog.count("\n## ")  # every release heading is well formed
