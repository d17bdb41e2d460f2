"""The example plugin is driven through the command line, as a user who installed it would."""

from tests.cli.conftest import cli, isolated

__all__ = ["cli", "isolated"]
