"""The deployment files in deploy/ (issue 26 item 5: installing on a host was nowhere) name real
commands and real settings, and hold no secret: the systemd unit and the compose file run
``migrate`` then ``run``, read the token and the database URL from the environment by the names
the config reads, and take every secret from outside the file."""

from __future__ import annotations

import configparser
import re
import shlex
import tomllib
from pathlib import Path

import yaml

from cli import build_parser
from runner.redaction import looks_like_a_discord_token
from wiring import config
from wiring.config import TOKEN_ENV

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
COMMANDS = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def bot_command(line: str) -> str:
    words = shlex.split(line)
    at = words.index("bot")
    assert words[at - 1] == "-m", line
    return words[at + 1]


def test_the_systemd_unit_migrates_then_runs_with_secrets_from_an_environment_file() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(DEPLOY / "eventbot.service")
    service = unit["Service"]
    assert bot_command(service["ExecStartPre"]) == "migrate" and "migrate" in COMMANDS
    assert bot_command(service["ExecStart"]) == "run" and "run" in COMMANDS
    assert service["EnvironmentFile"].startswith("/etc/")
    assert service["Restart"] == "on-failure"
    assert TOKEN_ENV in (DEPLOY / "eventbot.service").read_text(encoding="utf-8"), "says where the token goes"


def test_the_compose_file_runs_the_bot_beside_mariadb_with_secrets_from_the_environment() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    bot = compose["services"]["eventbot"]
    assert bot["depends_on"]["mariadb"]["condition"] == "service_healthy"
    assert "healthcheck" in compose["services"]["mariadb"]
    environment = bot["environment"]
    assert set(environment) == {TOKEN_ENV, "EVENTBOT_DATABASE_URL"}
    # The name is one the config reads: the URL compose builds is the one the bot would use.
    url = environment["EVENTBOT_DATABASE_URL"].replace("${MARIADB_PASSWORD}", "pw")
    assert config.load(None, {"EVENTBOT_DATABASE_URL": url}).database_url == url
    assert url.startswith("mysql+asyncmy://eventbot:pw@mariadb:")
    assert compose["services"]["mariadb"]["environment"]["MARIADB_USER"] == "eventbot"
    for service in compose["services"].values():
        for name, value in service.get("environment", {}).items():
            if re.search("PASSWORD|TOKEN", name):
                assert str(value).startswith("${"), f"{name} is a secret: it comes from the environment"


def test_the_container_migrates_then_runs() -> None:
    text = (DEPLOY / "Containerfile").read_text(encoding="utf-8")
    command = next(line for line in text.splitlines() if line.startswith("CMD"))
    assert "python -m bot migrate" in command and "exec python -m bot run" in command
    assert "USER eventbot" in text, "not as root"


def test_the_container_image_holds_every_package_pip_installs() -> None:
    # Docker is not run by the tests: a package added to pyproject.toml but not copied into the
    # image would only show as a failed build on someone's server.
    with (DEPLOY.parent / "pyproject.toml").open("rb") as file:
        include = tomllib.load(file)["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = {
        line.split()[1]
        for line in (DEPLOY / "Containerfile").read_text().splitlines()
        if line.startswith("COPY ")
    }
    assert {pattern.rstrip("*") for pattern in include} <= copied


def test_no_deploy_file_holds_a_secret() -> None:
    for path in DEPLOY.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not looks_like_a_discord_token(text), path
        # A database URL in these files takes its password from the environment, if it has one.
        for password in re.findall(r"://[^:/@\s]+:([^@\s]+)@", text):
            assert password.startswith(("${", "...")), f"{path}: a password written in the file"
