"""Tasks defined with Django's Tasks API, for test_tasks_backend.py."""

import django_tasks


@django_tasks.task()
def add(a: int, b: int) -> int:
    return a + b


@django_tasks.task()
def shout(text: str) -> dict:
    return {"text": text.upper(), "length": len(text)}


@django_tasks.task()
def boom() -> None:
    raise ValueError("boom went the task")


@django_tasks.task(takes_context=True)
def which_attempt(context) -> int:
    return context.attempt


@django_tasks.task()
async def async_double(value: int) -> int:
    import asyncio

    await asyncio.sleep(0.001)
    return value * 2


@django_tasks.task()
def record_value(name: str) -> int:
    """Read a row the enqueuing transaction wrote (tests/postgres/test_tasks_on_commit.py)."""
    from tests.fencing.models import FencedRecord

    return FencedRecord.objects.get(name=name).value
