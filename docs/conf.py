"""Sphinx configuration of the redisparts documentation (``make docs``)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Autodoc imports the app's modules: the app-only test settings, no server is contacted.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

project = "redisparts"
copyright = "redisparts authors"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "redisparts"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
