"""Simulated people on the demo site, for ``make load`` (``python -m bench.load``).

Each simulated user logs in once with its own account (bench/load/scenario.py), then
browses like a person, a second or so between clicks: the main pages, the market (buy
the cheapest listing of someone else, put an item of its inventory up for sale), its
group chat (send a message), and a static file now and then. Its open chat page follows
the chat as the browser would: under ASGI (LOAD_SERVER=asgi) it holds the chat's event
stream all along, and each message a member receives counts as one "SSE" request whose
time is from the moment its sender posted it to that receipt (the senders are users of
this process, so one clock); under WSGI it polls every 1.5 s. When the run ends, the
figures per page, the errors, every response's status code and the market's answers to
the purchases go to the JSON file named by LOAD_RESULTS.
"""

import html
import itertools
import json
import os
import random
import re
import time
from collections import Counter
from pathlib import Path

import gevent
import requests
from locust import HttpUser, between, constant_pacing, events, task
from locust.exception import StopUser

from bench.load.scenario import (
    DELIVERY,
    EVENTS,
    PASSWORD,
    POLL,
    SCRAPE_SECONDS,
    THINK_SECONDS,
    chat_id,
    username,
)

PUSH = os.environ.get("LOAD_SERVER", "asgi") == "asgi"

STATUS_CODES: Counter[int] = Counter()
OUTCOMES: Counter[str] = Counter()
_numbers = itertools.count(1)

LISTING = re.compile(
    r'name="seller" value="([^"]*)">\s*<input type="hidden" name="item" value="([^"]*)">'
    r'\s*<input type="hidden" name="price" value="(\d+)">'
)
INVENTORY = re.compile(r'<section class="card" id="inventory">(.*?)</section>', re.S)
CHIP = re.compile(r"<li>([^<]*)</li>")
CHAT_AFTER = re.compile(r'id="chat-after" name="after" value="(\d+)"')
STYLESHEET = re.compile(r'href="(/static/marketplace/site[^"]*\.css)"')
SENT_AT = re.compile(r"sent at (\d+\.\d+)")
# A purchase answered with a message on the market page: what the market said.
PURCHASE_ANSWERS = {
    "You bought": "bought",
    "no longer on the market": "sold meanwhile",
    "price of": "price changed",
    "Not enough funds": "not enough funds",
    "market operations under way": "busy",
}


@events.request.add_listener
def _tally(response=None, **kwargs) -> None:
    if response is not None and getattr(response, "status_code", 0):
        for step in (*response.history, response):
            STATUS_CODES[step.status_code] += 1


def _figures(entry) -> dict:
    return {
        "method": entry.method,
        "name": entry.name,
        "requests": entry.num_requests,
        "errors": entry.num_failures,
        "requests_per_s": round(entry.total_rps, 2),
        "p50_ms": entry.get_response_time_percentile(0.50),
        "p95_ms": entry.get_response_time_percentile(0.95),
        "p99_ms": entry.get_response_time_percentile(0.99),
        "max_ms": round(entry.max_response_time or 0),
    }


@events.quitting.add_listener
def _write_results(environment, **kwargs) -> None:
    """Write the final figures (locust's CSV files may miss the last second)."""
    path = os.environ.get("LOAD_RESULTS")
    if not path:
        return
    stats = environment.stats
    results = {
        "pages": [_figures(entry) for _, entry in sorted(stats.entries.items())],
        "total": _figures(stats.total),
        "errors": [
            {"method": e.method, "name": e.name, "error": e.to_name(), "count": e.occurrences}
            for e in stats.errors.values()
        ],
        "status_codes": dict(STATUS_CODES),
        "purchases": dict(OUTCOMES),
    }
    Path(path).write_text(json.dumps(results, indent=2))


class MarketUser(HttpUser):
    wait_time = between(*THINK_SECONDS)

    def on_start(self) -> None:
        self.number = next(_numbers)
        self.username = username(self.number)
        self.chat = chat_id(self.number)
        self.after = 0
        self.inventory: list[str] = []
        self.stylesheet = None
        self.client.get("/login/", name="/login/")
        with self.client.post(
            "/login/",
            {"username": self.username, "password": PASSWORD, **self._csrf()},
            name="/login/ (POST)",
            catch_response=True,
        ) as response:
            if not response.ok or not response.url.endswith("/market/"):
                response.failure(f"{self.username} could not log in")
                raise StopUser
        self._read_market(response.text)
        self.listener = gevent.spawn(self._follow_chat) if PUSH else None

    def on_stop(self) -> None:
        if self.listener is not None:
            self.listener.kill()

    def _follow_chat(self) -> None:
        """Hold the chat's event stream as the open page does, reconnecting from the last
        event id when it ends, and time each message from its sending to its receipt."""
        session = requests.Session()  # its own connection, beside the clicks' session
        session.cookies.update(self.client.cookies)
        # The page opens the stream after the last message it shows.
        page = session.get(f"{self.host}/chat/{self.chat}/", timeout=30).text
        found = CHAT_AFTER.search(page)
        last_id = found.group(1) if found else "0"
        while True:
            started = time.perf_counter()
            try:
                with session.get(
                    f"{self.host}/chat/{self.chat}/events/",
                    params={"after": last_id},
                    headers={"Last-Event-ID": last_id},
                    stream=True,
                    timeout=(10, 30),  # a keep-alive comes every 15 s
                ) as response:
                    STATUS_CODES[response.status_code] += 1
                    refused = None if response.ok else f"status {response.status_code}"
                    self._report("GET", EVENTS, time.perf_counter() - started, refused)
                    if refused:
                        gevent.sleep(1)
                        continue
                    for line in response.iter_lines(decode_unicode=True):
                        if line.startswith("id: "):
                            last_id = line[4:]
                        for sent in SENT_AT.findall(line):
                            self._report("SSE", DELIVERY, time.time() - float(sent))
            except requests.RequestException as exc:
                self._report("GET", EVENTS, time.perf_counter() - started, str(exc))
                gevent.sleep(1)

    def _report(self, kind: str, name: str, seconds: float, error: str | None = None) -> None:
        self.environment.events.request.fire(
            request_type=kind,
            name=name,
            response_time=seconds * 1000,
            response_length=0,
            exception=RuntimeError(error) if error else None,
            context={},
        )

    def _csrf(self) -> dict[str, str]:
        return {"csrfmiddlewaretoken": self.client.cookies.get("csrftoken", "")}

    def _read_market(self, page: str) -> list[tuple[str, str, int]]:
        """Remember the inventory; return the listings of others (seller, item, cents)."""
        found = INVENTORY.search(page)
        self.inventory = (
            [html.unescape(item) for item in CHIP.findall(found.group(1))] if found else []
        )
        return [
            (html.unescape(seller), html.unescape(item), int(price))
            for seller, item, price in LISTING.findall(page)
        ]

    @task(2)
    def home(self) -> None:
        response = self.client.get("/")
        found = STYLESHEET.search(response.text)
        if found:
            self.stylesheet = found.group(1)

    @task(4)
    def market(self) -> None:
        self._read_market(self.client.get("/market/").text)

    @task(3)
    def buy(self) -> None:
        listings = self._read_market(self.client.get("/market/").text)
        if not listings:
            return
        seller, item, price = min(listings, key=lambda listing: listing[2])
        data = {"seller": seller, "item": item, "price": str(price), **self._csrf()}
        response = self.client.post("/market/buy/", data, name="/market/buy/")
        for text, outcome in PURCHASE_ANSWERS.items():
            if text in response.text:
                OUTCOMES[outcome] += 1
                break
        else:
            OUTCOMES["no answer"] += 1
        self._read_market(response.text)

    @task(2)
    def sell(self) -> None:
        if not self.inventory:
            return
        item = random.choice(self.inventory)
        price = f"{random.randint(1, 20)}.{random.randint(0, 99):02d}"
        data = {"item": item, "price": price, **self._csrf()}
        self._read_market(self.client.post("/market/sell/", data, name="/market/sell/").text)

    @task(1)
    def chat_room(self) -> None:
        page = self.client.get(f"/chat/{self.chat}/", name="/chat/[id]/").text
        found = CHAT_AFTER.search(page)
        if found:
            self.after = int(found.group(1))

    def chat_poll(self) -> None:
        response = self.client.get(
            f"/chat/{self.chat}/poll/?after={self.after}",
            name=POLL,
            headers={"HX-Request": "true"},
        )
        found = CHAT_AFTER.search(response.text)
        if found:
            self.after = int(found.group(1))

    if not PUSH:  # the page polls only when it has no event stream
        chat_poll = task(6)(chat_poll)

    @task(2)
    def chat_send(self) -> None:
        text = f"{self.username} says hello, sent at {time.time():.6f}"
        self.client.post(
            f"/chat/{self.chat}/send/",
            {"text": text, **self._csrf()},
            name="/chat/[id]/send/",
            headers={"HX-Request": "true"},
        )

    @task(1)
    def pages(self) -> None:
        path = random.choice(("/guild/", "/mail/", "/chat/", "/friends/", "/stats/", "/outbox/"))
        self.client.get(path)

    @task(1)
    def static_file(self) -> None:
        if self.stylesheet:
            self.client.get(self.stylesheet, name="/static/[stylesheet]")


class Scraper(HttpUser):
    """Prometheus scraping /metrics, and a probe reading /health/, with the bearer token."""

    fixed_count = 1
    wait_time = constant_pacing(SCRAPE_SECONDS)

    @task
    def scrape(self) -> None:
        token = {"Authorization": f"Bearer {os.environ['REDISPARTS_METRICS_TOKEN']}"}
        self.client.get("/metrics", headers=token)
        self.client.get("/health/", headers=token)
