"""Call-by-call pairing, for variants that take microseconds to milliseconds per call.

On a shared 2-core machine a call is now and then preempted for milliseconds, so
the mean time per call over a window swings with the load of the moment.
``interleaved`` calls the variants one call each per turn, in a new random order each
turn (seeded: the same in every run), and keeps the median time per call, which keeps
that noise out of the figures and ratios. The order changes because a call runs slower
after a heavy one (its code and data leave the CPU caches) and first after ``prepare``:
so every variant takes every place, and follows every other, equally often on average.
"""

import random
import statistics
import time
from collections.abc import Callable

from bench.harness import Samples


def interleaved(
    calls: dict[str, Callable[[int], object]],
    seconds: float,
    repetitions: int,
    prepare: Callable[[int], object] | None = None,
) -> Samples:
    """Measure calls per second of each variant as 1 / its median time per call.

    ``calls[name](i)`` is called with a running number, one variant after the
    other in a new random order each turn, for ``seconds`` per round. ``prepare(i)``,
    when given, runs untimed before each turn. Returns one figure per variant and round,
    as ``alternate``.
    """
    rounds = []
    clock = time.perf_counter
    number = 0
    order = list(calls.items())
    shuffle = random.Random(0).shuffle
    for _ in range(repetitions):
        samples: dict[str, list[float]] = {name: [] for name in calls}
        end = clock() + seconds
        while clock() < end:
            if prepare is not None:
                prepare(number)
            shuffle(order)
            for name, call in order:
                start = clock()
                call(number)
                samples[name].append(clock() - start)
            number += 1
        rounds.append({name: 1 / statistics.median(times) for name, times in samples.items()})
    return Samples(rounds)
