"""The ACL rules of redisparts_app.acl and rp_acl, and an ACL user with a password in every
connection shape, on real servers where the default user is switched off.

The suite's ACL pass (REDISPARTS_TEST_ACL=1, see conftest.py) runs every other test as a
user holding these rules; the tests here check the rules themselves and what an
operator does with rp_acl's line.
"""

import io
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from redisparts_app import acl
from redisparts_app.checks import check_servers
from redisparts_app.embedded import server_version
from redisparts_app.services.locks import Lock
from redisparts_app.services.mail import Mailbox
from redisparts_app.testing import LocalCluster, RedisServer, SentinelSetup

PASSWORD = "an app's password"  # a space and a quote: quoted in a URL
SCRIPTS = pathlib.Path(acl.__file__).parent / "lua"

pytestmark = pytest.mark.single_server


def rp_acl(*argv: str) -> str:
    out = io.StringIO()
    call_command("rp_acl", *argv, stdout=out)
    return out.getvalue().strip()


def version_of(server: RedisServer) -> str:
    return ".".join(map(str, server_version(server.binary)[:2]))


def lock_out_default(server: RedisServer, line: str) -> redis.Redis:
    """Apply rp_acl's ``line`` and the password, then switch the default user off; return
    an admin client (user ``admin``) for the test's own checks."""
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "admin", "on", ">admin-pw", "~*", "&*", "+@all")
    admin.execute_command(*line.split())
    admin.execute_command("ACL", "SETUSER", "redisparts", f">{PASSWORD}")
    admin.execute_command("ACL", "SETUSER", "default", "off")
    admin.close()
    return server.client(username="admin", password="admin-pw")


@pytest.fixture
def locked_server(redis_server_factory) -> Iterator[tuple[RedisServer, redis.Redis]]:
    """A server where only ``redisparts`` (every component's rules) and ``admin`` log in."""
    server = redis_server_factory()
    admin = lock_out_default(server, rp_acl("--server-version", version_of(server)))
    yield server, admin
    admin.close()


# -- the table ---------------------------------------------------------------------------


def test_every_bundled_script_belongs_to_a_component():
    declared = {name for part in [acl.BASE, *acl.COMPONENTS.values()] for name in part.scripts}
    assert {path.stem for path in SCRIPTS.glob("*.lua")} == declared


def test_every_command_a_script_calls_is_read_from_it():
    # A command named otherwise than by a quoted word could not be listed: refused loudly.
    assert acl.script_commands("queue_enqueue") >= {"lpush", "rpush", "hset", "time"}
    for part in [acl.BASE, *acl.COMPONENTS.values()]:
        for name in part.scripts:
            assert acl.script_commands(name), name


def test_components_use_only_known_components():
    for name, part in acl.COMPONENTS.items():
        assert set(part.uses) <= set(acl.COMPONENTS), name


def test_rules_use_the_key_prefix_and_only_the_chosen_components():
    rules = acl.rules("shop", ["market"])
    assert rules[:3] == ["resetkeys", "resetchannels", "-@all"]
    # the market, and the locks and task queue it uses
    assert {"~shop:market:*", "~shop:lock:*", "~shop:queue:*", "~shop:registry:*"} <= set(rules)
    assert "~shop:chat:*" not in rules
    assert not any(rule.startswith("~rp:") for rule in rules)
    assert "+flushdb" not in rules
    assert "+@all" not in rules


def test_commands_a_server_lacks_are_left_out_for_it():
    assert "+waitaof" in acl.rules("rp", ["persistence"], (7, 2))
    assert "+waitaof" not in acl.rules("rp", ["persistence"], (7, 0))
    assert "+client|setinfo" not in acl.rules("rp", ["locks"], (7, 0))
    assert "+client|setinfo" in acl.rules("rp", ["locks"], (6, 2))  # 6.2 takes any subcommand


# -- rp_acl --------------------------------------------------------------------------------


def test_rp_acl_prints_one_setuser_line_with_the_configured_prefix():
    with override_settings(REDISPARTS={"KEY_PREFIX": "shop"}):
        line = rp_acl("--component", "locks", "--user", "shop-app")
    assert line.startswith("ACL SETUSER shop-app on resetkeys resetchannels -@all ")
    assert "~shop:lock:*" in line.split()
    assert "\n" not in line
    assert ">" not in line  # the password is the operator's, set apart


def test_rp_acl_rules_only_prints_the_access_string():
    assert rp_acl("--rules-only", "--component", "ratelimit") == " ".join(
        acl.rules("rp", ["ratelimit"])
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--component", "lockz"], "unknown component 'lockz'; the components are: autocomplete"),
        (["--user", "two words"], "is not a plain name"),
        (["--server-version", "seven"], "is not a version such as 7.2"),
    ],
)
def test_rp_acl_refuses_bad_arguments_with_exit_2_and_a_message(argv, said):
    with pytest.raises(CommandError) as refused:
        rp_acl(*argv)
    assert said in str(refused.value)
    assert refused.value.returncode == 2


def test_rp_acl_unknown_component_is_a_message_not_a_traceback():
    done = subprocess.run(
        [sys.executable, "manage.py", "rp_acl", "--component", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "the components are: autocomplete, chat," in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_printed_line_is_accepted_by_the_server_and_grants_no_more(locked_server):
    server, _admin = locked_server
    app = server.client(username="redisparts", password=PASSWORD)
    with Lock("reports", client=app, ttl=2, timeout=1):
        pass
    refusals = [app.flushdb, lambda: app.config_set("maxmemory", "1"), lambda: app.get("x")]
    for refused in refusals:
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
    with pytest.raises(redis.AuthenticationError):
        server.client().ping()  # the default user is off


def test_one_component_s_rules_refuse_another_component(redis_server_factory):
    server = redis_server_factory()
    admin = lock_out_default(
        server, rp_acl("--component", "locks", "--server-version", version_of(server))
    )
    app = server.client(username="redisparts", password=PASSWORD)
    with Lock("reports", client=app, ttl=2, timeout=1):
        pass
    with pytest.raises(redis.exceptions.NoPermissionError):
        Mailbox("bob", client=app).send("ann", "no", "rules")
    assert admin.exists("rp:mail:{bob}:box") == 0


# -- the user and password in every connection shape --------------------------------------


def users_of(admin: redis.Redis) -> set[str]:
    """The users of the server's client connections (ACL WHOAMI is not in the rules)."""
    return {entry["user"] for entry in admin.client_list()}


@pytest.mark.parametrize("shape", ["URL", "URL and OPTIONS", "CACHE"])
def test_an_acl_user_logs_in_through_each_single_server_shape(locked_server, shape):
    server, admin = locked_server
    address = f"{server.host}:{server.port}"
    login = {"username": "redisparts", "password": PASSWORD}
    connection = {
        "URL": {"URL": f"redis://redisparts:{quote(PASSWORD, safe='')}@{address}/0"},
        "URL and OPTIONS": {"URL": f"redis://{address}/0", "OPTIONS": login},
        "CACHE": {"CACHE": "acl"},
    }[shape]
    # django-redis hands CONNECTION_POOL_KWARGS to redis-py's pool.
    cache = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{address}/0",
        "OPTIONS": {"CONNECTION_POOL_KWARGS": login},
    }
    with override_settings(
        CACHES={"acl": cache}, REDISPARTS={"CONNECTIONS": {"default": connection}}
    ):
        assert Mailbox("bob").send("ann", "as", "redisparts") == 1
        assert check_servers() == []
        assert users_of(admin) == {"admin", "redisparts"}  # the default user is off
    assert admin.zcard("rp:mail:{bob}:box") == 1


def test_an_acl_user_logs_in_through_cluster_urls(tmp_path):
    with LocalCluster(tmp_path / "cluster", masters=1, replicas=0) as cluster:
        node = cluster.nodes[0]
        admin = lock_out_default(node, rp_acl("--server-version", version_of(node)))
        urls = [f"redis://redisparts:{quote(PASSWORD, safe='')}@{node.host}:{node.port}"]
        with override_settings(REDISPARTS={"CONNECTIONS": {"default": {"CLUSTER": urls}}}):
            assert Mailbox("bob").send("ann", "as", "redisparts") == 1
            assert check_servers() == []
        assert admin.zcard("rp:mail:{bob}:box") == 1
        admin.close()


def test_a_wrong_password_is_a_login_error_of_the_check(locked_server):
    server, _admin = locked_server
    url = f"redis://redisparts:wrong@{server.host}:{server.port}/0"
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": url}}):
        messages = check_servers()
    assert [message.id for message in messages] == ["redisparts.E007"]
    assert "login refused" in messages[0].msg
    assert "rp_acl" in messages[0].hint


@pytest.mark.slow
def test_an_acl_user_logs_in_through_sentinels(tmp_path):
    with SentinelSetup(tmp_path / "sentinel", replicas=1, sentinels=3) as setup:
        assert setup.master is not None
        line = rp_acl("--server-version", version_of(setup.master))
        for server in [setup.master, *setup.replicas]:
            with server.client() as admin:
                admin.execute_command(*line.split())
                admin.execute_command("ACL", "SETUSER", "redisparts", f">{PASSWORD}")
        login = {"username": "redisparts", "password": PASSWORD}
        connection = {**setup.connection(), "OPTIONS": login}
        with override_settings(REDISPARTS={"CONNECTIONS": {"default": connection}}):
            assert Mailbox("bob").send("ann", "via", "sentinels") == 1
            assert check_servers() == []
            with setup.master.client() as admin:
                assert "redisparts" in users_of(admin)
        with setup.master.client() as admin:
            assert admin.zcard("rp:mail:{bob}:box") == 1
            log = admin.acl_log()
        # Redis 6.2 logs redis-py 8's CLIENT MAINT_NOTIFICATIONS (a Redis Cloud command it
        # lacks, tried on connecting, its refusal ignored) under its container's name.
        refused = [entry["object"] for entry in log if entry["username"] == "redisparts"]
        assert set(refused) <= {"client"}
