"""The config is read as the command line reads it, so these tests share the command line's
fixtures: each test isolated in an empty directory and environment, ``cli`` to run a command."""

from tests.cli.conftest import cli, isolated

__all__ = ["cli", "isolated"]
