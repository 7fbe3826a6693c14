"""The demo's country visits (marketplace.visits) over the log channel, and rp_copy_logs
interrupted in a process with the demo's settings."""

import gzip
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from marketplace.visits import CountryVisits
from redisparts_app.exceptions import (
    InvalidMessage,
)
from redisparts_app.services import geoip
from redisparts_app.services.files import (
    copy_logs_to_redis,
    process_logs_from_redis,
)
from tests.test_files import FAST, _uploaded, write

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


def test_country_visits_with_a_stub_lookup(tmp_path, redis_client):
    lines = (
        b"1.1.1.1 2026-11-20 GET /\n"
        b"2.2.2.2 2026-11-20 GET /\n"
        b"1.1.1.1 2026-11-21 GET /\n"
        b"9.9.9.9 2026-11-21 GET /\n"
        b"garbage\n"
        b"\xff\xfe 2026-11-21\n"
        b"3.3.3.3 yesterday\n"
        b"not-an-ip 2026-11-21\n"
    )
    write(tmp_path, "access.log.gz", gzip.compress(lines))
    countries = {"1.1.1.1": "FR", "2.2.2.2": "DE"}

    def locate(ip: str) -> str | None:
        if not ip[0].isdigit():
            raise ValueError(ip)
        return countries.get(ip)

    visits = CountryVisits(locate)
    failures = []
    uploader = threading.Thread(
        target=lambda: failures.extend(
            [copy_logs_to_redis(tmp_path, "visits", processors=1, limit=10_000, **FAST)]
        )
    )
    uploader.start()
    process_logs_from_redis("visits", "0", visits, visits.flush, **FAST)
    uploader.join(30)
    assert visits.counts("2026-11-20") == {"FR": 1, "DE": 1}
    assert visits.counts("2026-11-21") == {"FR": 1, "--": 1}
    assert visits.skipped == 4
    with pytest.raises(InvalidMessage, match="YYYY-MM-DD"):
        visits.counts("2026-11-21}")


def test_country_visits_default_to_the_ip_to_city_lookup(redis_client):
    geoip.import_geoip(geoip.SAMPLE_BLOCKS, geoip.SAMPLE_LOCATIONS)
    country = geoip.find_city("11.0.0.1").country
    visits = CountryVisits()
    visits(b"11.0.0.1 2026-11-22 GET /\n")
    visits(b"11.0.0.2 2026-11-22 GET /\n")
    assert visits.counts("2026-11-22") == {}  # nothing stored before flush
    visits.flush()
    assert visits.counts("2026-11-22") == {country: 2}


@pytest.mark.slow
@pytest.mark.single_server  # a subprocess given REDIS_URL
def test_ctrl_c_stops_rp_copy_logs_and_deletes_the_channel(tmp_path, redis_url, redis_client):
    folder = tmp_path / "logs"
    folder.mkdir()
    write(folder, "a.log", b"line\n" * 100)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="marketplace.settings",
        REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    # No processor runs, so the uploader keeps waiting for its file to be finished.
    copy = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "rp_copy_logs", str(folder),
         "--channel", "sigint", "--limit", "10000"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _uploaded(redis_client, "sigint", 1, 1)
        copy.send_signal(signal.SIGINT)
        _, err = copy.communicate(timeout=30)
    finally:
        if copy.poll() is None:
            copy.kill()
    assert copy.returncode == 130, err
    assert "interrupted; the channel's files and chat were deleted" in err
    assert "Traceback" not in err
    assert redis_client.dbsize() == 0
