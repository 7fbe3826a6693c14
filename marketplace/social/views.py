"""Contacts and guilds, guild mail and group chat pages.

Every page needs a logged-in user; every change is a POST (CSRF-checked). Bad
input gets a form error or a 400 page (a 400 fragment for htmx requests),
unknown or foreign chats a 404 or 403, always before anything is written.
"""

from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from redisparts_app.conf import app_settings
from redisparts_app.exceptions import (
    ChatNotFound,
    InvalidArgument,
    InvalidKeyPart,
    MailMessageNotFound,
    NotChatMember,
    RedisPartsError,
)
from redisparts_app.keys import validate_key_part
from redisparts_app.services import chat
from redisparts_app.services.autocomplete import AddressBook, RecentContacts
from redisparts_app.services.mail import Mailbox

from ..ratelimits import sending_refused
from ..refusals import refusal
from .forms import AddMemberForm, ChatCreateForm, ChatMessageForm, ComposeForm, GuildForm
from .guilds import all_guilds, recipient_suggestions, share_a_guild, user_guilds

MAIL_PAGE_SIZE = 10
# Chat history messages a chat page opens with, and per "Show older messages".
HISTORY_SHOWN = 50
MEMBER_RESULTS = 20
SUGGESTIONS = 8
# Recipient fields that ask for suggestions, and whether they hold a list of names.
SUGGEST_FIELDS = {"to": False, "member": False, "members": True}
_MAX_MESSAGE_ID = 2**53


def push_available(request: HttpRequest) -> bool:
    """Whether this request is served through ASGI, where a chat page may stream events."""
    return isinstance(request, ASGIRequest)


def _is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def _error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """A page (or an htmx fragment) saying what was wrong, with ``status``.

    ``message`` is a sentence for a person: a service's error goes through ``refusal``.
    """
    template = (
        "marketplace/social/_error.html" if _is_htmx(request) else "marketplace/social/error.html"
    )
    return render(request, template, {"status": status, "message": message}, status=status)


def _message_id(raw: str, minimum: int = 1) -> int | None:
    """The message id a query parameter holds (``minimum`` to 2**53), else None."""
    # The length first: int() refuses strings of more than 4,300 digits.
    if len(raw) > 16 or not raw.isdecimal() or not minimum <= int(raw) <= _MAX_MESSAGE_ID:
        return None
    return int(raw)


def _prefix(value: str) -> str:
    """The typed prefix of a user name; raise ValueError when no user name starts so."""
    value = value.strip(" ")
    limit = app_settings.MAX_KEY_PART_LENGTH
    if len(value) > limit:
        raise InvalidArgument("prefix", value, f"longer than {limit} characters; shorten it")
    return validate_key_part(value, "prefix") if value else ""


# Contacts and guilds ---------------------------------------------------------------------


@login_required
@require_GET
def guild_page(request: HttpRequest) -> HttpResponse:
    return _guild_page(request, GuildForm())


def _guild_page(request: HttpRequest, form: GuildForm, status: int = 200) -> HttpResponse:
    """The guild page; ``form`` is the "Join or found" form, bound when it was refused."""
    user = request.user.username
    guilds = all_guilds()
    mine = user_guilds(user, guilds)
    selected = request.GET.get("guild", "")
    if selected not in mine:
        selected = mine[0] if mine else ""
    context = {
        "mine": [{"name": g, "size": len(AddressBook(g))} for g in mine],
        "others": [g for g in guilds if g not in mine],
        "selected": selected,
        "members": AddressBook(selected).complete("", MEMBER_RESULTS) if selected else [],
        "recent": RecentContacts(user).names()[:10],
        "form": form,
    }
    return render(request, "marketplace/social/guild.html", context, status=status)


@login_required
@require_POST
def guild_join(request: HttpRequest) -> HttpResponse:
    form = GuildForm(request.POST)
    if not form.is_valid():  # answered in place, the typed name kept
        return _guild_page(request, form, status=400)
    guild = form.cleaned_data["guild"]
    if AddressBook(guild).join(request.user.username):
        messages.success(request, f"You joined {guild}.")
    else:
        messages.info(request, f"You already are in {guild}.")
    return redirect(f"{reverse('social:guild')}?{urlencode({'guild': guild})}")


@login_required
@require_POST
def guild_leave(request: HttpRequest) -> HttpResponse:
    form = GuildForm(request.POST)
    if not form.is_valid():
        return _error(request, 400, form.errors["guild"][0])
    guild = form.cleaned_data["guild"]
    book = AddressBook(guild)
    # Asked first: leave() notes the guild's name in the registry, a write a refusal must
    # not make.
    if request.user.username not in book or not book.leave(request.user.username):
        return _error(request, 400, f"You are not a member of {guild}.")
    messages.success(request, f"You left {guild}.")
    return redirect("social:guild")


@login_required
@require_GET
def guild_members(request: HttpRequest) -> HttpResponse:
    """Fragment: the members of a guild of yours whose names complete ``q``."""
    try:
        guild = validate_key_part(request.GET.get("guild", ""), "guild")
        prefix = _prefix(request.GET.get("q", ""))
    except ValueError as exc:
        return _error(request, 400, refusal(exc))
    book = AddressBook(guild)
    if request.user.username not in book:
        return _error(request, 403, f"You are not a member of {guild}.")
    names = book.complete(prefix, MEMBER_RESULTS)
    context = {"members": names, "prefix": prefix, "me": request.user.username}
    return render(request, "marketplace/social/_members.html", context)


@login_required
@require_GET
def suggest_recipients(request: HttpRequest) -> HttpResponse:
    """Fragment: names to offer in a recipient field, recent contacts first.

    ``field`` names the input ("to", "member" or "members"); in "members", a list
    separated by commas, the last name is the one being typed.
    """
    field = request.GET.get("field", "")
    if field not in SUGGEST_FIELDS:
        return _error(request, 400, "Names are suggested only in the To and member fields.")
    raw = request.GET.get(field, "")
    head = ""
    if SUGGEST_FIELDS[field] and "," in raw:
        head, _, last = raw.rpartition(",")
        head = ", ".join(n.strip() for n in head.split(",") if n.strip()) + ", "
        raw = last
    try:
        prefix = _prefix(raw)
    except ValueError as exc:
        return _error(request, 400, refusal(exc))
    user = request.user.username
    # Twice as many as shown: some are left out below.
    names = recipient_suggestions(user, prefix, 2 * SUGGESTIONS)
    if field == "to":  # guild mail goes only to someone who shares a guild
        names = [name for name in names if share_a_guild(user, name)]
    elif field == "member":  # adding to a chat: not someone already in it
        present = _chat_members_seen_by(user, request.GET.get("chat", ""))
        names = [name for name in names if name not in present]
    names = names[:SUGGESTIONS]
    recent = set(RecentContacts(user).names())
    context = {"names": names, "field": field, "head": head, "recent": recent}
    return render(request, "marketplace/social/_suggestions.html", context)


def _chat_members_seen_by(user: str, chat_id: str) -> set[str]:
    """The members of chat ``chat_id`` if ``user`` is one of them, else nobody."""
    try:
        members = chat.chat_members(validate_key_part(chat_id, "chat"))
    except (RedisPartsError, ValueError):
        return set()
    return set(members) if user in members else set()


# Guild mail ------------------------------------------------------------------------------


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


@login_required
@require_GET
def mail_inbox(request: HttpRequest) -> HttpResponse:
    raw = request.GET.get("page", "1")
    if not raw.isdecimal() or not 1 <= int(raw) <= 100_000:
        return _error(request, 400, "The page number must be a whole number from 1.")
    number = int(raw)
    page = Mailbox(request.user.username).fetch((number - 1) * MAIL_PAGE_SIZE, MAIL_PAGE_SIZE)
    pages = max(1, -(-page.total // MAIL_PAGE_SIZE))
    context = {
        "messages_page": [{"m": m, "when": _when(m.ts)} for m in page.messages],
        "total": page.total,
        "unread": page.unread,
        "number": number,
        "pages": pages,
        "previous": number - 1 if number > 1 else None,
        "next": number + 1 if number < pages else None,
    }
    return render(request, "marketplace/social/inbox.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def mail_compose(request: HttpRequest) -> HttpResponse:
    sender = request.user.username
    if request.method == "POST":
        form = ComposeForm(request.POST, sender=sender)
        if form.is_valid():

            def form_page(reason: str) -> HttpResponse:
                form.add_error(None, reason)
                return render(request, "marketplace/social/compose.html", {"form": form})

            if refused := sending_refused(request, "mail", "mail", form_page):
                return refused
            data = form.cleaned_data
            Mailbox(data["to"]).send(sender, data["subject"], data["body"])
            RecentContacts(sender).add(data["to"])
            messages.success(request, f"Mail sent to {data['to']}.")
            return redirect("social:inbox")
        status = 400
    else:
        initial = {key: request.GET.get(key, "")[:200] for key in ("to", "subject")}
        form = ComposeForm(initial=initial, sender=sender)
        status = 200
    return render(request, "marketplace/social/compose.html", {"form": form}, status=status)


def _find_mail(mailbox: Mailbox, message_id: int):
    """The message with ``message_id``, read page by page from the newest (None if absent)."""
    size = app_settings.MAIL_MAX_PAGE_SIZE
    offset = 0
    while True:
        page = mailbox.fetch(offset, size)
        for message in page.messages:
            if message.id == message_id:
                return message
        offset += size
        if offset >= page.total or not page.messages:
            return None


@login_required
@require_GET
def mail_read(request: HttpRequest, message_id: int) -> HttpResponse:
    mailbox = Mailbox(request.user.username)
    message = _find_mail(mailbox, message_id) if 1 <= message_id <= _MAX_MESSAGE_ID else None
    if message is None:
        return _error(request, 404, "There is no such message in your mailbox.")
    try:
        mailbox.mark_read(message_id)
    except MailMessageNotFound:
        return _error(request, 404, "This message was just deleted.")
    context = {"m": message, "when": _when(message.ts)}
    return render(request, "marketplace/social/read.html", context)


@login_required
@require_POST
def mail_delete(request: HttpRequest, message_id: int) -> HttpResponse:
    if not 1 <= message_id <= _MAX_MESSAGE_ID:
        return _error(request, 404, "There is no such message in your mailbox.")
    try:
        Mailbox(request.user.username).delete(message_id)
    except MailMessageNotFound:
        return _error(request, 404, "There is no such message in your mailbox.")
    messages.success(request, "Message deleted.")
    return redirect("social:inbox")


# Group chat ------------------------------------------------------------------------------


def _chat_or_error(
    request: HttpRequest, chat_id: str
) -> tuple[dict[str, int] | None, HttpResponse | None]:
    """The members of a chat the user belongs to, or the error response to give."""
    try:
        members = chat.chat_members(chat_id)
    except (InvalidKeyPart, ChatNotFound):
        return None, _error(request, 404, "There is no such chat.")
    if request.user.username not in members:
        return None, _error(request, 403, "Only the members of this chat may see it.")
    return members, None


def _shown(messages_: list[chat.ChatMessage]) -> list[dict]:
    return [{"m": m, "when": _when(m.ts)} for m in messages_]


def _others(members: Iterable[str], user: str) -> list[str]:
    return sorted((m for m in members if m != user), key=str.casefold)


def _history_page(
    chat_id: str, user: str, before: int | None = None
) -> tuple[list[chat.ChatMessage], int | None]:
    """The newest HISTORY_SHOWN history messages before ``before``, and the id of the
    next older one (None: there is none)."""
    page = chat.read_history(chat_id, user, HISTORY_SHOWN + 1, before)
    beyond = page[0].id if len(page) > HISTORY_SHOWN else None
    return page[-HISTORY_SHOWN:], beyond


def _chat_list(request: HttpRequest, form: ChatCreateForm, status: int = 200) -> HttpResponse:
    """The user's chats, those with unread messages first, then the latest active, each
    with its last message, and the form to start one (a constant number of round trips)."""
    user = request.user.username
    chats = [
        {
            "id": summary.id,
            "others": _others(summary.members, user),
            "unread": summary.unread,
            "last": summary.last,
            "when": _when(summary.last.ts) if summary.last else None,
        }
        for summary in chat.chat_summaries(user)
    ]
    chats.sort(key=lambda c: (-c["unread"], -(c["last"].ts if c["last"] else 0)))
    context = {"chats": chats, "form": form}
    return render(request, "marketplace/social/chats.html", context, status=status)


@login_required
@require_GET
def chat_list(request: HttpRequest) -> HttpResponse:
    initial = {"members": request.GET.get("with", "")[:200]}
    return _chat_list(request, ChatCreateForm(initial=initial, sender=request.user.username))


@login_required
@require_POST
def chat_create(request: HttpRequest) -> HttpResponse:
    user = request.user.username
    form = ChatCreateForm(request.POST, sender=user)
    if not form.is_valid():
        return _chat_list(request, form, status=400)

    def form_page(reason: str) -> HttpResponse:
        form.add_error(None, reason)
        return _chat_list(request, form)

    if refused := sending_refused(request, "chat", "chat messages", form_page):
        return refused
    members = form.cleaned_data["members"]
    chat_id = chat.create_chat(user, members, form.cleaned_data["message"])
    contacts = RecentContacts(user)
    for member in members:
        contacts.add(member)
    return redirect("social:chat", chat_id=chat_id)


@login_required
@require_GET
def chat_room(request: HttpRequest, chat_id: str) -> HttpResponse:
    user = request.user.username
    members, error = _chat_or_error(request, chat_id)
    if error:
        return error
    try:
        page, beyond = _history_page(chat_id, user)
        # The pending messages too: they are read now (and would be the only ones with
        # the history off).
        taken = chat.fetch_chat_messages(chat_id, user)
        shown = sorted({m.id: m for m in (*page, *taken)}.values(), key=lambda m: m.id)
        # Pending messages may reach below the page (a member far behind): whether the
        # history goes further back then takes one more read.
        older = beyond is not None and (
            beyond < shown[0].id or bool(chat.read_history(chat_id, user, 1, shown[0].id))
        )
    except (ChatNotFound, NotChatMember):
        return _error(request, 404, "This chat is gone.")
    context = {
        "chat_id": chat_id,
        "others": _others(members, user),
        "shown": _shown(shown),
        "older": shown[0].id if older else None,
        "after": shown[-1].id if shown else 0,
        "form": ChatMessageForm(),
        "add_form": AddMemberForm(),
        # Under ASGI the page receives messages as Server-Sent Events (events.py).
        "push": push_available(request),
    }
    return render(request, "marketplace/social/chat.html", context)


@login_required
@require_POST
def chat_send(request: HttpRequest, chat_id: str) -> HttpResponse:
    _, error = _chat_or_error(request, chat_id)
    if error:
        return error
    form = ChatMessageForm(request.POST)
    if not form.is_valid():
        return _error(request, 400, form.errors["text"][0])
    if refused := sending_refused(request, "chat", "chat messages"):
        return refused
    try:
        chat.send_message(chat_id, request.user.username, form.cleaned_data["text"])
    except (ChatNotFound, NotChatMember):
        return _error(request, 403, "You are no longer a member of this chat.")
    if _is_htmx(request):
        return HttpResponse(status=204, headers={"HX-Trigger": "chat-refresh"})
    return redirect("social:chat", chat_id=chat_id)


@login_required
@require_GET
def chat_poll(request: HttpRequest, chat_id: str) -> HttpResponse:
    """Fragment: the messages after id ``after`` (the last one the page shows), in order.

    The messages still held after ``after`` are read without moving the user's
    position; then the user's pending ones are taken (which moves it, and may
    delete messages every member now has), so nothing is missed between the
    two. Messages past a full first read wait for the next poll, so the page
    never skips one.
    """
    user = request.user.username
    after = _message_id(request.GET.get("after", ""), minimum=0)
    if after is None:
        return _error(
            request, 400, "The page asked for messages in a way the site does not know; reload it."
        )
    _, error = _chat_or_error(request, chat_id)
    if error:
        return error
    limit = app_settings.CHAT_FETCH_LIMIT
    try:
        held = chat.read_messages(chat_id, user, after=after, limit=limit)
        taken = chat.fetch_chat_messages(chat_id, user)
    except (ChatNotFound, NotChatMember):
        return _error(request, 403, "You are no longer a member of this chat.")
    new = {m.id: m for m in (*held, *taken) if m.id > after}
    if len(held) >= limit:
        new = {i: m for i, m in new.items() if i <= held[-1].id}
    if not new:
        return HttpResponse(status=204)
    ordered = [new[i] for i in sorted(new)]
    context = {"shown": _shown(ordered), "after": ordered[-1].id, "chat_id": chat_id}
    return render(request, "marketplace/social/_chat_messages.html", context)


@login_required
@require_GET
def chat_older(request: HttpRequest, chat_id: str) -> HttpResponse:
    """The history messages before id ``before``: for htmx a fragment that takes the place
    of the "Show older messages" link, otherwise a page of them."""
    user = request.user.username
    before = _message_id(request.GET.get("before", ""))
    if before is None:
        return _error(
            request,
            400,
            "The page asked for older messages in a way the site does not know; reload it.",
        )
    members, error = _chat_or_error(request, chat_id)
    if error:
        return error
    try:
        page, beyond = _history_page(chat_id, user, before)
    except (ChatNotFound, NotChatMember):
        return _error(request, 403, "You are no longer a member of this chat.")
    context = {
        "chat_id": chat_id,
        "others": _others(members or {}, user),
        "shown": _shown(page),
        "older": page[0].id if beyond is not None else None,
    }
    template = "_chat_older.html" if _is_htmx(request) else "chat_older.html"
    return render(request, f"marketplace/social/{template}", context)


@login_required
@require_POST
def chat_add_member(request: HttpRequest, chat_id: str) -> HttpResponse:
    members, error = _chat_or_error(request, chat_id)
    if error:
        return error
    form = AddMemberForm(request.POST)
    if not form.is_valid():
        return _error(request, 400, form.errors["member"][0])
    member = form.cleaned_data["member"]
    if member in members:
        return _error(request, 400, f"{member} already is a member of this chat.")
    try:
        chat.join_chat(chat_id, member)
    except ChatNotFound:
        return _error(request, 404, "This chat is gone.")
    RecentContacts(request.user.username).add(member)
    messages.success(request, f"{member} joined the chat.")
    return redirect("social:chat", chat_id=chat_id)


@login_required
@require_POST
def chat_leave(request: HttpRequest, chat_id: str) -> HttpResponse:
    _, error = _chat_or_error(request, chat_id)
    if error:
        return error
    try:
        chat.leave_chat(chat_id, request.user.username)
    except (ChatNotFound, NotChatMember):
        return _error(request, 404, "This chat is gone.")
    messages.success(request, "You left the chat.")
    return redirect("social:chats")
