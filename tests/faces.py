"""The ``face`` fixture: one test body run on a service's sync face and on its async face.

``face(target)`` returns ``target`` itself on the sync face; on the async face a view of
it where ``view.name(...)`` runs ``await target.aname(...)`` to completion in the test's
event loop (a missing async twin is an AttributeError, so the test fails), and ``with
view:`` runs ``async with target``. Plain attributes (``lock.fence``) pass through.
``target`` is a service object or a services module::

    def test_send(face):
        box = face(Mailbox("bob"))
        assert box.send("ann", "hi", "body") == 1          # send() or await asend()

The async face runs on the loop the fixture owns, on ``get_async_redis()`` (the same
server or cluster as the sync client), and closes its clients at the end of the test.
"""

import asyncio
import inspect
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest

from redisparts_app.connection import aclose_async_clients

T = TypeVar("T")


class Face:
    """The face a test runs on: ``name`` is "sync" or "async"."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.name = name
        self.loop = loop

    def __repr__(self) -> str:
        return f"<face {self.name}>"

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    def __call__(self, target: Any) -> Any:
        return _AsyncView(target, self) if self.is_async else target

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` to completion in the face's loop (the async face only)."""
        assert self.loop is not None, "the sync face has no event loop"
        return self.loop.run_until_complete(awaitable)

    def result(self, value: Any) -> Any:
        """What a sync call returns for an async twin's ``value``: its awaited result, or an
        async context manager (``ahold()``) seen as a sync one."""
        if inspect.isawaitable(value):
            return self.run(value)
        assert hasattr(value, "__aenter__"), f"an async twin returned {value!r}"
        return _AsyncView(value, self)


class _AsyncView:
    def __init__(self, target: Any, face: Face) -> None:
        self._target = target
        self._face = face

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) or isinstance(value, type):
            return value
        twin = getattr(self._target, f"a{name}")
        return lambda *args, **kwargs: self._face.result(twin(*args, **kwargs))

    def __enter__(self) -> Any:
        entered = self._face.run(self._target.__aenter__())
        return self if entered is self._target else entered

    def __exit__(self, *exc_info: Any) -> Any:
        return self._face.run(self._target.__aexit__(*exc_info))


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest, redis_client: Any) -> Iterator[Face]:
    """Each test using it runs twice: on the sync face and on the async face."""
    if request.param == "sync":
        yield Face("sync")
        return
    loop = asyncio.new_event_loop()
    try:
        yield Face("async", loop)
    finally:
        loop.run_until_complete(aclose_async_clients())
        loop.close()
