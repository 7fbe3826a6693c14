"""The 400 page: bad input answered with a message, never a traceback."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def bad_request(request: HttpRequest, message: str, *, back: str | None = None) -> HttpResponse:
    """Render templates/400.html with ``message`` and a link ``back`` (status 400)."""
    context = {"message": message, "back": back or request.path}
    return render(request, "400.html", context, status=400)
