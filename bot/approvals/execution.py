"""The executor's side of the machine: claiming an approved proposal with a lease, renewing the
lease while the tool runs, and recording the outcome only while holding it.

A worker is presumed dead only when its lease has lapsed (see `clock.py`); the lease is longer
than the tool's timeout and renewed while the tool runs, so a live execution is never taken
over. `succeed` and `fail` are compare-and-sets guarded by "this worker holds the lease": a
worker that lost its lease cannot record an outcome over someone else's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select, update

from bot.approvals.approved import approved_in
from bot.approvals.errors import (
    AlreadyHandled,
    LeaseLost,
    NeedsConfirmation,
    TamperedApproval,
    UnknownProposal,
    not_allowed,
)
from bot.approvals.ledger import Ledger
from bot.approvals.machine import TRANSITIONS, Event, State
from bot.approvals.questions import question_of, record_ruling, turn_key
from bot.approvals.ruling import Authorise, Question, Ruling, Step
from bot.audience import narrowest
from bot.db.models import Message, Proposal, ProposalApproval, utcnow
from bot.provenance import Source
from bot.tools.registry import Outcome

# The (state, event) pairs that claim execution, as the transition table has them.
STARTS = frozenset(
    (t.source, t.event) for t in TRANSITIONS if t.event in (Event.START, Event.RETRY)
)


@dataclass(frozen=True)
class Claim:
    """A claimed execution: the proposal (executing, leased to the claimer) and either the
    approved arguments, checked, or why they must not run."""

    proposal: Proposal
    arguments: dict[str, Any] | None
    refused: TamperedApproval | None = None

    def approved_arguments(self) -> dict[str, Any]:
        if self.arguments is None:
            raise self.refused or TamperedApproval("this action has no approved arguments")
        return self.arguments


class Executions(Ledger):
    async def start(self, proposal_id: int, worker: str, retry_by: str | None = None) -> Proposal:
        """Claim execution (approved -> executing, or failed/unknown -> executing on Retry)
        with a lease."""
        return (await self.claim(proposal_id, worker, retry_by)).proposal

    async def claim(
        self,
        proposal_id: int,
        worker: str,
        retry_by: str | None = None,
        confirmed: bool = False,
        finds_earlier_write: Callable[[str], bool] = lambda _tool: True,
        door: Authorise | None = None,
    ) -> Claim:
        """`start`, and in the same transaction the check that the arguments about to run are
        exactly the approved revision (one round of the database instead of two per run) and
        that the one door lets exactly that revision run now (`door`: asked just before, on
        the row as it is; if the row or the policy in force moved since, asked again).

        A retry of an unknown outcome by a tool that cannot find its earlier write runs only
        when its clicker `confirmed` that it may write twice (else `NeedsConfirmation`); the
        audit row records who confirmed."""
        for _ in range(5):
            asked = None if door is None else await self._ask_door(proposal_id, door, retry_by)
            claim = await self._claim(
                proposal_id, worker, retry_by, confirmed, finds_earlier_write, door, asked
            )
            if claim is not None:
                return claim
        raise AlreadyHandled("This action keeps changing; try again in a moment.")

    async def _ask_door(
        self, proposal_id: int, door: Authorise, retry_by: str | None = None
    ) -> tuple[int, Question, Ruling] | None:
        """The door's answer on the approved revision with its votes, and the row's version
        it was asked on; None when there is no such proposal or approved revision. A Retry's
        clicker chose to run exactly this revision again: their click counts as their vote
        (if they may decide it now)."""
        async with self.db.reading() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None or proposal.approved_arguments is None:
                return None
            votes = (
                await session.scalars(
                    select(ProposalApproval.approver)
                    .where(
                        ProposalApproval.proposal_id == proposal_id,
                        ProposalApproval.revision == proposal.approved_revision,
                    )
                    .order_by(ProposalApproval.id)
                )
            ).all()
            turn = None
            if not proposal.thread_ts:
                turn = await turn_key(
                    session, proposal.conversation_id, proposal.assistant_message_id
                )
        question = replace(
            question_of(proposal, self.pack_of(proposal.tool_name), turn=turn),
            arguments=dict(proposal.approved_arguments),
            revision=proposal.approved_revision or proposal.revision,
        )
        cast = list(dict.fromkeys([*votes, *([retry_by] if retry_by else [])]))
        ruling = await door(question, Step.EXECUTE, votes=cast)
        return proposal.version, question, ruling

    async def _claim(
        self,
        proposal_id: int,
        worker: str,
        retry_by: str | None,
        confirmed: bool,
        finds_earlier_write: Callable[[str], bool],
        door: Authorise | None,
        asked: tuple[int, Question, Ruling] | None,
    ) -> Claim | None:
        """One attempt at the claim; None when the door's answer is for another row or
        policy version than the one in force now (ask again)."""
        async with self.db.transaction() as session:
            proposal = await session.get(Proposal, proposal_id)
            if proposal is None:
                raise UnknownProposal("this action no longer exists")
            if door is not None and asked is not None:
                version, question, ruling = asked
                if version != proposal.version or ruling.version != door.version_in_force():
                    return None
            event = Event.RETRY if retry_by else Event.START
            if (State(proposal.state), event) not in STARTS:
                raise AlreadyHandled(
                    f"This action is {proposal.state.value}; there is nothing to "
                    + ("retry." if retry_by else "run.")
                )
            detail: dict[str, Any] = {"worker": worker, "attempt": proposal.attempts + 1}
            if retry_by and State(proposal.state) is State.UNKNOWN:
                if finds_earlier_write(proposal.tool_name):
                    detail["looks_for_earlier_write"] = True
                elif confirmed:
                    detail["may_write_twice_confirmed_by"] = retry_by
                else:
                    raise NeedsConfirmation(
                        "The earlier attempt may have written already and this action cannot "
                        "look for it, so a retry may write twice. Check the destination, then "
                        'use "Retry anyway" and confirm.'
                    )
            claimed = await self._apply(
                session,
                proposal,
                event,
                retry_by or worker,
                detail,
                lease_owner=worker,
                lease_expires_at=utcnow() + self.lease,
                attempts=Proposal.attempts + 1,
                error=None,
            )
            try:
                arguments = await approved_in(session, claimed)
            except TamperedApproval as exc:
                return Claim(claimed, None, exc)
            if door is not None:
                if asked is None:
                    return Claim(claimed, None, TamperedApproval("no approved revision to run"))
                _version, question, ruling = asked
                record_ruling(session, question, ruling, Step.EXECUTE, worker)
                if not ruling.runs():
                    return Claim(claimed, None, not_allowed(ruling))
            return Claim(claimed, arguments)

    async def renew(self, proposal: Proposal, worker: str) -> bool:
        """Extend this worker's lease; False if it no longer holds it."""
        async with self.db.transaction() as session:
            result = await session.execute(
                update(Proposal)
                .where(
                    Proposal.id == proposal.id,
                    Proposal.state == State.EXECUTING,
                    Proposal.version == proposal.version,
                    Proposal.lease_owner == worker,
                )
                .values(lease_expires_at=utcnow() + self.lease)
            )
            return getattr(result, "rowcount", 0) == 1

    async def approved_call(self, proposal: Proposal) -> dict[str, Any]:
        """The arguments to run, after checking they are exactly the approved revision."""
        async with self.db.transaction() as session:
            return await approved_in(session, proposal)

    async def succeed(
        self, proposal: Proposal, worker: str, outcome: Outcome, read: bool = False
    ) -> Proposal:
        """`read`: the outcome of a read a person approved: its `tool` message takes the
        audience the read declared and says what it read (untrusted input for what follows),
        in the transaction that gives the model its result. A write whose answer is a
        source's words (an MCP server's: `Outcome.source`) is untrusted input likewise."""
        message: dict[str, Any] | None = None
        if read:
            message = {"audience": narrowest(outcome.audience), "source": outcome.source}
        elif isinstance(outcome.source, Source):  # a write's answer in a server's own words
            message = {"source": outcome.source.dumps()}
        return await self._finish(
            proposal,
            worker,
            Event.SUCCEED,
            {"summary": outcome.summary, "link": outcome.link},
            message,
            result=outcome.result,
            result_link=outcome.link,
            result_summary=outcome.summary,
        )

    async def fail(
        self, proposal: Proposal, worker: str, error: str, source: Source | None = None
    ) -> Proposal:
        """`source`: whose words the error carries (an MCP server's), so the model reads it
        as that source's data and what follows it counts as proposed after it."""
        message = {"source": source.dumps()} if source is not None else None
        return await self._finish(
            proposal, worker, Event.FAIL, {"error": error}, message, error=error
        )

    async def lose(self, proposal: Proposal, worker: str, error: str) -> Proposal:
        """The write may or may not have happened (executing -> unknown)."""
        return await self._finish(proposal, worker, Event.LOSE, {"error": error}, error=error)

    async def _finish(
        self,
        proposal: Proposal,
        worker: str,
        event: Event,
        detail: dict[str, Any],
        message: dict[str, Any] | None = None,
        **values: Any,
    ) -> Proposal:
        """`message`: values for the proposal's `tool` message, set with its result."""
        try:
            async with self.db.transaction() as session:
                settled = await self._apply(
                    session,
                    proposal,
                    event,
                    worker,
                    detail,
                    (Proposal.lease_owner == worker,),
                    lease_owner=None,
                    lease_expires_at=None,
                    **values,
                )
                if message and settled.result_message_id is not None:
                    await session.execute(
                        update(Message)
                        .where(Message.id == settled.result_message_id)
                        .values(**message)
                    )
                return settled
        except AlreadyHandled as exc:
            raise LeaseLost(f"proposal {proposal.id}: {exc.user_message}") from None
