"""One streamed model call of a turn, metered by the spend gate, and the pause when a budget
has no room for it. A mixin of `Conversations` (bot/conversation/turn.py), which owns the state
named below."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.conversation.memory import Memory
from bot.conversation.notes import budget_note, failure_note
from bot.conversation.private_reply import TurnAudience, deliver_held
from bot.conversation.spending import SpendGate, TurnRun
from bot.conversation.tool_round import ActionDesk, Once
from bot.conversation.turn_settings import TurnSettings
from bot.db.histories import History
from bot.db.models import BudgetPause, Conversation
from bot.db.session import Database
from bot.llm import Finished, LLMError, TextDelta
from bot.membership import reach_of
from bot.metrics import TURNS
from bot.poster import NOTHING_PRIVATE, poster_of
from bot.provenance import DATA_NOTE
from bot.slack.budget_card import pause_card, pause_text
from bot.slack.streamer import ReplyStream
from bot.spend.standing import Refused, Standing

log = logging.getLogger(__name__)


class ModelRounds:
    db: Database
    slack: AsyncWebClient
    settings: TurnSettings
    desk: ActionDesk | None
    memory: Memory
    spending: SpendGate

    def _packs(self) -> frozenset[str]:
        """The packs of the tools offered to the model (pack budgets apply to them)."""
        if self.desk is None:
            return frozenset()
        return frozenset(t.pack for t in self.desk.registry.offered() if t.pack)

    async def _model_round(
        self,
        conversation: Conversation,
        stream: ReplyStream,
        seen: TurnAudience,
        requester: str,
        run: TurnRun,
        history: History | None = None,
    ) -> Finished | Refused | None:
        """One streamed model call; None if the model failed (the reply already says so), a
        refusal if a budget has no room for it (nothing was asked). The prompt holds only what
        `requester` may read; text from a prompt whose data is not for everyone in the thread
        is held back for them (`seen.held`)."""
        tools = self.desk.registry.schemas() if self.desk and len(self.desk.registry) else None
        notices = self.desk.registry.notices() if self.desk else []
        system = "\n\n".join([self.settings.system_prompt, DATA_NOTE, *notices])
        finished: Finished | None = None
        reach = reach_of(self.slack)
        held, meter = None, None
        try:
            prompt = await self.memory.prompt_for(
                conversation.id,
                system,
                tools,
                self.settings.history_window,
                lambda audience: reach.may_read(requester, audience, seen.place),
                requester,
                history,
            )
            held, meter = await self.spending.hold(
                conversation, requester, run, self._packs(), prompt.messages, tools
            )
            if isinstance(held, Refused):
                return held
            await seen.prompt_held(self.slack, prompt.audience, prompt.sources)
            if not seen.private:  # the thread may read it: the reply shows what it draws on
                stream.carry(prompt.audience)
            async for event in self.memory.images.stream(run.llm, prompt.messages, tools):
                if meter is not None:
                    meter.saw(event)
                if isinstance(event, TextDelta):
                    if seen.private:
                        seen.held.append(event.text)
                    else:
                        stream.append(event.text)
                else:
                    finished = event
        except LLMError as exc:
            log.warning("model failed in conversation %s: %s", conversation.id, exc)
            TURNS.labels(outcome="failed").inc()
            await deliver_held(self.slack, stream, conversation.channel_id, requester, seen)
            await stream.finish(failure_note(exc.user_message))
            return None
        finally:
            await self.spending.settle(held, meter)
        return finished

    async def _pause_at_budget(
        self,
        conversation: Conversation,
        stream: ReplyStream,
        requester: str,
        run: TurnRun,
        refused: Refused,
        hook: Once,
        seen: TurnAudience,
    ) -> None:
        """The turn stops before its model call, state intact: the pause is stored (with the
        resume request's `hook`, so a resumed turn that pauses again is done), the live reply
        ends with a plain note, and the thread gets the card with the ways on."""
        standing = refused.standing

        async def store(session: AsyncSession) -> int:
            pause = BudgetPause(
                team_id=conversation.team_id,
                conversation_id=conversation.id,
                requester=requester,
                channel_id=conversation.channel_id,
                thread_ts=stream.thread_ts,
                turn_key=run.turn_key or f"conversation:{conversation.id}",
                budget=standing.name,
                window_key=standing.window_key,
                resets_at=standing.resets_at,
                state="paused",
            )
            session.add(pause)
            await session.flush()
            return pause.id

        if hook.pending:  # a resume's hook runs once: in a transaction of this pause's own
            async with self.db.transaction() as session:
                pause_id = await store(session)
                await hook(session)
        else:  # with other turns' writes: 40 turns pausing at once queued 40 transactions
            pause_id = await self.db.group.run(store)
        await deliver_held(self.slack, stream, conversation.channel_id, requester, seen)
        stream.paused = True
        TURNS.labels(outcome="budget").inc()
        card = pause_card(standing, pause_id, requester)
        ts = await self._reply_is_card(stream, standing, card)
        if ts is None:  # the reply showed words (or its card did not land): a card of its own
            try:
                posted = await poster_of(self.slack).post(
                    conversation.channel_id,
                    pause_text(standing),
                    carries=NOTHING_PRIVATE,
                    thread_ts=stream.thread_ts,
                    blocks=card,
                    reader=requester if conversation.channel_id.startswith("D") else None,
                )
            except Exception as exc:  # the pause stands; the note in the reply says why
                log.warning("could not post the pause card of %s: %s", pause_id, exc)
                return
            ts = posted.get("ts") if isinstance(posted.get("ts"), str) else None
        if ts is not None:  # with other pauses' cards (`Database.group`)
            await self.db.group.run(
                lambda session: session.execute(
                    update(BudgetPause).where(BudgetPause.id == pause_id).values(card_ts=ts)
                )
            )

    @staticmethod
    async def _reply_is_card(
        stream: ReplyStream, standing: Standing, card: list[dict[str, Any]]
    ) -> str | None:
        """End the reply. One that showed no words becomes the pause card itself (its final
        edit, or its stream's stop, carries the card's text and buttons: one Slack call, not
        an edit and a post); the message's ts if the card landed on it. One that showed
        words ends with a note pointing at the card below it, so that the card's later edits
        (a choice, a raise) never replace the reply's words."""
        if stream.source.strip() or stream.withheld:
            await stream.finish(budget_note(standing.name))
            return None
        stream.closing_blocks = card[1:]  # under the text: whose request waits, the buttons
        await stream.finish(pause_text(standing))
        if stream.closed_on is None:  # the blocks did not land: the text says what happened
            return None
        return stream.closed_on
