"""The states of an action proposal. Kept apart from the transition table so that the database
models and the approvals layer can both use them without importing each other."""

from __future__ import annotations

import enum


class State(enum.StrEnum):
    PROPOSED = "proposed"
    APPROVED = "approved"
    DECLINED = "declined"
    EXPIRED = "expired"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # The write may or may not have happened (time-out after sending, connection lost mid-call,
    # an unreadable answer, a crash while it ran): never shown as a plain failure.
    UNKNOWN = "unknown"
    WITHDRAWN = "withdrawn"  # the turn was stopped before anyone decided
    # An approver sent it back with a note; the model may propose a revised action. At most
    # 16 characters: the column is a non-native enum of that length, so no migration.
    CHANGES_ASKED = "changes_asked"


def state_label(state: State) -> str:
    """A state in words, for people (history, /approvals, the App Home)."""
    return state.value.replace("_", " ")
