"""Tasks defined with Django's Tasks API, for test_tasks_backend.py.

The API is Django's own ``django.tasks`` on Django 6 and the django-tasks backport on
Django 5.2; the tests import it from here so each Django runs its native one.
"""

try:
    from django import tasks as django_tasks
    from django.tasks import exceptions
except ImportError:
    import django_tasks
    from django_tasks import exceptions

TaskResultStatus = django_tasks.TaskResultStatus
task_backends = django_tasks.task_backends
TaskResultDoesNotExist = exceptions.TaskResultDoesNotExist
# Django 6 names it InvalidTask, the backport InvalidTaskError.
InvalidTaskError = getattr(exceptions, "InvalidTask", None) or exceptions.InvalidTaskError


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
