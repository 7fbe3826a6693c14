"""Count the site's requests (and responses per status class) in the Redis counters.

Counters ``requests`` and ``responses-2xx`` ... ``responses-5xx``, at every precision of
REDISPARTS["COUNTER_PRECISIONS"]; the Stats page charts them. One pipelined round trip per
request; a Redis failure is logged and the response goes out unchanged.
"""

import logging

import redis

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
