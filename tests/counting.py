"""A real Redis client that records the commands it sends (no mock: it talks to the server)."""

import redis


class CountingRedis(redis.Redis):
    """Record the name of every command sent, e.g. to prove a waiter does not poll."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args, **options):
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **options)
