"""Chats with their members and pending messages, a SCAN page at a time."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...services import listings
from .paging import CHATS_PER_PAGE, cursor_page

__all__ = ["chat_list"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def chat_list(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    ids, pager = cursor_page(request, listings.chat_page, CHATS_PER_PAGE)
    chats = [chat for chat in map(listings.chat_overview, ids) if chat is not None]
    return model_admin.render(request, "chats.html", {"title": "Chats", "chats": chats, **pager})
