"""PostgresServer itself: a server of its own beside the session's, then gone without a trace."""

import psycopg

from redisparts_app.testing import PostgresServer


def test_a_second_server_runs_beside_the_sessions_and_stop_removes_it(postgres_server):
    with PostgresServer() as server:
        home, process = server.socket_dir, server.process
        assert home != postgres_server.socket_dir  # same port number, its own socket
        with psycopg.connect(server.dsn) as connection:
            connection.execute("CREATE TABLE only_here (id int)")
        with psycopg.connect(postgres_server.dsn) as connection:
            tables = connection.execute("SELECT to_regclass('only_here')").fetchone()
        assert tables == (None,)
    assert process.poll() is not None
    assert not home.exists()
