"""A task for the fault tests: it appends its token to a file, outside Redis, so what ran
is checked independently of the queue's own bookkeeping (and of the server that failed)."""

import os

from redisparts_app.services.tasks import task


@task(name="tests.faults.record_run", queue="default", max_retries=0)
def record_run(path: str, token: str) -> None:
    # One O_APPEND write per run: lines of concurrent workers never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)


def runs(path: str) -> list[str]:
    """Tokens of the runs recorded so far, in order (repeats are re-deliveries)."""
    try:
        with open(path, encoding="utf-8") as lines:
            return [line.rstrip("\n") for line in lines if line.endswith("\n")]
    except FileNotFoundError:
        return []
