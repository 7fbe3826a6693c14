"""Progress of long commands with and without tqdm (an optional dependency)."""

import io
import sys

import pytest
from django.core.management import call_command

from redisparts_app.management.progress import LineProgress, progress_bar
from redisparts_app.services import geoip


@pytest.fixture
def without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError


def test_without_tqdm_progress_is_a_line_at_the_end(without_tqdm):
    stream = io.StringIO()
    bar = progress_bar(stream=stream, total=3, unit="rows", desc="import")
    assert isinstance(bar, LineProgress)
    for _ in range(3):
        bar.update()
    bar.close()
    assert stream.getvalue() == "import: 3/3 rows\n"
    silent = io.StringIO()
    with progress_bar(stream=silent, total=1, disable=True) as quiet:
        quiet.update()
    assert silent.getvalue() == ""


def test_a_command_shows_progress_without_tqdm(without_tqdm, redis_client):
    stderr = io.StringIO()
    call_command("rp_import_geoip", geoip.SAMPLE_BLOCKS, geoip.SAMPLE_LOCATIONS, stderr=stderr)
    lines = stderr.getvalue().splitlines()
    assert lines[-1].startswith("GeoIP import: ")
    done, total = lines[-1].split()[2].split("/")
    assert done == total
    assert int(total) > 0


def test_with_tqdm_the_bar_is_tqdms():
    from tqdm import tqdm

    bar = progress_bar(stream=io.StringIO(), total=1)
    assert isinstance(bar, tqdm)
    bar.close()
