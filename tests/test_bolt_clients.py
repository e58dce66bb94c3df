"""What Bolt hands a listener is under the workspace's budgets (issue 28): the `client` and the
`say` Bolt makes for each request go through the bot's budgeted client, so every call they
make takes a slot in its method's window, like the bot's own calls. Bolt builds a plain
`AsyncWebClient` per request; a listener calling Slack through it would go around every
budget (and around the 429 reporting that pauses the others)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.say.async_say import AsyncSay

from bot.slack import cards
from bot.slack.budgets import WorkspaceBudgets
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot
from tests.test_approvals_flow import proposals
from tests.test_card_is_the_write import propose_task


async def free_slots(budgets: WorkspaceBudgets | None, method: str) -> int:
    """Slots left in the method's own window (the workspace's, not a channel's)."""
    assert budgets is not None
    ((_, window),) = budgets.calls.windows_of(method, None)
    return await window.free()


async def test_a_listeners_client_and_say_take_their_slots_in_the_budget(
    bot: RunningBot, fake_slack: FakeSlack
) -> None:
    """A listener added to the bot's Bolt app (as any future one would be) calls Slack with the
    `client` and `say` Bolt gives it: each call Slack receives is counted in the method's
    window, and none is made around it."""

    async def probe(ack: Any, say: AsyncSay, client: Any, command: dict[str, Any]) -> None:
        await ack()
        await say("said through say")
        await client.chat_postMessage(channel=command["channel_id"], text="posted via client")

    bot.countersign.bolt.command("/probe")(probe)
    budgets = bot.countersign.budgets
    received = len(fake_slack.calls_to("chat.postMessage"))
    before = await free_slots(budgets, "chat.postMessage")
    status, _, _ = await bot.command(fake_slack, "/probe", "", "UALICE")
    assert status == 200
    await bot.idle()
    posts = fake_slack.calls_to("chat.postMessage")[received:]
    assert {p.args.get("text") for p in posts} >= {"said through say", "posted via client"}
    assert before - await free_slots(budgets, "chat.postMessage") == len(posts)


async def test_the_edit_buttons_modal_is_opened_under_the_budget(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """The bot's own listeners that call Slack through Bolt's `client` (Edit, Decline and Ask
    for changes open their modal with it): the modal's views.open takes its slot."""
    card = await propose_task(bot, fake_slack, fake_model)
    budgets = bot.countersign.budgets
    before = await free_slots(budgets, "views.open")
    await bot.click(card, cards.EDIT, "UALICE", "C1")
    await bot.idle()
    assert len(fake_slack.views) == 1  # the modal opened
    assert len(fake_slack.calls_to("views.open")) == 1
    assert before - await free_slots(budgets, "views.open") == 1
    (proposal,) = await proposals(bot)
    assert proposal.revision == 1  # opening the form changed nothing
