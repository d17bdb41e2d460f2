"""The rehearsal is driven as the command line drives it, so it shares the command line's
fixtures: each test isolated in an empty directory and environment, ``cli`` to run a command."""

from tests.cli.conftest import cli, isolated

__all__ = ["cli", "isolated"]
