"""Every sentence a turn may end a reply with, in one place."""

from __future__ import annotations

INTERRUPTED = ":warning: _Interrupted: Countersign was restarting before this reply finished._"
EMPTY = "_The model returned an empty answer._"
BROKE = "something went wrong on my side (the operator's log has details)"


def failure_note(reason: str) -> str:
    return f":warning: _I could not finish this reply: {reason}. Please try again._"


def pause_note(count: int) -> str:
    what = "1 action" if count == 1 else f"{count} actions"
    return f":hourglass_flowing_sand: _Waiting for approval of {what} (see below)._"


def rounds_note(rounds: int) -> str:
    return f":warning: _I stopped after {rounds} rounds of tool calls without an answer._"


def stopped_note(user: str) -> str:
    return f":octagonal_sign: _Stopped by <@{user}>._"
