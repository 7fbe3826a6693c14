"""Server-Sent Events of a chat page: its messages as they are sent.

An async view streams the chat's push stream (``chat.aread_pushed``) to the page's
EventSource, one event per batch of messages (``id:`` the last message id, ``data:``
the rendered messages). The browser reconnects by itself with ``Last-Event-ID``, from
which the stream resumes; a resume id the push stream no longer reaches ends the
stream with a ``reload`` event, a lost membership with ``stop``. Served only under
ASGI: under WSGI a stream would hold a worker thread for as long as the page is open,
so the view refuses with a 503 and the page keeps polling (chat_poll).
"""

import asyncio
import logging
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

from redisparts_app.exceptions import ChatNotFound, ChatPushGap, InvalidKeyPart, NotChatMember
from redisparts_app.services import chat

from .views import _error, _message_id, _shown, push_available

logger = logging.getLogger("marketplace")
# Milliseconds a read waits before the stream sends a keep-alive comment: proxies close
# connections quiet for longer (nginx after 60 s by default).
KEEPALIVE_MS = 15_000
# Milliseconds the browser waits before it reconnects after the stream ended.
RETRY_MS = 1000


def _event(data: str, event: str = "", event_id: int | None = None) -> bytes:
    lines = [f"event: {event}"] if event else []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines += [f"data: {line}" for line in data.splitlines() or [""]]
    return ("\n".join(lines) + "\n\n").encode()


@login_required
@require_GET
async def chat_events(request: HttpRequest, chat_id: str) -> HttpResponse:
    """The chat's messages after ``Last-Event-ID`` (or ``?after=``) as they come."""
    # EventSource shows no error page: a refused stream only makes the page poll instead.
    error = sync_to_async(_error)
    user = await request.auser()
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after", "")
    after = _message_id(raw, minimum=0)
    if after is None:
        return await error(
            request, 400, "The page asked for messages in a way the site does not know; reload it."
        )
    try:  # membership is checked before the stream starts, so errors get their status
        first = await chat.aread_pushed(chat_id, user.username, after)
    except (InvalidKeyPart, ChatNotFound):
        return await error(request, 404, "There is no such chat.")
    except NotChatMember:
        return await error(request, 403, "Only the members of this chat may see it.")
    except ChatPushGap:
        first = None
    if not push_available(request):
        message = "Messages are pushed only when the site is served through ASGI."
        return await error(request, 503, message)
    response = StreamingHttpResponse(
        _stream(chat_id, user, after, first), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


async def _stream(
    chat_id: str, user, after: int, messages: list[chat.ChatMessage] | None
) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    while messages is not None:
        if messages:
            html = render_to_string(
                "marketplace/social/_chat_items.html", {"shown": _shown(messages), "user": user}
            )
            after = messages[-1].id
            yield _event(html, event_id=after)
            # The page has shown them: take them as a poll would, so unread counts and
            # the pending messages behave the same; shielded, as a page closed right
            # after the event cancels the stream but has shown the messages.
            try:
                await asyncio.shield(chat.afetch_chat_messages(chat_id, user.username))
            except (ChatNotFound, NotChatMember):
                yield _event("", "stop")
                return
        else:
            yield b": keep-alive\n\n"
        try:
            messages = await chat.aread_pushed(chat_id, user.username, after, KEEPALIVE_MS)
        except (ChatNotFound, NotChatMember):
            yield _event("", "stop")
            return
        except ChatPushGap:
            messages = None
        except RedisError as exc:
            # The response has started: no error page now. The stream ends, and the
            # browser reconnects from its last event id (the page polls meanwhile).
            logger.warning("chat %s: event stream ended by a Redis error: %s", chat_id, exc)
            return
    yield _event("", "reload")  # the stream no longer reaches the page's last message
