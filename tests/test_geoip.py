import csv
import ipaddress
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import GeoIPImportError, InvalidArgument
from redisparts_app.keys import component_pattern, scan_keys
from redisparts_app.services import geoip
from redisparts_app.services.geoip import City, find_city, import_geoip, ip_to_score
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster

BLOCK_HEADER = ["network", "geoname_id", "registered_country_geoname_id"]
LOCATION_HEADER = [
    "geoname_id", "locale_code", "continent_code", "continent_name", "country_iso_code",
    "country_name", "subdivision_1_iso_code", "subdivision_1_name", "subdivision_2_iso_code",
    "subdivision_2_name", "city_name", "metro_code", "time_zone", "is_in_european_union",
]  # fmt: skip


def location(geoname_id: int, city: str, region: str, country: str) -> list[str]:
    return [str(geoname_id), "en", "EU", "Europe", country, "", "", region, "", "", city, "",
            "", "0"]  # fmt: skip


def write_csv(path: Path, header: list[str] | None, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        if header:
            writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def small_data(tmp_path):
    blocks = write_csv(
        tmp_path / "blocks.csv",
        BLOCK_HEADER,
        [
            ["10.0.0.0/24", "1", "1"],
            ["10.0.1.0/24", "2", "2"],
            ["10.0.4.0/22", "3", "3"],
            ["10.1.0.0/16", "", "4"],
        ],
    )
    locations = write_csv(
        tmp_path / "locations.csv",
        LOCATION_HEADER,
        [
            location(1, "Paris", "Île-de-France", "FR"),
            location(2, "東京", "Tokyo", "JP"),
            location(3, "Berlin", "Land Berlin", "DE"),
            location(4, "", "", "NL"),
        ],
    )
    return blocks, locations


def test_block_boundaries_give_the_block_city(small_data, face):
    geo = face(geoip)
    assert geo.counts() == (0, 0)
    report = import_geoip(*small_data)
    assert (report.blocks, report.cities, report.bad_rows) == (4, 4, 0)
    assert geo.counts() == (4, 4)
    paris = City("1", "Paris", "Île-de-France", "FR", "", "EU")
    assert geo.find_city("10.0.0.0") == paris
    assert geo.find_city("10.0.0.255") == paris
    assert geo.find_city("10.0.1.0").city == "東京"
    assert geo.find_city("10.0.1.255").country == "JP"
    assert geo.find_city("10.0.4.0").city_id == "3"
    assert geo.find_city("10.0.7.255").region == "Land Berlin"
    # A block with only a registered country still gives the country.
    assert geo.find_city("10.1.255.255") == City("4", "", "", "NL", "", "EU")


def test_addresses_in_gaps_or_outside_every_block_give_none(small_data, face):
    geo = face(geoip)
    import_geoip(*small_data)
    assert geo.find_city("9.255.255.255") is None  # before the first block
    assert geo.find_city("10.0.2.0") is None  # just past the end of 10.0.1.0/24
    assert geo.find_city("10.0.3.255") is None  # just before 10.0.4.0/22
    assert geo.find_city("10.0.8.0") is None
    assert geo.find_city("255.255.255.255") is None  # after the last block
    assert geo.find_city("0.0.0.0") is None


def test_lookup_before_any_import_gives_none(face):
    geo = face(geoip)
    assert geo.find_city("1.2.3.4") is None


@pytest.mark.parametrize(
    "value", ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "a.b.c.d", "1.2.3.-4", "::1", "01.2.3.4"]
)
def test_malformed_address_raises_a_clear_error(face, value):
    geo = face(geoip)
    with pytest.raises(InvalidArgument, match="invalid IPv4 address") as info:
        geo.find_city(value)
    assert isinstance(info.value, ValueError)


def test_non_string_address_raises_type_error(face):
    geo = face(geoip)
    with pytest.raises(TypeError, match="must be a string"):
        geo.find_city(167772160)


def test_ip_to_score_matches_the_integer_form():
    assert ip_to_score("0.0.0.0") == 0
    assert ip_to_score("1.2.3.4") == 0x01020304
    assert ip_to_score("255.255.255.255") == 2**32 - 1


def test_sample_data_imports_and_every_block_resolves_at_both_ends(face):
    geo = face(geoip)
    report = import_geoip(geoip.SAMPLE_BLOCKS, geoip.SAMPLE_LOCATIONS)
    assert report.bad_rows == 0
    assert report.blocks >= 200
    assert report.cities >= 24
    countries = set()
    with open(geoip.SAMPLE_BLOCKS, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        network = ipaddress.IPv4Network(row["network"])
        first = geo.find_city(str(network.network_address))
        assert first is not None
        assert first.city_id == row["geoname_id"]
        assert geo.find_city(str(network.broadcast_address)) == first
        countries.add(first.country)
        after = ipaddress.IPv4Address(int(network.broadcast_address) + 1)
        if not any(after in ipaddress.IPv4Network(other["network"]) for other in rows):
            assert geo.find_city(str(after)) is None, f"{after} lies in a gap"
    assert len(countries) >= 5


def test_bad_rows_are_counted_and_the_rest_imported(tmp_path, face):
    geo = face(geoip)
    blocks = write_csv(
        tmp_path / "blocks.csv",
        BLOCK_HEADER,
        [
            ["10.0.0.0/24", "1", "1"],
            ["10.0.1.0/33", "1", "1"],
            ["not a network", "1", "1"],
            ["10.0.2.0/24", "x", ""],
            ["10.0.3.1/24", "1", "1"],
            ["10.0.5.0/24"],
            ["10.0.6.0/24", "", ""],
            ["10.0.7.0/24", "1", "1"],
        ],
    )
    locations = write_csv(
        tmp_path / "locations.csv",
        LOCATION_HEADER,
        [location(1, "Paris", "", "FR"), ["abc", "en"], ["2", "en", "EU"]],
    )
    report = import_geoip(blocks, locations)
    assert (report.blocks, report.cities, report.bad_rows) == (2, 1, 8)
    assert len(report.problems) == 8
    assert any(
        "blocks.csv:3" in problem and "10.0.1.0/33" in problem for problem in report.problems
    )
    assert geo.find_city("10.0.7.1").city == "Paris"


def test_legacy_layout_with_copyright_line(tmp_path, face):
    geo = face(geoip)
    blocks = tmp_path / "GeoLiteCity-Blocks.csv"
    blocks.write_text(
        "Copyright (c) 2011 MaxMind Inc.  All Rights Reserved.\n"
        "startIpNum,endIpNum,locId\n"
        '"16777216","16777471","17"\n'
        '"1.0.4.0","1.0.7.255","22"\n'
        '"16778000","16777999","17"\n',
        encoding="latin-1",
    )
    locations = tmp_path / "GeoLiteCity-Location.csv"
    locations.write_text(
        "Copyright (c) 2012 MaxMind LLC.  All Rights Reserved.\n"
        "locId,country,region,city,postalCode,latitude,longitude,metroCode,areaCode\n"
        '17,"AU","07","Sydney","",-33.8,151.2,,\n'
        '22,"FR","A8","Besançon","",47.2,6.0,,\n',
        encoding="latin-1",
    )
    report = import_geoip(blocks, locations, encoding="latin-1")
    assert (report.blocks, report.cities, report.bad_rows) == (2, 2, 1)
    assert geo.find_city("1.0.0.0") == City("17", "Sydney", "07", "AU")
    assert geo.find_city("1.0.0.255").city == "Sydney"
    assert geo.find_city("1.0.1.0") is None
    assert geo.find_city("1.0.7.255").city == "Besançon"


def test_unknown_layout_or_nothing_usable_keeps_the_previous_data(small_data, tmp_path, face):
    geo = face(geoip)
    import_geoip(*small_data)
    unknown = write_csv(tmp_path / "unknown.csv", ["a", "b"], [["1", "2"]])
    with pytest.raises(GeoIPImportError, match="no header row"):
        import_geoip(unknown, small_data[1])
    all_bad = write_csv(tmp_path / "bad.csv", BLOCK_HEADER, [["nonsense", "1", "1"]])
    with pytest.raises(GeoIPImportError, match="nothing imported"):
        import_geoip(all_bad, small_data[1])
    with pytest.raises(FileNotFoundError):
        import_geoip(tmp_path / "missing.csv", small_data[1])
    assert geo.find_city("10.0.0.1").city == "Paris"
    leftovers = [k for k in scan_keys(get_redis(), component_pattern("geoip")) if b"import" in k]
    assert leftovers == []


def _write_generation(directory: Path, name: str, city_id: int, count: int) -> tuple[Path, Path]:
    """Same blocks, all pointing at one city that exists only in this generation."""
    directory.mkdir()
    rows = [[f"10.{i // 256}.{i % 256}.0/24", str(city_id), ""] for i in range(count)]
    return (
        write_csv(directory / "blocks.csv", BLOCK_HEADER, rows),
        write_csv(
            directory / "locations.csv", LOCATION_HEADER, [location(city_id, name, "", "FR")]
        ),
    )


def _reimport_loop(generations, deadline: float) -> int:
    client = get_redis()
    imports = 0
    while time.time() < deadline and not client.exists("test:stop"):
        import_geoip(*generations[imports % 2], batch_size=50)
        imports += 1
    client.set("test:importer-done", 1)
    return imports


def _lookup_loop(count: int, deadline: float) -> dict:
    client = get_redis()
    seen: dict[str, int] = {}
    changes, previous = 0, None
    while time.time() < deadline and not client.exists("test:importer-done"):
        for i in range(0, count, 97):
            found = find_city(f"10.{i // 256}.{i % 256}.7")
            name = found.city if found else "none"
            seen[name] = seen.get(name, 0) + 1
            changes += previous is not None and name != previous
            previous = name
        if changes >= 6:
            break
    client.set("test:stop", 1)
    return {"seen": seen, "changes": changes}


@pytest.mark.slow
def test_lookup_during_reimport_sees_old_or_new_never_half(tmp_path):
    count = 1500
    generations = [
        [str(p) for p in _write_generation(tmp_path / "old", "Old", 1, count)],
        [str(p) for p in _write_generation(tmp_path / "new", "New", 2, count)],
    ]
    import_geoip(*generations[0])
    deadline = time.time() + 25
    imports, lookups = run_in_processes(
        lambda role: (
            _reimport_loop(generations, deadline)
            if role == "import"
            else _lookup_loop(count, deadline)
        ),
        [("import",), ("lookup",)],
    )
    assert imports >= 1
    assert set(lookups["seen"]) <= {"Old", "New"}, lookups
    assert lookups["changes"] >= 1, lookups
    leftovers = [k for k in scan_keys(get_redis(), component_pattern("geoip")) if b"import" in k]
    assert leftovers == []


def test_command_imports_the_sample_with_a_progress_bar(capsys):
    call_command("rp_import_geoip", "--sample")
    out, err = capsys.readouterr()
    assert "Imported 320 blocks and 43 cities; 0 bad rows skipped." in out
    assert "GeoIP import" in err
    assert "rows" in err
    assert find_city("11.0.0.1") is not None


def test_command_reports_bad_rows(tmp_path, capsys):
    blocks = write_csv(
        tmp_path / "blocks.csv", BLOCK_HEADER, [["10.0.0.0/24", "1", ""], ["10.0.0.0/99", "1", ""]]
    )
    locations = write_csv(tmp_path / "loc.csv", LOCATION_HEADER, [location(1, "Paris", "", "FR")])
    call_command("rp_import_geoip", str(blocks), str(locations))
    out, err = capsys.readouterr()
    assert "1 bad rows skipped" in out
    assert "bad row blocks.csv:3" in err


def test_command_missing_file_is_a_command_error(tmp_path, small_data):
    with pytest.raises(CommandError, match=r"missing\.csv"):
        call_command("rp_import_geoip", str(tmp_path / "missing.csv"), str(small_data[1]))


def test_command_needs_sample_or_two_files(small_data):
    with pytest.raises(CommandError, match="--sample"):
        call_command("rp_import_geoip")
    with pytest.raises(CommandError, match="--sample"):
        call_command("rp_import_geoip", "--sample", str(small_data[0]), str(small_data[1]))
