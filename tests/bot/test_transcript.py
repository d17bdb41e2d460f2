"""One whole event as staff, the GM and the players see it, with simcord's transcript of what
the bot did. Run with ``-s`` to read it:

    .venv/bin/python -m pytest tests/bot/test_transcript.py -s -q
"""

from __future__ import annotations

import discord

from tests.bot.conftest import Sim

SHOWN = (
    "INTERACTION_CREATE",
    "MESSAGE_CREATE",
    "MESSAGE_UPDATE",
    "POST /interactions",
    "POST /webhooks",
    "PATCH",
)


def seen_by(sim: Sim, who: str, channel_name: str) -> list[str]:
    viewer = {"staff": sim.mod, "gm": sim.gm, "player": sim.player}[who]
    lines = []
    for message in getattr(sim, channel_name).history(viewer=viewer):
        text = message.content
        for embed in message.embeds:
            text += f" [embed: {embed.title}" + (f" — {embed.description}" if embed.description else "") + "]"
        labels = [
            f"({'x' if b.disabled else ' '}) {b.label}"
            for row in message.components
            for b in row.children  # type: ignore[attr-defined]
        ]
        flag = " (only you can see this)" if message.flags.ephemeral else ""
        lines.append(f"  #{channel_name}{flag}: {text} {' '.join(labels)}".rstrip())
    return lines


async def test_a_whole_event_as_staff_gm_and_players_see_it(sim: Sim) -> None:
    start = await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue = sim.gm_cues.last_message
    confirm = await sim.gm.click(cue, label="Confirm")
    await sim.env.advance_time(61)
    status = await sim.mod.slash(sim.staff, "event status", run=1)

    assert start.response.content == "✅ started Harbour Raid as run 1"
    assert confirm.acknowledged
    assert [m.content for m in sim.announcements.history(viewer=sim.player)] == [
        f"{sim.roles['players'].mention} @everyone The raid on the harbour begins! Meet at the docks.",
        "The harbour is ours!",
    ]
    assert (await sim.run(1)).status == "completed"
    # The staff log's lines (the run's live message, an embed, shares the channel), each with a
    # link to a real message of the run (tests/bot/test_staff_log.py pins which).
    log = [m.content for m in sim.staff_log.history() if not m.embeds]
    assert [line.split(" · [")[0] for line in log] == [
        f"▶️ **Harbour Raid** · run 1 started by {sim.mod.mention}",
        f"☑️ **Harbour Raid** · run 1: step 2 (Open the gates) confirmed by {sim.gm.mention}",
        "✅ **Harbour Raid** · run 1 completed",
    ]
    assert f"[cue](https://discord.com/channels/{sim.guild.id}/{cue.channel.id}/{cue.id})" in log[1]
    embed: discord.Embed = status.response.embeds[0]
    assert embed.description.startswith("Status: **completed** · Health: **ok**")

    transcript = [line for line in sim.env.transcript().splitlines() if any(k in line for k in SHOWN)]
    setup = next(i for i, line in enumerate(transcript) if "INTERACTION_CREATE" in line)
    print("\n=== simcord transcript (from the first interaction) ===")
    print("\n".join(transcript[setup:]))
    print("\n=== what each person saw ===")
    for who, channels in {
        "staff": ("staff", "staff_log"),
        "gm": ("gm_cues",),
        "player": ("announcements",),
    }.items():
        print(f"{who}:")
        for channel in channels:
            print("\n".join(seen_by(sim, who, channel)))
    print(f"staff: /event status 1 -> {embed.title}: {embed.description!r}")
    for field in embed.fields:
        print(f"  {field.name}: {field.value!r}")
