"""Discord's message limits, checked when a definition is validated rather than discovered when
a message is refused in the middle of a live event."""

from __future__ import annotations

CONTENT_MAX = 2000
EMBED_TITLE_MAX = 256
EMBED_DESCRIPTION_MAX = 4096
EMBED_FIELDS_MAX = 25
EMBED_FIELD_NAME_MAX = 256
EMBED_FIELD_VALUE_MAX = 1024
EMBED_FOOTER_MAX = 2048
EMBED_TOTAL_MAX = 6000
NONCE_MAX = 25
# A role mention ``<@&{snowflake}> `` prepended to the content for a ping.
ROLE_MENTION_RESERVE = 32
# ``{scope}`` in event text is replaced by the run's scope, at most this long (the column's size).
SCOPE_MAX = 190
# Discord's most user ids one message's ``allowed_mentions.users`` may name.
ALLOWED_USERS_MAX = 100
