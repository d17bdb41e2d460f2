"""``/event create`` with two bot processes on one token (issue 28, item 1; the harness is
``tests/bot/two_processes.py``): the form's submit carries its state in its custom id, so
whichever process claims it fills the template in, answers once, and holds the preview whose
Publish stores one version."""

from __future__ import annotations

from tests.bot.conftest import make_config
from tests.bot.test_publish import versions
from tests.bot.two_processes import PUBLISHERS, Pair, Timing, handled_once, last_answer


async def test_a_create_form_sent_to_both_processes_is_answered_once_and_publishes_once(
    pair: Pair, timing: Timing
) -> None:
    sim = pair.sim
    sim.config = make_config(sim.guild, sim.channels, sim.roles, permissions=PUBLISHERS)
    a = await sim.start_bot()
    b = await pair.join("process-b")
    for trial, (opener, submitter) in enumerate(((a, b), (b, a), (a, a), (b, b))):
        pair.hears_first(opener)
        shown = await sim.mod.slash(sim.staff, "event create", template="announcement")
        assert shown.modal is not None
        await handled_once(pair, timing, (a, b))
        pair.hears_first(submitter)
        key = f"market-{trial}"
        sent = await sim.mod.submit_modal(
            shown, {"title": f"Market {trial}", "when": "in 2h", "channel": "announcements", "key": key}
        )
        maker, _ = await handled_once(pair, timing, (a, b))
        preview = last_answer(sent)
        assert preview.content.count("🆕") == 1
        # The press is heard first by the process that does not hold the preview.
        pair.hears_first(b if maker is a else a)
        pressed = await sim.mod.click(preview, label="Publish")
        assert pressed.acknowledged
        presser, _ = await handled_once(pair, timing, (a, b))
        assert presser is maker, "the process holding the preview published it"
        assert [v.version for v in await versions(sim.engine, key)] == [1]
