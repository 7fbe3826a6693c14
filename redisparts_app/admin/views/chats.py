"""Chats with their members and pending messages, a page at a time; the file distribution
channels (chats whose members are the processors) likewise."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...services import files, listings
from .paging import CHATS_PER_PAGE, cursor_page

__all__ = ["chat_list", "file_channels"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def chat_list(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    ids, pager = cursor_page(request, listings.chat_page, CHATS_PER_PAGE)
    chats = [chat for chat in map(listings.chat_overview, ids) if chat is not None]
    return model_admin.render(request, "chats.html", {"title": "Chats", "chats": chats, **pager})


def file_channels(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    channels = [chat for chat in map(listings.chat_overview, files.channels()) if chat]
    context = {"title": "File distribution", "channels": channels, "uploader": files.SOURCE}
    return model_admin.render(request, "files.html", context, live=True)
