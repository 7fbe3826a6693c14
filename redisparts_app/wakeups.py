"""Wake-up lists: the waiters of one process on one list share one BLPOP.

Import: none needed; a core yields ``faces.pop_signal(key, seconds)`` and both executors
of ``faces`` run it here (``pop_signal`` on the sync face, ``apop_signal`` on the async one).

A lease's or a semaphore's release pushes an element to its wake-up list, and a waiter pops
it with BLPOP instead of polling. Were each waiter to send its own BLPOP, each would hold a
connection for its whole wait, and many waiters would empty a bounded pool, leaving a holder
no connection to release or extend with. Here the waiters of one process on one list
(threads on one sync client; coroutines on one async client) take turns: one sends the
BLPOP, the others wait in the process, first come first served, and the next sends the next
BLPOP once it returns, blocking for what is left of its own pause. An element popped wakes
the waiter that popped it; a waiter in line does not poll, and leaves the line only when its
patience runs out. Waiters in several processes compete in Redis, one BLPOP per process.

Bound: a process holds at most one connection in BLPOP per wake-up list. On the async face
that connection comes from a pool of its own (``connection.blocking_twin``), so a release or
an extension waits for no waiter. Each BLPOP returns before the connection's socket timeout
(``longest_block``).
"""

from __future__ import annotations

import asyncio
import collections
import math
import os
import threading
import time
from typing import Any

from .connection import blocking_twin, socket_timeout

__all__ = ["SHORTEST_BLOCK", "apop_signal", "longest_block", "pop_signal"]

# The shortest BLPOP timeout sent, in seconds. BLPOP takes seconds with millisecond
# precision and 0 means forever; Redis 6.x truncates 0.001 * 1000 (0.999...) to 0 ms, so a
# 1 ms wait would never end.
SHORTEST_BLOCK = 0.002


def longest_block(client: Any) -> float:
    """Return how long one blocking call on ``client`` may last before its socket times out."""
    limit = socket_timeout(client)
    return max(0.001, limit / 2) if limit else math.inf


def _blpop_seconds(seconds: float) -> float:
    return max(SHORTEST_BLOCK, round(seconds, 3))


# -- threads (the sync face) ---------------------------------------------------------------


class _ThreadLine:
    """The threads of this process waiting on one list of one client."""

    __slots__ = ("busy", "turn", "waiting")

    def __init__(self) -> None:
        self.busy = False  # a thread is in BLPOP
        self.turn = threading.Condition(_thread_guard)
        self.waiting = 0


_thread_guard = threading.Lock()
# By (id of the client, list key); a line is dropped when its last waiter leaves, so an id
# is never that of a client gone.
_thread_lines: dict[tuple[int, str], _ThreadLine] = {}


def _forget_waiters() -> None:
    """In a forked child: the parent's waiters are not there, and would keep a line busy
    for ever (or the guard locked, if one held it at the fork)."""
    global _thread_guard
    _thread_guard = threading.Lock()
    _thread_lines.clear()
    _task_lines.clear()


os.register_at_fork(after_in_child=_forget_waiters)


def pop_signal(client: Any, key: str, seconds: float, patience: float) -> bool:
    """Pop an element of list ``key`` (BLPOP on the sync ``client``, one thread of the
    process at a time); return whether one came. The BLPOP ends ``seconds`` after this
    call (at least 2 ms after it starts); a thread waits up to ``patience`` seconds for its
    turn to send it, and False when that runs out."""
    now = time.monotonic()
    until = now + min(seconds, longest_block(client))
    give_up = now + patience
    place = (id(client), key)
    with _thread_guard:
        line = _thread_lines.get(place)
        if line is None:
            line = _thread_lines[place] = _ThreadLine()
        line.waiting += 1
        while line.busy and (left := give_up - time.monotonic()) > 0:
            line.turn.wait(left)
        if line.busy:  # out of patience while another thread blocked
            _leave_thread_line(place, line)
            return False
        line.busy = True
    try:
        return client.blpop([key], timeout=_blpop_seconds(until - time.monotonic())) is not None
    finally:
        with _thread_guard:
            line.busy = False
            line.turn.notify()  # the longest waiting thread sends the next BLPOP
            _leave_thread_line(place, line)


def _leave_thread_line(place: tuple[int, str], line: _ThreadLine) -> None:
    line.waiting -= 1
    if not line.waiting:
        del _thread_lines[place]


# -- coroutines (the async face) -------------------------------------------------------------


class _TaskLine:
    """The coroutines waiting on one list of one async client."""

    __slots__ = ("busy", "queue", "waiting")

    def __init__(self) -> None:
        self.busy = False  # a coroutine is in BLPOP
        self.queue: collections.deque[asyncio.Future[None]] = collections.deque()
        self.waiting = 0

    def pass_turn(self) -> None:
        """Wake the longest waiting coroutine still there, to send the next BLPOP."""
        while self.queue:
            turn = self.queue.popleft()
            if not turn.done():
                turn.set_result(None)
                return


# By (id of the client, list key), as _thread_lines; an async client serves one loop.
_task_lines: dict[tuple[int, str], _TaskLine] = {}


async def apop_signal(client: Any, key: str, seconds: float, patience: float) -> bool:
    """The async twin of ``pop_signal``: one coroutine of the client's loop at a time in
    BLPOP, on a connection outside the pool the other calls use."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    until = now + min(seconds, longest_block(client))
    give_up = now + patience
    place = (id(client), key)
    line = _task_lines.get(place)
    if line is None:
        line = _task_lines[place] = _TaskLine()
    line.waiting += 1
    try:
        while line.busy:
            if loop.time() >= give_up:
                return False
            turn = loop.create_future()
            line.queue.append(turn)
            try:
                async with asyncio.timeout_at(give_up):
                    await turn
            except TimeoutError:
                pass  # the loop's test decides: BLPOP if the line is free, else give up
            except BaseException:
                if turn.done() and not turn.cancelled():  # woken, but cancelled: wake another
                    line.pass_turn()
                raise
        line.busy = True
        try:
            timeout = _blpop_seconds(until - loop.time())
            return (await blocking_twin(client).blpop([key], timeout=timeout)) is not None
        finally:
            line.busy = False
            line.pass_turn()
    finally:
        line.waiting -= 1
        if not line.waiting:
            del _task_lines[place]
