"""The one redactor: what counts as a secret in text, and what is shown in its place.

Every place that shows text which might carry a secret hides it with a ``Redactor``: the log
lines (``cli.logs``), the configuration's problems (``wiring.config``), the CLI's one-line
errors, and every database URL printed or put in a message (``masked_url``). The rules are the
same everywhere:

* the secrets it was given (the bot token, the database password), wherever they stand, when at
  least ``SHORTEST_SECRET`` characters long: replacing a three-letter password everywhere would
  turn every line into noise without hiding anything;
* a URL's password (``scheme://user:password@host``), whatever its length;
* anything shaped like a Discord bot token (three base64url parts joined by dots).

Text that repeats what a person typed into a configuration also hides long unbroken runs of
base64 characters (``long_runs``), since a pasted secret there may have any shape; log lines do
not, because they carry digests and ids of that length. What stands in a secret's place is the
reader's: ``***`` in a log line or an error, words in a configuration problem.

Every pattern starts only where a run of its own characters starts (a lookbehind, or the fixed
``://``), so a long value is scanned in time linear in its length, not tried from every position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import make_url

MASK = "***"
SHORTEST_SECRET = 4

_DISCORD_TOKEN = r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}"
_LONG_RUN = r"(?<![A-Za-z0-9_\-+/=])[A-Za-z0-9_\-+/=]{48,}"
# The user part and the password, after "://". (No "/" in the password: "http://host:8080/users/@me"
# is a port and a path. A password with a raw "/" is still hidden where it is a secret the
# redactor was given, and ``masked_url`` hides it in a URL known to be one.)
_URL_PASSWORD = re.compile(r"(?P<before>://[^:/@\s]*:)(?P<password>[^@\s/]+)@")
_SHAPES = re.compile(_DISCORD_TOKEN)
_SHAPES_AND_LONG_RUNS = re.compile(f"{_DISCORD_TOKEN}|{_LONG_RUN}")


class Redactor:
    """Hides the secrets it was given, URL passwords and token-shaped values in any text."""

    def __init__(
        self, secrets: Iterable[str | None] = (), *, mask: str = MASK, long_runs: bool = False
    ) -> None:
        self.mask = mask
        self._shapes = _SHAPES_AND_LONG_RUNS if long_runs else _SHAPES
        self._secrets: set[str] = set()
        for secret in secrets:
            self.keep(secret)

    def keep(self, secret: str | None) -> None:
        """Hide ``secret`` too from now on (a password read once the config file is)."""
        if secret and len(secret) >= SHORTEST_SECRET:
            self._secrets.add(secret)

    def redact(self, text: str) -> str:
        # Longest first: a secret that holds another is hidden whole, not around the shorter one.
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, self.mask)
        text = _URL_PASSWORD.sub(self._hide_password, text)
        return self._shapes.sub(self.mask, text)

    def _hide_password(self, match: re.Match[str]) -> str:
        # One hidden already (``masked_url``'s, SQLAlchemy's) is left as it reads.
        if match["password"] == MASK:
            return match[0]
        return f"{match['before']}{self.mask}@"

    def hides_anything_in(self, text: str) -> bool:
        return self.redact(text) != text


def looks_like_a_discord_token(text: str) -> bool:
    """Whether ``text`` holds a value shaped like a Discord bot token (a pasted one, say)."""
    return _SHAPES.search(text) is not None


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, even when it does not parse as a URL."""
    # With a second "@" the parser may take part of the password for the host; mask by hand.
    if url.count("@") < 2:
        try:
            return make_url(url).render_as_string(hide_password=True)
        except (ValueError, TypeError, sa.exc.ArgumentError):
            pass
    scheme, separator, rest = url.partition("://")
    if not separator:
        return "<not a URL>"
    # Credentials end at the last "@": a password may hold "/" or "@" itself, and masking a
    # little too much is better than showing a little of it.
    if "@" in rest:
        credentials, _, rest = rest.rpartition("@")
        user = credentials.partition(":")[0]
        rest = f"{user}:{MASK}@{rest}" if ":" in credentials else f"{user}@{rest}"
    return f"{scheme}://{rest}"


def password_of(url: str | None) -> str | None:
    """The password in database URL ``url``, to be kept as a secret (``None`` if it has none)."""
    if not url:
        return None
    try:
        return make_url(url).password or None
    except Exception:  # not a URL: the pattern for a URL's password still applies
        return None
