"""The marketplace load behind ``rp_bench_market``: it runs, and its checks can fail."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from bench import market_load
from redisparts_app.services import market


def test_a_short_load_lists_buys_and_keeps_every_invariant(redis_url, redis_client):
    figures = market_load.run_once(redis_url, "lua", listers=2, buyers=2, seconds=0.5)
    assert figures["listed"] > 0
    assert 0 <= figures["bought"] <= figures["listed"]
    assert figures["retries"] == 0  # the script never retries
    assert figures["invariants"] == {
        "money conserved": True,
        "no item sold twice": True,
        "inventories consistent": True,
    }


def _sale(redis_client, buyer, item, seller, price):
    """Really buy one item, and return the buyers' records of it."""
    market.list_item(seller, item, price, client=redis_client)
    market.purchase(buyer, item, seller, price, strategy="lua", client=redis_client)
    return {buyer: {"bought": [(item, seller, price)]}}


@pytest.fixture
def sold(redis_client):
    market.create_user("lister0", 0, client=redis_client)
    market.create_user("buyer0", market_load.BUYER_FUNDS, client=redis_client)
    items = [f"lister0-{i}" for i in range(market_load.ITEMS_PER_LISTER)]
    redis_client.sadd(market.inventory_key("lister0"), *items)
    records = _sale(redis_client, "buyer0", "lister0-0", "lister0", 70)
    assert all(market_load.check_invariants(redis_client, ["lister0"], records).values())
    return records


def test_money_created_is_caught(redis_client, sold):
    redis_client.hincrby(market.user_key("lister0"), "funds", 1)
    checks = market_load.check_invariants(redis_client, ["lister0"], sold)
    assert checks["money conserved"] is False


def test_an_item_recorded_twice_is_caught(redis_client, sold):
    sold["buyer0"]["bought"].append(sold["buyer0"]["bought"][0])
    checks = market_load.check_invariants(redis_client, ["lister0"], sold)
    assert checks["no item sold twice"] is False


def test_an_item_in_two_places_is_caught(redis_client, sold):
    redis_client.sadd(market.inventory_key("lister0"), "lister0-0")
    checks = market_load.check_invariants(redis_client, ["lister0"], sold)
    assert checks["inventories consistent"] is False


def test_the_command_prints_the_table_for_the_chosen_strategy():
    out = StringIO()
    call_command(
        "rp_bench_market", "--seconds", "0.3", "--repetitions", "1", "--strategy", "lua",
        stdout=out, stderr=StringIO(),
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:2] == ["strategy", "listers/buyers"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["lua", "1/1"],
        ["lua", "5/1"],
        ["lua", "5/5"],
    ]
    assert all(line.endswith("all hold") for line in lines[1:])


@pytest.mark.parametrize("args", [["--seconds", "0"], ["--seconds", "-1"], ["--repetitions", "0"]])
def test_the_command_refuses_bad_numbers(args):
    with pytest.raises(CommandError) as error:
        call_command("rp_bench_market", *args, stdout=StringIO(), stderr=StringIO())
    assert error.value.returncode == 2


def test_target_ratios_pair_the_runs_of_each_repetition():
    def row(strategy, *bought, load=(5, 5)):
        return market_load.Row(strategy, *load, bought_per_run=list(bought))

    rows = [row("book_item_lock", 10, 50, 20), row("item_lock", 40, 0, 30),
            row("floor", 100, 300, 90), row("lua", 95, 240, 90),
            row("lua", 1, 1, 1, load=(1, 1))]  # fmt: skip
    # Per repetition: 40/10, 0/50, 30/20 -> median 1.5; 95/100, 240/300, 90/90 -> median 0.95.
    assert market_load.bought_ratio(rows, "item_lock", "book_item_lock") == 1.5
    assert market_load.bought_ratio(rows, "lua", "floor") == 0.95
    assert market_load.target_lines(rows) == [
        "item_lock / book_item_lock, items bought at 5/5: 1.50x (target >= 1x: met)",
        "lua / floor, items bought at 5/5: 0.95x (target >= 0.9x: met)",
    ]
    # Strategies left out of the run give no line.
    assert market_load.target_lines(rows[2:3]) == []


def test_the_book_item_lock_overdraws_a_buyer_and_the_item_lock_strategy_does_not(redis_url):
    assert market_load.overdraw_race(redis_url, "item_lock", 100) == 0
    # The book's per-item lock leaves the funds check outside any shared lock: two
    # processes of one buyer, released together, both pass it in most rounds.
    assert market_load.overdraw_race(redis_url, "book_item_lock", 100) > 0
