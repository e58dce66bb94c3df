"""The one door's rulings on a round of tool calls, before anything of the round is stored:
each read is screened before it runs (`screen_reads`), each call waiting for approval is
decided before it becomes a proposal (`decide`), and a denial is told to the model in words
it will not retry on (`denied`). `bot.conversation.tool_round` records the rulings with the
round's messages."""

from __future__ import annotations

from typing import Any, Literal

from bot.approvals import grants
from bot.approvals.questions import turn_key
from bot.approvals.ruling import Question, Ruling, Step
from bot.conversation.tool_calls import ASK, Prepared, Screen
from bot.db.models import Conversation
from bot.db.session import Database
from bot.policy.gate import counts
from bot.policy.one_door import OneDoor
from bot.provenance import Source
from bot.tools.registry import Tool


def screen_reads(
    door: OneDoor | None,
    conversation: Conversation,
    requester: str,
    where: str | None,
    followed: tuple[Source, ...],
    refused: list[tuple[Question, Ruling]],
) -> Screen | None:
    """The one door on each read before it runs: deny (the model is told; the decision is
    added to `refused` to be recorded), allow (it runs), or ask or a grant: it becomes a
    proposal, decided again with the round's writes (`decide`)."""
    if door is None:
        return None

    async def screen(
        tool: Tool[Any], arguments: dict[str, Any]
    ) -> dict[str, Any] | Literal["ask"] | None:
        question = Question(
            team_id=conversation.team_id,
            tool=tool.name,
            pack=tool.pack,
            arguments=arguments,
            channel=conversation.channel_id,
            thread_ts=conversation.thread_ts or None,
            requester=requester,
            audience=where,
            sources=followed,
        )
        ruling = await door(question, Step.PROPOSE)
        if ruling.outcome == "deny":
            refused.append((question, ruling))
            return denied(ruling)
        return None if ruling.outcome == "allow" else ASK

    return screen


def denied(ruling: Ruling) -> dict[str, Any]:
    """What the model is told of a denied call (a refusal Slack caused is not final)."""
    reason = ruling.reason or ruling.rule or "no rule allows it"
    if ruling.transient:
        return {"status": "error", "error": f"{reason}. Nothing was done."}
    return {"status": "denied", "reason": f"forbidden by policy: {reason}, do not retry"}


async def decide(
    door: OneDoor | None,
    db: Database,
    prepared: list[Prepared],
    conversation: Conversation,
    requester: str,
    where: str | None,
    sources: tuple[Source, ...] = (),
) -> dict[str, tuple[Question, Ruling]]:
    """The one door's answer on each write call waiting for approval, by call id; a call's
    counts include the calls before it in the same round."""
    if door is None:
        return {}
    waiting = [p for p in prepared if p.needs_approval and p.tool and p.arguments is not None]
    thread_ts = conversation.thread_ts or None
    asked: list[tuple[str, Question]] = []
    earlier: dict[str, int] = {}
    async with db.reading() as session:
        turn = None if thread_ts else await turn_key(session, conversation.id)
        for p in waiting:
            assert p.tool is not None
            assert p.preview is not None
            thread, today = (0, 0)  # reads keep no counts
            if p.tool.requires_approval:
                thread, today = await counts(
                    session, p.tool.name, conversation.channel_id, thread_ts, requester
                )
            before = earlier.get(p.tool.name, 0)
            earlier[p.tool.name] = before + 1
            question = Question(
                team_id=conversation.team_id,
                tool=p.tool.name,
                pack=p.tool.pack,
                arguments=p.arguments or {},
                channel=conversation.channel_id,
                thread_ts=thread_ts,
                requester=requester,
                audience=where,
                definition=grants.definition_of(p.tool, p.preview.pin),
                turn=turn,
                counts=(thread + before, today + before),
                sources=sources,
            )
            asked.append((p.call.id, question))
    return {call_id: (question, await door(question, Step.PROPOSE)) for call_id, question in asked}
