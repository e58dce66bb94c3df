"""The action state machine. `TRANSITIONS` is the single source of truth: the service, the
repository's compare-and-set and the tests all read it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bot.states import State

__all__ = ["TERMINAL", "TRANSITIONS", "Actor", "Event", "State", "Transition", "transition"]


class Event(enum.StrEnum):
    APPROVE = "approve"
    DECLINE = "decline"
    ASK_CHANGES = "ask_changes"
    EXPIRE = "expire"
    START = "start"
    SUCCEED = "succeed"
    FAIL = "fail"
    LOSE = "lose"  # the outcome is unknown: the answer never came or could not be read
    RETRY = "retry"
    INTERRUPT = "interrupt"
    WITHDRAW = "withdraw"
    # The last step of the policy's escalation ladder: nobody answered in time.
    ESCALATE_DENY = "escalate_deny"
    ESCALATE_ALLOW = "escalate_allow"
    # The approval policy in force (reloaded, or meeting an edited revision) denies it.
    POLICY_DENY = "policy_deny"


class Actor(enum.StrEnum):
    APPROVER = "an authorised approver"
    CLOCK = "the clock"
    EXECUTOR = "the executor"
    RECOVERY = "start-up recovery"
    STOPPER = "the person who stopped the turn"
    ESCALATION = "the policy's escalation ladder"
    POLICY = "the approval policy in force"


@dataclass(frozen=True)
class Transition:
    source: State
    event: Event
    target: State
    actor: Actor


TRANSITIONS: tuple[Transition, ...] = (
    Transition(State.PROPOSED, Event.APPROVE, State.APPROVED, Actor.APPROVER),
    Transition(State.PROPOSED, Event.DECLINE, State.DECLINED, Actor.APPROVER),
    # Sent back with a note: nothing runs, and the model may propose a revised action (a new
    # proposal, with its own card), so this one is done.
    Transition(State.PROPOSED, Event.ASK_CHANGES, State.CHANGES_ASKED, Actor.APPROVER),
    Transition(State.PROPOSED, Event.EXPIRE, State.EXPIRED, Actor.CLOCK),
    Transition(State.PROPOSED, Event.WITHDRAW, State.WITHDRAWN, Actor.STOPPER),
    # Nobody answered: the ladder's terminal outcome decides (told to the model as such).
    Transition(State.PROPOSED, Event.ESCALATE_DENY, State.EXPIRED, Actor.ESCALATION),
    Transition(State.PROPOSED, Event.ESCALATE_ALLOW, State.APPROVED, Actor.ESCALATION),
    # A reload (or an escalation step) met a waiting revision the policy in force denies.
    Transition(State.PROPOSED, Event.POLICY_DENY, State.DECLINED, Actor.POLICY),
    Transition(State.APPROVED, Event.START, State.EXECUTING, Actor.EXECUTOR),
    Transition(State.EXECUTING, Event.SUCCEED, State.SUCCEEDED, Actor.EXECUTOR),
    Transition(State.EXECUTING, Event.FAIL, State.FAILED, Actor.EXECUTOR),
    Transition(State.EXECUTING, Event.LOSE, State.UNKNOWN, Actor.EXECUTOR),
    Transition(State.FAILED, Event.RETRY, State.EXECUTING, Actor.APPROVER),
    # A retry of an unknown outcome first looks for the earlier write (tools that can), or
    # runs only after its clicker confirmed that it may write twice.
    Transition(State.UNKNOWN, Event.RETRY, State.EXECUTING, Actor.APPROVER),
    # Work cut off by a crash may have reached the outside service before it stopped.
    Transition(State.EXECUTING, Event.INTERRUPT, State.UNKNOWN, Actor.RECOVERY),
)

TERMINAL: frozenset[State] = frozenset(
    {State.SUCCEEDED, State.DECLINED, State.CHANGES_ASKED, State.EXPIRED, State.WITHDRAWN}
)
# A paused turn resumes once every proposal of it is in one of these states. An unknown outcome
# counts, like a failure: it waits on a person checking the outside service, which may take
# long or never happen, and the model is told it may have happened (so it neither claims it
# did nor proposes it again); a later retry reaches the model as an update.
SETTLED: frozenset[State] = frozenset({*TERMINAL, State.FAILED, State.UNKNOWN})

_TABLE: dict[tuple[State, Event], Transition] = {(t.source, t.event): t for t in TRANSITIONS}


class TransitionNotAllowed(Exception):
    """The event does not apply to the proposal's current state (e.g. already handled)."""

    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"cannot {event.value} a proposal that is {state.value}")
        self.state = state
        self.event = event


def transition(state: State, event: Event) -> Transition:
    """The transition `event` causes from `state`, or `TransitionNotAllowed`."""
    found = _TABLE.get((state, event))
    if found is None:
        raise TransitionNotAllowed(state, event)
    return found
