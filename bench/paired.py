"""Call-by-call pairing, for variants that take microseconds to milliseconds per call.

On a shared 2-core machine a call is now and then preempted for milliseconds, so
the mean time per call over a window swings with the load of the moment.
``interleaved`` calls the variants one call each per turn, in an order that changes
from turn to turn so that each variant takes every place in a turn equally often (for
two: A B, B A, B A, A B, …), and keeps the median time per call, which keeps that
noise out of the figures and ratios.
"""

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
    other, for ``seconds`` per round: in any 2n turns of n variants, each variant is
    called twice at each place in the turn. ``prepare(i)``, when given, runs untimed
    before each turn. Returns one figure per variant and round, as ``alternate``.
    """
    rounds = []
    clock = time.perf_counter
    number = 0
    # Turn k calls the variants in their order rotated by k // 2, reversed on odd turns:
    # over 2n turns each of n variants takes each position twice, and follows the
    # variant before it in the order as often as the one after it.
    items = list(calls.items())
    orders = []
    for shift in range(len(items)):
        rotated = items[shift:] + items[:shift]
        orders += (rotated, rotated[::-1])
    for _ in range(repetitions):
        samples: dict[str, list[float]] = {name: [] for name in calls}
        end = clock() + seconds
        while clock() < end:
            if prepare is not None:
                prepare(number)
            for name, call in orders[number % len(orders)]:
                start = clock()
                call(number)
                samples[name].append(clock() - start)
            number += 1
        rounds.append({name: 1 / statistics.median(times) for name, times in samples.items()})
    return Samples(rounds)
