"""What the load benchmark sends and checks: seeded proposals with cards, signed events and
clicks, and when a conversation's reply is complete."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from bot.approvals.service import ApprovalsService
from bot.db.models import Proposal
from bot.db.session import Database
from bot.slack import cards
from bot.tools.packs.tasks import CreateTask
from bot.tools.registry import Change, Preview
from tests.fakes.slack import BOT_ID, BOT_USER_ID, FakeSlack, StoredMessage, event_body
from tests.harness import SlackFront

CURSOR = "▍"


def reply_done(slack: FakeSlack, channel: str, count: int) -> bool:
    replies = [m for m in slack.bot_messages(channel) if not m.blocks]
    return len(replies) >= count and all(
        CURSOR not in m.text and not m.text.startswith("_Thinking") for m in replies
    )


async def seed(db: Database, slack: FakeSlack, proposals: int) -> list[int]:
    """Proposals waiting for a click, each with its card in the fake Slack (no paused turn)."""
    service = ApprovalsService(db)
    ids = []
    async with db.transaction() as session:
        for i in range(proposals):
            arguments = CreateTask(title=f"load {i}").model_dump(mode="json")
            proposal = await service.propose(
                session,
                team_id="T0TEST",
                conversation_id=None,
                assistant_message_id=None,
                result_message_id=None,
                tool_call_id=f"load-{i}",
                tool_name="create_task",
                arguments=arguments,
                preview=Preview(f"Create task 'load {i}'", (Change("title", None, f"load {i}"),)),
                requester="UALICE",
                channel_id="CLOAD",
                thread_ts=None,
                expires_in=timedelta(hours=2),
            )
            ts = f"1800000000.{i:06d}"
            slack.channels["CLOAD"].append(
                StoredMessage(ts, "card", BOT_USER_ID, BOT_ID, None, blocks=[{"type": "divider"}])
            )
            await session.flush()
            await session.execute(
                update(Proposal)
                .where(Proposal.id == proposal.id)
                .values(card_channel="CLOAD", card_ts=ts, card_version=proposal.version)
            )
            ids.append(proposal.id)
    return ids


def signed_event(front: SlackFront, event: dict[str, Any]) -> object:
    body = json.dumps(event_body(event, front.next_event_id())).encode()
    return front.post_raw(body, front.signed_headers(body))


def click(front: SlackFront, proposal_id: int) -> object:
    return front._interact(
        {
            "type": "block_actions",
            "user": {"id": "UALICE", "team_id": "T0TEST"},
            "trigger_id": f"t-{proposal_id}",
            "channel": {"id": "CLOAD"},
            "container": {"type": "message", "channel_id": "CLOAD"},
            "message": {"ts": f"1800000000.{proposal_id:06d}"},
            "actions": [
                {
                    "type": "button",
                    "action_id": cards.APPROVE,
                    "block_id": "b",
                    "value": f"{proposal_id}:1",
                    "action_ts": "1.0",
                }
            ],
        }
    )
