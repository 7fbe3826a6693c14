def test_default_connection_talks_to_the_session_server(redis_client, redis_url):
    redis_client.set("x", "1")
    assert redis_client.get("x") == b"1"
    kwargs = redis_client.connection_pool.connection_kwargs
    assert kwargs.get("path") or kwargs.get("port") != 6379
