"""What the parts of the bot need of one another, as protocols, so none imports ``bot.app``.

The bot (``bot.app.EventBot``) satisfies each; the parts name only what they use. A command or a
button that Discord rebuilds from its custom id has only the interaction in hand, so it reaches
the bot through ``interaction.client``, checked against ``Served`` (``served``); a loop is
handed its collaborators (``bot.background.Background``) when the bot builds it.

Type-only imports: this module imports nothing of the bot at run time, so any module may
import it without a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import discord

if TYPE_CHECKING:
    from bot.claims import InteractionGate
    from bot.cogs.events_tab._loop import Mirror
    from bot.cogs.publishing._drafts import Drafts
    from bot.discord_delivery import DiscordDelivery
    from bot.invalid_requests import InvalidRequests
    from wiring.config import Config
    from wiring.services import Services


@runtime_checkable
class Served(Protocol):
    """What a command, an autocomplete or a button needs of the bot it reached: the config, the
    engine's services, the claims on interactions, this process's publish previews, the
    Events-tab mirror (whose trouble ``/event status`` and ``/event health`` show) and the count of
    refused requests. (What a command changes wakes whoever follows it through the runner's bus.)"""

    @property
    def config(self) -> Config: ...

    @property
    def services(self) -> Services[DiscordDelivery]: ...

    @property
    def interaction_gate(self) -> InteractionGate: ...

    @property
    def publish_drafts(self) -> Drafts: ...

    @property
    def mirror(self) -> Mirror: ...

    @property
    def invalid_requests(self) -> InvalidRequests: ...


def served(interaction: discord.Interaction) -> Served:
    """The bot an interaction reached. A button pressed after a restart is rebuilt by discord.py
    from its custom id with only the interaction in hand, so this is how a ``DynamicItem`` finds
    what it needs."""
    return served_by(interaction.client)


def served_by(client: discord.Client) -> Served:
    """``client`` as what the commands and buttons need (an extension's ``setup`` is handed the
    bot as a plain ``commands.Bot``)."""
    if not isinstance(client, Served):
        raise TypeError(f"{type(client).__name__} is not an EventBot; its components belong to one")
    return client
