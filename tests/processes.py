"""Run test workloads in several forked processes and collect what each returns.

Concurrency claims are tested with processes, not threads. Children are forked
so they inherit the Django settings the session fixtures set; redis-py pools
open fresh connections after a fork.
"""

import multiprocessing
import queue as queue_module
import traceback
from collections.abc import Callable, Sequence
from typing import Any

CONTEXT = multiprocessing.get_context("fork")


def _run(target: Callable[..., Any], args: Sequence[Any], index: int, results) -> None:
    try:
        results.put((index, True, target(*args)))
    except BaseException:
        results.put((index, False, traceback.format_exc()))
        raise


def run_in_processes(
    target: Callable[..., Any], args_list: Sequence[Sequence[Any]], timeout: float = 120.0
) -> list[Any]:
    """Run ``target(*args)`` in one process per entry of ``args_list``; return the results.

    Results come back in the order of ``args_list``. A child that raises, exits
    with a non-zero status or outlives ``timeout`` seconds fails the call with
    its traceback.
    """
    results = CONTEXT.Queue()
    children = [
        CONTEXT.Process(target=_run, args=(target, args, index, results), daemon=True)
        for index, args in enumerate(args_list)
    ]
    for child in children:
        child.start()
    collected: dict[int, Any] = {}
    failures: list[str] = []
    try:
        for _ in children:
            index, ok, value = results.get(timeout=timeout)
            if ok:
                collected[index] = value
            else:
                failures.append(f"process {index} failed:\n{value}")
    except queue_module.Empty:
        failures.append(
            f"{len(children) - len(collected)} process(es) gave no result in {timeout}s"
        )
    finally:
        for child in children:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()
    if failures:
        raise AssertionError("\n".join(failures))
    return [collected[index] for index in range(len(children))]
