"""Stopping a turn on the proposals' side: the turn is marked stopped (so nothing of it ever
resumes) and its proposals that nobody decided are withdrawn, in one transaction. Approved and
executing proposals are left alone: a write already under way finishes and is recorded.

A Stop is journalled before it cancels anything and marked done once its proposals are
withdrawn; recovery completes the Stops a crash left open (`open_stops`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from bot.approvals.errors import AlreadyHandled
from bot.approvals.ledger import STOPPED, Ledger
from bot.approvals.machine import SETTLED, Event, State
from bot.db.audit_chain import lock_head
from bot.db.models import Proposal, ResumeRequest, StopEntry, utcnow


@dataclass
class OpenTurn:
    """A paused turn with proposals not settled yet: who asked, and what still waits."""

    assistant_message_id: int
    conversation_id: int
    requester: str
    undecided: list[Proposal] = field(default_factory=list)


class Withdrawals(Ledger):
    async def journal_stop(self, team_id: str, channel_id: str, thread_ts: str, user: str) -> int:
        """Record a Stop before anything of it is done; returns its journal id."""
        async with self.db.transaction() as session:
            entry = StopEntry(
                team_id=team_id, channel_id=channel_id, thread_ts=thread_ts, user_id=user
            )
            session.add(entry)
            await session.flush()
            return entry.id

    async def stop_done(self, entry_id: int) -> None:
        async with self.db.transaction() as session:
            await session.execute(
                update(StopEntry).where(StopEntry.id == entry_id).values(done_at=utcnow())
            )

    async def open_stops(self, older_than: timedelta) -> list[StopEntry]:
        """Journalled Stops not done after `older_than` (their handler died on the way)."""
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(StopEntry)
                .where(StopEntry.done_at.is_(None), StopEntry.created_at <= utcnow() - older_than)
                .order_by(StopEntry.id)
            )
            return list(rows.all())

    async def open_turns(
        self,
        team_id: str,
        channel_id: str,
        thread_ts: str,
        made_before: datetime | None = None,
    ) -> list[OpenTurn]:
        """The thread's turns that still have proposals in flight, oldest first (only
        proposals made before `made_before`, if given)."""
        async with self.db.transaction() as session:
            rows = await session.scalars(
                select(Proposal)
                .where(
                    Proposal.team_id == team_id,
                    Proposal.channel_id == channel_id,
                    Proposal.thread_ts == thread_ts,
                    Proposal.state.not_in(list(SETTLED)),
                    Proposal.assistant_message_id.is_not(None),
                    Proposal.conversation_id.is_not(None),
                    *([Proposal.created_at <= made_before] if made_before else []),
                )
                .order_by(Proposal.id)
            )
            turns: dict[int, OpenTurn] = {}
            for proposal in rows.all():
                assert proposal.assistant_message_id is not None
                assert proposal.conversation_id is not None
                turn = turns.setdefault(
                    proposal.assistant_message_id,
                    OpenTurn(
                        proposal.assistant_message_id,
                        proposal.conversation_id,
                        proposal.requester,
                    ),
                )
                if State(proposal.state) is State.PROPOSED:
                    turn.undecided.append(proposal)
            return list(turns.values())

    async def stop_turn(self, turn: OpenTurn, user: str) -> list[Proposal]:
        """Mark `turn` stopped by `user` and withdraw its undecided proposals; returns them.
        A proposal decided meanwhile stays as decided (the compare-and-set skips it)."""
        withdrawn: list[Proposal] = []
        async with self.db.transaction() as session:
            try:
                async with session.begin_nested():
                    session.add(
                        ResumeRequest(
                            conversation_id=turn.conversation_id,
                            assistant_message_id=turn.assistant_message_id,
                            kind=STOPPED,
                            claimed_by=user,
                            done_at=utcnow(),
                        )
                    )
            except IntegrityError:
                pass  # stopped already (another replica handled the same Stop)
            team = await session.scalar(
                select(Proposal.team_id)
                .where(Proposal.assistant_message_id == turn.assistant_message_id)
                .limit(1)
            )
            if team is not None:
                await lock_head(session, team)  # the chain's lock before the proposals'
            rows = await session.scalars(
                select(Proposal)
                .where(
                    Proposal.assistant_message_id == turn.assistant_message_id,
                    Proposal.state == State.PROPOSED,
                )
                .order_by(Proposal.id)
                .with_for_update()
            )
            for proposal in rows.all():
                try:
                    withdrawn.append(
                        await self._apply(
                            session,
                            proposal,
                            Event.WITHDRAW,
                            user,
                            {"reason": "the turn was stopped", "revision": proposal.revision},
                            decided_by=user,
                            decided_at=utcnow(),
                        )
                    )
                except AlreadyHandled:
                    continue  # decided (or withdrawn by another replica) since it was read
        return withdrawn
