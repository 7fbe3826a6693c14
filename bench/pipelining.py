"""Session-token updates per second, without and with a pipeline (Redis in Action 4.5).

``update_token`` with an item sends six commands, one round trip each;
``update_token_pipelined`` sends the same six in one pipeline. Both are called
in turn, on TCP loopback (where round trips cost most) and on a unix socket,
side by side with one PING per call: what the pipelined variant could reach if
its six commands cost nothing.

    .venv/bin/python -m bench.pipelining [--quick]
"""

import redis

from bench.harness import Ratio, Section, main
from bench.paired import interleaved

TARGET = 3.0


def run(ctx) -> list[Section]:
    from redisparts_app.services.sessions import update_token, update_token_pipelined

    rows, ratios = [], []
    for transport, label in (("tcp", "TCP loopback"), ("unix", "unix socket")):
        client = redis.Redis.from_url(ctx.url(transport))

        def separate(i: int, client=client) -> None:
            update_token(f"t{i % 1000}", "user", "item", client=client)

        def pipelined(i: int, client=client) -> None:
            update_token_pipelined(f"t{i % 1000}", "user", "item", client=client)

        samples = interleaved(
            {"separate": separate, "pipelined": pipelined, "PING": lambda _i, c=client: c.ping()},
            ctx.seconds(1.0),
            ctx.repetitions,
        )
        client.close()
        gain = samples.ratio("pipelined", "separate")
        rows.append(
            [
                label,
                samples.median("separate"),
                samples.median("pipelined"),
                samples.median("PING"),
                gain,
            ]
        )
        # The target holds on TCP, where round trips cost; the unix figure is for reference.
        ratios.append(
            Ratio(f"pipelined / separate ({label})", gain, TARGET if transport == "tcp" else None)
        )
    return [
        Section(
            title="Pipelining: session-token update with an item (6 commands), calls/s",
            columns=["transport", "separate", "pipelined", "PING (limit)", "gain"],
            rows=rows,
            ratios=ratios,
            notes=[
                "separate: one round trip per command; pipelined: one round trip per call;"
                " calls/s = 1 / median time per call, the variants called in turn",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
