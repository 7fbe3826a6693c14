"""Group chat: one fetch of a member's pending messages across 1, 10 and 50 chats.

``fetch_pending_messages`` runs the fetch script once over all of the member's
chats, which first checks that the member's list of chats is the one this process
saw at their last fetch: one round trip whatever the number of chats, once a first
fetch (two round trips: the chats read, then the script) has shown the process the
list. Side by side, its peer, the obvious pipelined fetch: read the chats, then one
pipeline of the same script given one chat per call (two round trips, atomic per chat
as ours), and the straightforward per-chat implementation: read the chats, then fetch
each chat on its own round trip (``fetch_chat_messages``). Before each turn every
chat gets one new message (untimed), so each fetch takes one message per chat; three
readers in the same chats fetch in turn. Round trips are counted by a connection that
counts the requests it writes, on a fetch after a first one.

    .venv/bin/python -m bench.chat [--quick]
"""

import redis

from bench.harness import Check, Ratio, Section, main
from bench.paired import interleaved

CHAT_COUNTS = (1, 10, 50)
TARGET_AT_50 = 5.0  # ours / per chat
TARGET_PIPELINED_AT_50 = 2.0  # ours / pipelined


def counting_client(url: str) -> tuple[redis.Redis, list[int]]:
    """A client whose connections count the requests (round trips) they send."""
    pool = redis.ConnectionPool.from_url(url)
    sent = [0]

    class CountingConnection(pool.connection_class):
        def send_packed_command(self, command, check_health=True):
            sent[0] += 1
            return super().send_packed_command(command, check_health)

    pool.connection_class = CountingConnection
    return redis.Redis(connection_pool=pool), sent


def fetch_per_chat(user: str, *, client: redis.Redis) -> list:
    """The straightforward fetch: read the user's chats, then one round trip per chat."""
    from redisparts_app.services.chat import fetch_chat_messages, user_chats

    fetched = []
    for chat in user_chats(user, client=client):
        messages = fetch_chat_messages(chat, user, client=client)
        if messages:
            fetched.append((chat, messages))
    return fetched


def fetch_pipelined(user: str, *, client: redis.Redis) -> list:
    """The pipelined fetch: read the user's chats, then one pipeline of one script per chat."""
    from redisparts_app import lua
    from redisparts_app.services.chat import _decode, _fetch_keys, _fetch_limit, seen_key

    chats = [chat.decode() for chat in client.zrange(seen_key(user), 0, -1)]
    script = lua.script(client, "chat_fetch")
    pipe, limit = client.pipeline(transaction=False), _fetch_limit()
    for chat in chats:
        pipe.evalsha(script.sha, 2, *_fetch_keys(chat), user, limit)
    fetched = []
    for chat, (count, joined) in zip(chats, pipe.execute(), strict=True):
        if count > 0:
            fetched.append((chat, _decode([joined])))
    return fetched


def run(ctx) -> list[Section]:
    from redisparts_app.services.chat import create_chat, fetch_pending_messages, send_message

    client, sent = counting_client(ctx.url("tcp"))
    implementations = {
        "ours": fetch_pending_messages,
        "pipelined": fetch_pipelined,
        "per chat": fetch_per_chat,
    }
    rows, gains, pipelined_gains = [], {}, {}
    for count in CHAT_COUNTS:
        readers = {name: f"reader-{count}-{n}" for n, name in enumerate(implementations)}
        chats = [
            create_chat(
                "poster", readers.values(), "hello", chat_id=f"bench-{count}-{n}", client=client
            )
            for n in range(count)
        ]

        def post(_number: int, chats=chats) -> None:
            # The poster fetches too, so read messages are deleted.
            fetch_pending_messages("poster", client=client)
            for chat in chats:
                send_message(chat, "poster", "a new message", client=client)

        trips = {}
        for name, fetch in implementations.items():
            fetch(readers[name], client=client)  # the first fetch: ours learns the chats
            post(0)
            sent[0] = 0
            fetched = fetch(readers[name], client=client)
            trips[name] = sent[0]
            assert len(fetched) == count, f"{name} fetched {len(fetched)} of {count} chats"
        samples = interleaved(
            {
                name: lambda i, f=fetch, u=readers[name]: f(u, client=client)
                for name, fetch in implementations.items()
            },
            ctx.seconds(1.0),
            ctx.repetitions,
            prepare=post,
        )
        gains[count] = gain = samples.ratio("ours", "per chat")
        pipelined_gains[count] = samples.ratio("ours", "pipelined")
        rows.append(
            [
                count,
                trips["ours"],
                samples.median("ours"),
                trips["pipelined"],
                samples.median("pipelined"),
                pipelined_gains[count],
                trips["per chat"],
                samples.median("per chat"),
                gain,
            ]
        )
    trips = [row[1] for row in rows]
    return [
        Section(
            title="Chat: fetching pending messages (one new message per chat), fetches/s",
            columns=[
                "chats",
                "ours: round trips",
                "ours",
                "pipelined: round trips",
                "pipelined",
                "ours / pipelined",
                "per chat: round trips",
                "per chat",
                "ours / per chat",
            ],
            rows=rows,
            ratios=[
                Ratio("ours / pipelined at 50 chats", pipelined_gains[50], TARGET_PIPELINED_AT_50),
                Ratio("ours / per chat at 50 chats", gains[50], TARGET_AT_50),
            ],
            checks=[
                Check(
                    "round trips of our fetch do not grow with the chats",
                    len(set(trips)) == 1,
                    " / ".join(f"{t} at {n}" for t, n in zip(trips, CHAT_COUNTS, strict=True)),
                )
            ],
            notes=[
                "fetches/s = 1 / median time per fetch, the three fetches called in turn",
                "round trips: of a fetch after a first one; ours takes two on its first"
                " fetch for a member and after the member's chats changed",
                "pipelined: the chats read, then the fetch script once per chat in one"
                " pipeline: a script call and a reply per chat",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
