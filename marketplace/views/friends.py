"""Friends page: your friends with a dot for who is online; add and remove friends.

Online means active in the last REDISPARTS["PRESENCE_WINDOW_MINUTES"] minutes, as recorded
by ``redisparts_app.middleware.PresenceMiddleware`` on every signed-in request.
"""

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from redisparts_app.conf import app_settings
from redisparts_app.services import presence

from ..forms import FriendForm, error_text
from .errors import bad_request

MAX_SUGGESTIONS = 8


def _context(request: HttpRequest, form: FriendForm | None = None) -> dict:
    username = request.user.get_username()
    friends = presence.friends(username)
    online = presence.online_friends(username)
    others = (
        get_user_model()
        .objects.exclude(username=username)
        .exclude(username__in=friends)
        .order_by("username")
        .values_list("username", flat=True)[:MAX_SUGGESTIONS]
    )
    rows = sorted(friends, key=lambda name: (name not in online, name.casefold()))
    return {
        "friends": [{"name": name, "online": name in online} for name in rows],
        "online_count": len(online),
        "suggestions": list(others),
        "form": form or FriendForm(user=request.user),
        "window": app_settings.PRESENCE_WINDOW_MINUTES,
    }


@login_required
@require_GET
def friends(request: HttpRequest) -> HttpResponse:
    return render(request, "marketplace/friends.html", _context(request))


@login_required
@require_POST
def friend_add(request: HttpRequest) -> HttpResponse:
    form = FriendForm(request.POST, user=request.user)
    if not form.is_valid():
        context = _context(request, form)
        return render(request, "marketplace/friends.html", context, status=400)
    name = form.cleaned_data["username"]
    if name in presence.friends(request.user.get_username()):
        messages.info(request, f"You and {name} already are friends.")
        return redirect("friends")
    presence.add_friend(request.user.get_username(), name)
    messages.success(request, f"You and {name} are friends now.")
    return redirect("friends")


@login_required
@require_POST
def friend_remove(request: HttpRequest) -> HttpResponse:
    form = FriendForm(request.POST, user=request.user)
    if not form.is_valid():
        return bad_request(request, f"Cannot remove: {error_text(form)}", back="/friends/")
    name = form.cleaned_data["username"]
    if name not in presence.friends(request.user.get_username()):
        return bad_request(request, f"{name} is not among your friends.", back="/friends/")
    presence.remove_friend(request.user.get_username(), name)
    messages.success(request, f"{name} is no longer your friend.")
    return redirect("friends")
