"""The documentation: it builds with warnings as errors, names every module of the package
in its layout page, and the README stays a front page."""

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


def test_readme_is_a_front_page():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_every_component_page_documents_its_module():
    pages = sorted((DOCS / "components").glob("*.md"))
    assert len(pages) >= 14
    for page in pages:
        if page.name in ("index.md", "admin.md"):
            continue
        assert ".. automodule:: redisparts_app." in page.read_text(), page.name
