"""An MCP write's outcome is reported as it happened, through a real MCP server: a blank answer
is a success, a time-out is never called a refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack
from tests.harness import stop_bot
from tests.mcp_helpers import calls, stdio_server
from tests.test_approvals_flow import call, card_text, proposals, tool_results
from tests.test_mcp import mcp_bot


@pytest.mark.parametrize("answer", ["empty", "blank"])
async def test_a_write_answered_with_blank_text_succeeded_and_is_not_written_again(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path, answer: str
) -> None:
    log = tmp_path / "notes.jsonl"
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": stdio_server(log)})
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__pin_note", {"title": "Plan", "answer": answer})]),
            Script(text="Pinned."),
        )
        await bot.mention("C1", "pin the plan", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        (proposal,) = await proposals(bot)
        assert proposal.state.value == "succeeded", proposal.error
        assert proposal.error is None
        assert "list index" not in card_text(fake_slack.cards("C1")[0])
        (result,) = tool_results(fake_model)
        assert result["status"] == "succeeded"
        # A second click on the settled card writes nothing more.
        await bot.click_value(proposal.id, cards.APPROVE, "UALICE", "C1", fake_slack)
        await bot.idle()
        assert len(calls(log, "pin_note")) == 1
    finally:
        await stop_bot(bot)


async def test_a_write_whose_answer_times_out_is_not_called_refused(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    server = stdio_server(log, timeout_seconds=1)
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": server})
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__publish", {"title": "Plan", "seconds": 30})]),
            Script(text="It may have been published."),
        )
        await bot.mention("C1", "publish the plan", fake_slack)
        await bot.idle()
        (card,) = fake_slack.cards("C1")
        await bot.click(card, cards.APPROVE, "UALICE", "C1")
        await bot.idle()
        assert len(calls(log, "publish")) == 1  # the call reached the server
        (proposal,) = await proposals(bot)
        error = proposal.error or ""
        assert "refused" not in error
        assert "did not answer within 1 s" in error
        assert "may have run" in error
        assert "refused" not in card_text(fake_slack.cards("C1")[0])
    finally:
        await stop_bot(bot)


async def test_a_read_that_times_out_is_not_called_refused(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, tmp_path: Path
) -> None:
    server = stdio_server(tmp_path / "n.jsonl", read_only_tools=["stall"], timeout_seconds=1)
    bot = await mcp_bot(fake_slack, fake_model, sqlite_url, {"notes": server})
    try:
        fake_model.script(
            Script(tool_calls=[call("notes__stall", {"seconds": 30})]), Script(text="Slow.")
        )
        await bot.mention("C1", "think", fake_slack)
        await bot.idle()
        (result,) = tool_results(fake_model)
        assert result["status"] == "error"
        assert "refused" not in result["error"]
        assert "the MCP server notes did not answer within 1 s" in result["error"]
    finally:
        await stop_bot(bot)
