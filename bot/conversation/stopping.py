"""Slack's Stop button (`agent_session_stopped`): stop what the agent does in a thread.

For each turn of the thread the person may stop: the running model request is cancelled at
once (the reply ends with "Stopped by @person" and keeps what was shown), the proposals nobody
decided are withdrawn (their cards say so), and the turn never resumes. A write already
executing finishes and is recorded. With Redis the Stop reaches every replica, so the one
running the turn cancels it, wherever Slack delivered the event.

Who may stop a turn: the person it works for, or someone who may approve its actions (for a
running model request: an approver of the `*` policy). Anyone else is told so privately and
nothing stops.

A Stop is journalled before it cancels anything and marked done once the proposals are
withdrawn: if the process dies in between, recovery (at start-up and every sweep) completes the
Stop from the journal, so nothing of a stopped turn is left waiting for a decision.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from bot.approvals.policy import GroupMembers, Policies, Policy, is_approver, may_approve
from bot.approvals.questions import question_of
from bot.approvals.ruling import Authorise, Step
from bot.approvals.service import ApprovalsService, OpenTurn
from bot.conversation.running import RunningTurn, RunningTurns
from bot.db.models import Proposal

log = logging.getLogger(__name__)

CANCEL_WAIT_SECONDS = 15.0  # a cancelled turn writes its last words, then the proposals go
# A journalled Stop still open after this long lost its handler (a Stop that is alive finishes
# within the cancel wait): recovery completes it.
RECOVER_AFTER = timedelta(seconds=2 * CANCEL_WAIT_SECONDS)


@dataclass(frozen=True)
class StopRequest:
    team: str
    channel: str
    thread_ts: str
    user: str
    streams: tuple[str, ...] = ()  # the streaming messages Slack already stopped


@dataclass
class StopOutcome:
    cancelled: int = 0
    withdrawn: list[Proposal] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # whose turns the person may not stop


class Cards(Protocol):
    def refresh(self, proposal_id: int) -> None: ...

    async def tell(self, channel: str, user: str, text: str, thread_ts: str | None) -> None: ...


class Signals(Protocol):
    """How a Stop reaches the other replicas (`bot/conversation/stop_signals.py`)."""

    async def publish(self, request: StopRequest) -> None: ...

    def listen(self, handler: Callable[[StopRequest], Awaitable[object]]) -> None: ...

    async def close(self) -> None: ...


class Authority:
    """Who may stop what (see the module docstring)."""

    def __init__(
        self,
        policies: Policies,
        groups: GroupMembers,
        policy_for: Callable[[Proposal], Policy],
        door: Authorise | None = None,
        pack_of: Callable[[str], str] = lambda _name: "",
    ) -> None:
        self.policies = policies
        self.groups = groups
        self.policy_for = policy_for  # a proposal -> who decides it (without a door)
        self.door = door  # who may decide each proposal, under the policy in force
        self.pack_of = pack_of

    async def may_cancel(self, user: str, requester: str) -> bool:
        default = self.policies.for_tool("", "")  # the `*` policy
        return user == requester or await is_approver(default, user, self.groups.fresh())

    async def may_withdraw(self, user: str, turn: OpenTurn) -> bool:
        if user == turn.requester:
            return True
        for proposal in turn.undecided:
            if self.door is not None:  # withdrawing decides it: asked as a Decline is
                question = question_of(proposal, self.pack_of(proposal.tool_name))
                ruling = await self.door(question, Step.DECIDE, actor=user)
                if ruling.refusal is not None:
                    return False
                continue
            verdict = await may_approve(
                self.policy_for(proposal),
                proposal.requester,
                user,
                self.groups.fresh(),  # who is in the group now, as for a card's click
                proposal.revised_by,
            )
            if not verdict.allowed:
                return False
        return bool(turn.undecided)


class Stopper:
    def __init__(
        self,
        running: RunningTurns,
        approvals: ApprovalsService,
        authority: Authority,
        cards: Cards,
        set_active: Callable[[str, str, str], Awaitable[None]],
        signals: Signals | None = None,
    ) -> None:
        self.running = running
        self.approvals = approvals
        self.authority = authority
        self.cards = cards
        self.set_active = set_active  # (channel, thread_ts, user): the session leaves processing
        self.signals = signals

    def start(self) -> None:
        """Handle the Stops other replicas receive."""
        if self.signals is not None:
            self.signals.listen(lambda request: self.stop(request, origin=False))

    async def close(self) -> None:
        if self.signals is not None:
            await self.signals.close()

    async def stop(self, request: StopRequest, origin: bool = True) -> StopOutcome:
        """Handle a Stop; `origin` is the replica Slack delivered it to (it tells the person
        and resets the thread's status), the others only cancel what they run."""
        outcome = StopOutcome()
        entry = await self._journal(request) if origin else None
        if origin and self.signals is not None:
            await self.signals.publish(request)
        await self._cancel_running(request, outcome)
        await self._stop_paused(request, outcome)
        if entry is not None:
            await self.approvals.stop_done(entry)
        if not origin:
            return outcome
        if outcome.cancelled == 0:
            await self.set_active(request.channel, request.thread_ts, request.user)
        if outcome.refused and not outcome.cancelled and not outcome.withdrawn:
            whose = ", ".join(f"<@{u}>" for u in sorted(set(outcome.refused)))
            await self.cards.tell(
                request.channel,
                request.user,
                f"Nothing was stopped: only the person it works for ({whose}) or an approver "
                "can stop it.",
                request.thread_ts,
            )
        log.info(
            "stop in %s: %d turn(s) cancelled, %d proposal(s) withdrawn",
            request.channel,
            outcome.cancelled,
            len(outcome.withdrawn),
        )
        return outcome

    async def _cancel_running(self, request: StopRequest, outcome: StopOutcome) -> None:
        stopping: list[RunningTurn] = []
        for turn in self.running.in_thread(request.team, request.channel, request.thread_ts):
            if turn.stopped_by is not None or turn.task.done():
                continue
            if not await self.authority.may_cancel(request.user, turn.requester):
                outcome.refused.append(turn.requester)
                continue
            turn.stopped_by = request.user
            if turn.stream is not None:
                turn.stream.stream_ended(request.streams)
            turn.task.cancel()
            stopping.append(turn)  # its reply counts the turn as stopped
        outcome.cancelled = len(stopping)
        if stopping:
            await asyncio.wait({t.task for t in stopping}, timeout=CANCEL_WAIT_SECONDS)

    async def _journal(self, request: StopRequest) -> int | None:
        try:
            return await self.approvals.journal_stop(
                request.team, request.channel, request.thread_ts, request.user
            )
        except Exception:  # the database is down: the withdrawals would fail the same way
            log.exception("could not journal the stop in %s", request.channel)
            return None

    async def recover(self) -> None:
        """Complete the journalled Stops whose handler died between cancelling and
        withdrawing: withdraw what their turns left undecided (only proposals made before the
        Stop took effect, never a later turn's), then mark them done."""
        for entry in await self.approvals.open_stops(RECOVER_AFTER):
            request = StopRequest(entry.team_id, entry.channel_id, entry.thread_ts, entry.user_id)
            outcome = StopOutcome()
            made_before = entry.created_at + timedelta(seconds=CANCEL_WAIT_SECONDS)
            await self._stop_paused(request, outcome, made_before)
            await self.approvals.stop_done(entry.id)
            log.warning(
                "completed a stop cut off in %s: %d proposal(s) withdrawn",
                entry.channel_id,
                len(outcome.withdrawn),
            )

    async def _stop_paused(
        self, request: StopRequest, outcome: StopOutcome, made_before: datetime | None = None
    ) -> None:
        turns = await self.approvals.open_turns(
            request.team, request.channel, request.thread_ts, made_before
        )
        for turn in turns:
            if not await self.authority.may_withdraw(request.user, turn):
                if turn.undecided:
                    outcome.refused.append(turn.requester)
                continue
            withdrawn = await self.approvals.stop_turn(turn, request.user)
            for proposal in withdrawn:
                self.cards.refresh(proposal.id)
            outcome.withdrawn += withdrawn
