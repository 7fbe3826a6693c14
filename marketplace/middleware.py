"""Middleware of the demo site.

``RequestCounterMiddleware`` counts the site's requests (and responses per status class) in
the Redis counters ``requests`` and ``responses-2xx`` ... ``responses-5xx``, at every
precision of REDISPARTS["COUNTER_PRECISIONS"]; the Stats page charts them. One pipelined
round trip per request; a Redis failure is logged and the response goes out unchanged.

``ErrorPageMiddleware`` answers a missing page (404) and a wrong method (405) with the
site's own pages, with DEBUG on too.
"""

import logging

import redis
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render

from redisparts_app.connection import get_redis
from redisparts_app.services.counters import update_counter

logger = logging.getLogger("marketplace.redis")


class RequestCounterMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        try:
            pipe = get_redis().pipeline(transaction=False)
            update_counter("requests", client=pipe)
            update_counter(f"responses-{response.status_code // 100}xx", client=pipe)
            pipe.execute()
        except redis.RedisError as exc:
            logger.warning("request not counted: %s", exc)
        return response


class ErrorPageMiddleware:
    """Render the site's 404 and 405 pages, whatever DEBUG says.

    A URL that matches no view (Django would answer its debug page listing every URL
    with DEBUG on) and an Http404 raised by a view get ``404.html``; the empty 405 of
    ``require_POST`` and friends gets ``405.html``, keeping its Allow header. A 404
    that a view returns itself (with its own message) goes out unchanged. Add after
    ``AuthenticationMiddleware``, so the page shows who is signed in.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.status_code == 404 and getattr(request, "resolver_match", None) is None:
            return self.not_found(request)
        if response.status_code == 405 and not getattr(response, "content", b"x"):
            page = render(request, "405.html", {"allowed": response.get("Allow", "")}, status=405)
            page["Allow"] = response.get("Allow", "")
            return page
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return self.not_found(request)
        return None

    def not_found(self, request: HttpRequest) -> HttpResponse:
        return render(request, "404.html", {"request_path": request.path}, status=404)
