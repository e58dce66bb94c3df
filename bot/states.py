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
    WITHDRAWN = "withdrawn"  # the turn was stopped before anyone decided
