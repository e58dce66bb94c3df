"""The DM welcome is posted at most once per person, even when Slack posted it but its answer
was lost on the way back (the connection dropped): the bot cannot tell it was not posted, so it
neither retries the post nor posts it again at the next open."""

from __future__ import annotations

from tests.fakes.slack import FakeSlack, wait_until
from tests.harness import RunningBot
from tests.test_dm_welcome import open_dm, welcomes


async def test_a_welcome_whose_answer_was_lost_is_not_posted_again(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    fake_slack.lose_answers["chat.postMessage"] = 1
    await open_dm(bot, "UALICE")
    await wait_until(lambda: bool(fake_slack.suggested_prompts))
    await bot.idle()
    assert len(welcomes(fake_slack, "UALICE")) == 1  # Slack has it
    await open_dm(bot, "UALICE")
    await wait_until(lambda: len(fake_slack.suggested_prompts) >= 1)
    await bot.idle()
    assert len(welcomes(fake_slack, "UALICE")) == 1
