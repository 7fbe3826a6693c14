"""Chat delivery latency: from send to each connected member's receipt, with 1, 100 and
1,000 members, for push, the page's polling and Django Channels with channels_redis.

One chat of ``n`` members, all connected in one receiving process (as one ASGI server
holds the pages), and a sender in this process posting ``MESSAGES`` messages
``GAP`` seconds apart. Latency is the receiver's ``time.time()`` at receipt minus the
sender's just before the send (one machine, one clock), for every member and message;
p50 and p99 over all of them.

- **push**: each member loops on ``chat.aread_pushed`` (the SSE view's read: membership
  and catch-up, then the chat's shared blocking XREAD); the message is sent with
  ``send_message``, whose ``ts`` is the send time.
- **poll**: each member fetches its pending messages (``fetch_chat_messages``, what the
  page's poll takes) every 1.5 s, from a random phase, in two processes.
- **channels**: each member is a channel (``new_channel()``, as each WebSocket consumer
  has) in one group of ``channels_redis.core.RedisChannelLayer``, receiving with
  ``receive()``; the sender ``group_send``s a message stamped with its send time.

The variants alternate per round (``alternate``); every member must receive every
message exactly once, in order (a check). Targets: push p99 at 1,000 members at most
50 ms, and at most half of channels_redis' p99.

    .venv/bin/python -m bench.realtime [--quick]
"""

import asyncio
import heapq
import random
import statistics
import time
from collections.abc import Callable

import redis
import redis.asyncio

from bench.harness import Check, Ratio, Section, alternate, main
from tests.processes import CONTEXT

MEMBER_COUNTS = (1, 100, 1000)
MESSAGES, QUICK_MESSAGES = 20, 5
GAP = 0.3  # seconds between two sends
POLL_INTERVAL = 1.5  # the chat page's
POLL_PROCESSES = 2
TARGET_P99_MS = 50.0
TARGET_VS_CHANNELS = 0.5
SETTLE = 0.3  # seconds between "all connected" and the first send


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- receivers, each in a forked process ---------------------------------------------------


def _push_receiver(url: str, chat: str, members: list[str], count: int, ready, results) -> None:
    from redisparts_app.services.chat import aread_pushed

    async def receive() -> list[tuple[str, int, float]]:
        client = redis.asyncio.Redis.from_url(url)
        got: list[tuple[str, int, float]] = []
        connected = 0
        all_connected = asyncio.Event()

        async def member(name: str) -> None:
            nonlocal connected
            last = (await aread_pushed(chat, name, 0, client=client))[-1].id  # the first
            connected += 1
            if connected == len(members):
                all_connected.set()
            while last < count + 1:
                messages = await aread_pushed(chat, name, last, 10_000, client=client)
                now = time.time()
                got.extend((name, m.id, now - m.ts) for m in messages)
                last = messages[-1].id if messages else last

        tasks = [asyncio.ensure_future(member(name)) for name in members]
        await all_connected.wait()
        ready.put(True)
        await asyncio.gather(*tasks)
        await client.aclose()
        return got

    results.put(asyncio.run(receive()))


def _poll_receiver(url: str, chat: str, members: list[str], count: int, ready, results) -> None:
    from redisparts_app.services.chat import fetch_chat_messages

    client = redis.Redis.from_url(url)
    for name in members:  # the first message
        fetch_chat_messages(chat, name, client=client)
    ready.put(True)
    start = time.monotonic()
    due = [(start + random.uniform(0, POLL_INTERVAL), name) for name in members]
    heapq.heapify(due)
    received = dict.fromkeys(members, 0)
    got: list[tuple[str, int, float]] = []
    while due:
        when, name = heapq.heappop(due)
        time.sleep(max(0.0, when - time.monotonic()))
        messages = fetch_chat_messages(chat, name, client=client)
        now = time.time()
        got.extend((name, m.id, now - m.ts) for m in messages)
        received[name] += len(messages)
        if received[name] < count:
            heapq.heappush(due, (when + POLL_INTERVAL, name))
    results.put(got)


def _channels_receiver(url: str, group: str, members: list[str], count: int, ready, results):
    from channels_redis.core import RedisChannelLayer

    async def receive() -> list[tuple[str, int, float]]:
        layer = RedisChannelLayer(hosts=[url])
        channels = {name: await layer.new_channel() for name in members}
        for channel in channels.values():
            await layer.group_add(group, channel)
        got: list[tuple[str, int, float]] = []

        async def member(name: str, channel: str) -> None:
            for _ in range(count):
                message = await layer.receive(channel)
                got.append((name, message["id"], time.time() - message["ts"]))

        tasks = [asyncio.ensure_future(member(n, c)) for n, c in channels.items()]
        ready.put(True)
        await asyncio.gather(*tasks)
        await layer.flush()
        return got

    results.put(asyncio.run(receive()))


# -- senders, in this process ---------------------------------------------------------------


def _send_chat(url: str, chat: str, count: int) -> None:
    from redisparts_app.services.chat import send_message

    client = redis.Redis.from_url(url)
    for number in range(count):
        send_message(chat, "sender", f"message {number}", client=client)
        time.sleep(GAP)


def _send_channels(url: str, group: str, count: int) -> None:
    from channels_redis.core import RedisChannelLayer

    async def send() -> None:
        layer = RedisChannelLayer(hosts=[url])
        for number in range(count):
            # Ids as the chat's: the first message is 1, created with the chat.
            message = {"type": "chat.message", "id": number + 2, "ts": time.time()}
            await layer.group_send(group, message)
            await asyncio.sleep(GAP)
        await layer.close_pools()

    asyncio.run(send())


def _measure(
    receivers: list[tuple[Callable[..., None], tuple]], send: Callable[[], None], timeout: float
) -> list[tuple[str, int, float]]:
    """Start the receiving processes, wait until all are connected, send, collect."""
    ready, results = CONTEXT.Queue(), CONTEXT.Queue()
    processes = [
        CONTEXT.Process(target=target, args=(*args, ready, results), daemon=True)
        for target, args in receivers
    ]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            ready.get(timeout=timeout)
        time.sleep(SETTLE)
        send()
        got = [sample for _ in processes for sample in results.get(timeout=timeout)]
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
    return got


def _figures(got: list[tuple[str, int, float]], members: list[str], count: int) -> dict:
    latencies = [latency * 1000 for _, _, latency in got]
    by_member: dict[str, list[int]] = {name: [] for name in members}
    for name, message_id, _ in got:
        by_member[name].append(message_id)
    expected = list(range(2, count + 2))
    return {
        "p50": statistics.median(latencies),
        "p99": percentile(latencies, 0.99),
        "exact": all(ids == expected for ids in by_member.values()),
    }


def run(ctx) -> list[Section]:
    from redisparts_app.services.chat import create_chat

    url = ctx.url("tcp")
    client = ctx.client("tcp")
    count = QUICK_MESSAGES if ctx.quick else MESSAGES
    timeout = count * GAP + 120
    rows, ratios, checks = [], [], []
    rounds = [0]
    for n in MEMBER_COUNTS:
        members = [f"m{i}" for i in range(n)]

        def new_chat(kind: str, members=members, n=n) -> str:
            rounds[0] += 1
            chat_id = f"rt-{kind}-{n}-{rounds[0]}"
            create_chat("sender", members, "hello", chat_id=chat_id, client=client)
            return chat_id

        def push(members=members) -> dict:
            chat = new_chat("push")
            receivers = [(_push_receiver, (url, chat, members, count))]
            got = _measure(receivers, lambda: _send_chat(url, chat, count), timeout)
            return _figures(got, members, count)

        def poll(members=members) -> dict:
            chat = new_chat("poll")
            receivers = [
                (_poll_receiver, (url, chat, members[i::POLL_PROCESSES], count))
                for i in range(min(POLL_PROCESSES, len(members)))
            ]
            got = _measure(receivers, lambda: _send_chat(url, chat, count), timeout)
            return _figures(got, members, count)

        def channels(members=members, n=n) -> dict:
            rounds[0] += 1
            group = f"rt-{n}-{rounds[0]}"
            receivers = [(_channels_receiver, (url, group, members, count))]
            got = _measure(receivers, lambda: _send_channels(url, group, count), timeout)
            return _figures(got, members, count)

        samples = alternate({"push": push, "poll": poll, "channels": channels}, ctx.repetitions)
        for label in ("push", "poll", "channels"):
            p50, p99 = samples.median(label, "p50"), samples.median(label, "p99")
            rows.append([n, label, p50, p99, samples.spread(label, "p99")])
            exact = all(row[label]["exact"] for row in samples.rounds)
            checks.append(Check(f"{label}, {n} members: every message once, in order", exact))
        ratios.append(
            Ratio(
                f"push p99 / channels_redis p99, {n} members",
                samples.ratio("push", "channels", "p99"),
                TARGET_VS_CHANNELS if n == MEMBER_COUNTS[-1] else None,
                at_most=True,
            )
        )
        if n == MEMBER_COUNTS[-1]:
            ratios.append(
                Ratio(
                    f"push p99 at {n} members / {TARGET_P99_MS:g} ms",
                    samples.median("push", "p99") / TARGET_P99_MS,
                    1.0,
                    at_most=True,
                )
            )
    notes = [
        f"{count} messages per round, {GAP} s apart, {ctx.repetitions} round(s) alternating "
        "push, poll and channels; medians over rounds of each round's p50 and p99 over "
        "every member and message (ms).",
        "All receivers of a variant in one process (poll: two), the sender in another, "
        "one TCP redis-server; channels_redis' default layer (RedisChannelLayer, one "
        "channel per member in a group), not its pub/sub layer.",
        "Polling's latency is the wait for the member's next poll (every 1.5 s), so about "
        "0.75 s at p50 whatever the number of members.",
    ]
    columns = ["members", "delivery", "p50 ms", "p99 ms", "p99 of the rounds"]
    return [Section("Chat delivery latency, send to receipt", columns, rows, ratios, checks, notes)]


if __name__ == "__main__":
    main(run, __doc__ or "")
