"""The policy's escalation ladder, climbed by the clock (`escalate:` in an ask rule):

    escalate:
      - after: 30m            # a step naming nobody and no outcome: remind the approvers
      - after: 1h
        to: [UCAROL, S0LEADS] # these people may approve too from now on, and are notified
      - after: 2h
        outcome: deny         # terminal: decided by escalation ("nobody answered")

`after` counts from the proposal. The steps taken are counted on the proposal
(`escalation_step`), each taken once by a compare-and-set whichever replica's sweep gets there
first, with an audit row. People a step adds are kept in the proposal's recorded policy
(`escalated_to`), which is where who may approve is read from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import select, update

from bot.approvals.errors import AlreadyHandled
from bot.approvals.machine import Event
from bot.approvals.questions import question_of, record_ruling
from bot.approvals.rerouting import Rerouting
from bot.approvals.ruling import Step as DoorStep
from bot.db.audit_chain import lock_head
from bot.db.models import Proposal, utcnow
from bot.durations import parse_duration
from bot.states import State

ESCALATION = "escalation"  # the decider recorded for a terminal step
# The expiry stays as a backstop, a little after the ladder's own end, should no sweep run.
BACKSTOP = timedelta(minutes=5)

Kind = Literal["remind", "notify", "deny", "allow"]


@dataclass(frozen=True)
class Step:
    after: timedelta
    to: tuple[str, ...]
    outcome: str | None

    @property
    def kind(self) -> Kind:
        if self.outcome == "allow":
            return "allow"
        if self.outcome is not None:
            return "deny"  # an unknown outcome fails closed
        return "notify" if self.to else "remind"


@dataclass(frozen=True)
class Escalated:
    proposal: Proposal
    step: Step
    index: int


def ladder(recorded: dict[str, Any] | None) -> list[Step]:
    """The steps kept with the proposal's policy decision, in order of time."""
    steps = []
    for raw in (recorded or {}).get("escalate") or []:
        try:
            after = parse_duration(raw.get("after"))
        except (ValueError, TypeError, AttributeError):
            continue  # validated when the file was loaded; a damaged row is skipped
        to = tuple(str(t) for t in raw.get("to") or ())
        outcome = raw.get("outcome")
        steps.append(Step(after, to, None if outcome is None else str(outcome)))
    steps.sort(key=lambda s: s.after)
    end = next((i for i, s in enumerate(steps) if s.outcome is not None), None)
    return steps if end is None else steps[: end + 1]  # nothing follows a terminal step


def ladder_start(recorded: dict[str, Any] | None, created_at: datetime) -> datetime:
    """When the ladder's clock started: at the proposal, or at the last Edit or reroute (a
    new revision, or new deciders, start it again: nobody has had time to look at them)."""
    started = (recorded or {}).get("ladder_from")
    if isinstance(started, str):
        try:
            return max(created_at, datetime.fromisoformat(started))
        except ValueError:
            return created_at
    return created_at


def expiry_with(steps: list[Step], default: timedelta) -> timedelta:
    """How long a proposal with this ladder waits: until its terminal step (plus a backstop),
    else at least the default after its last step."""
    if not steps:
        return default
    if steps[-1].outcome is not None:
        return steps[-1].after + BACKSTOP
    return max(default, steps[-1].after + default)


class Escalations(Rerouting):
    async def escalate_due(self, now: datetime | None = None) -> list[Escalated]:
        """Take every step that is due (at most one per proposal per sweep)."""
        now = now or utcnow()
        async with self.db.transaction() as session:
            waiting = (
                await session.execute(
                    select(
                        Proposal.id, Proposal.policy, Proposal.created_at, Proposal.escalation_step
                    ).where(Proposal.state == State.PROPOSED, Proposal.policy.is_not(None))
                )
            ).all()
        taken = []
        for proposal_id, recorded, created_at, done in waiting:
            steps = ladder(recorded)
            if done >= len(steps) or ladder_start(recorded, created_at) + steps[done].after > now:
                continue
            try:
                seen = None
                if steps[done].kind == "allow":
                    seen = await self._door_allows(proposal_id)
                    if seen is None:
                        continue  # the door closed or rerouted it, or Slack could not answer
                taken.append(await self._take(proposal_id, steps[done], done, now, seen))
            except AlreadyHandled:
                continue  # decided, or another replica took the step a moment ago
        return taken

    async def _door_allows(self, proposal_id: int) -> int | None:
        """An allow step would run the current revision: the one door decides it first. A
        deny closes the proposal, other deciders reroute it (its ladder starts again); only
        the same rule, unchanged, or an allow lets the step approve it: then the version of
        the row the door decided (the step approves that row only)."""
        if self.door is None:
            return (await self.get(proposal_id)).version
        proposal = await self.get(proposal_id)
        question = question_of(proposal, self.pack_of(proposal.tool_name))
        ruling = await self.door(question, DoorStep.ESCALATE)
        async with self.db.transaction() as session:
            record_ruling(session, question, ruling, DoorStep.ESCALATE, ESCALATION)
        if ruling.closes():
            await self.close_by_policy(proposal.id, proposal.version, ruling)
            return None
        if ruling.reroutes(proposal.policy):
            await self.reroute(proposal.id, proposal.version, ruling)
            return None
        if ruling.outcome == "deny":  # Slack could not answer: the next sweep asks again
            return None
        return proposal.version

    async def _take(
        self, proposal_id: int, step: Step, index: int, now: datetime, seen: int | None = None
    ) -> Escalated:
        async with self.db.transaction() as session:
            team = await session.scalar(select(Proposal.team_id).where(Proposal.id == proposal_id))
            if team is not None:
                await lock_head(session, team)  # the chain's lock before the proposal's
            proposal = await session.get(Proposal, proposal_id, with_for_update=True)
            if proposal is None or proposal.escalation_step != index:
                raise AlreadyHandled("taken already")
            if seen is not None and proposal.version != seen:  # moved since the door decided
                raise AlreadyHandled("changed since the door decided it")
            guard = (Proposal.escalation_step == index,)
            detail: dict[str, Any] = {"step": index + 1, "after": str(step.after)}
            if step.kind == "deny":
                fresh = await self._apply(
                    session, proposal, Event.ESCALATE_DENY, ESCALATION, detail, guard,
                    escalation_step=index + 1, decided_by=ESCALATION, decided_at=now,
                )  # fmt: skip
            elif step.kind == "allow":
                fresh = await self.approve_unclicked(
                    session, proposal, ESCALATION, detail, Event.ESCALATE_ALLOW, guard,
                    escalation_step=index + 1,
                )  # fmt: skip
            else:
                fresh = await self._climb(session, proposal, step, index, detail)
            return Escalated(fresh, step, index)

    async def _climb(
        self, session: Any, proposal: Proposal, step: Step, index: int, detail: dict[str, Any]
    ) -> Proposal:
        """A reminder or a step adding approvers: the proposal stays waiting, its version
        moves (so its cards show the new approvers) and the step is audited."""
        recorded = dict(proposal.policy or {})
        if step.to:
            if not recorded.get("approvers") and not recorded.get("escalated_to"):
                # The requester decided alone; they still may, beside the people added.
                recorded["escalated_to"] = [] if recorded.get("four_eyes") else [proposal.requester]
            added = [a for a in step.to if a not in recorded.get("escalated_to", [])]
            recorded["escalated_to"] = [*recorded.get("escalated_to", []), *added]
            detail["to"] = list(step.to)
        fresh = await session.scalar(
            update(Proposal)
            .where(
                Proposal.id == proposal.id,
                Proposal.state == State.PROPOSED,
                Proposal.escalation_step == index,
            )
            .values(
                escalation_step=index + 1,
                policy=recorded,
                version=Proposal.version + 1,
                updated_at=utcnow(),
            )
            .returning(Proposal)
            .execution_options(populate_existing=True)
        )
        if fresh is None:
            raise AlreadyHandled("taken already")
        await self.note_in(session, fresh, "escalate" if step.to else "remind", ESCALATION, detail)
        return fresh  # type: ignore[no-any-return]
