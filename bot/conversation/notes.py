"""Every sentence a turn may end a reply with, in one place."""

from __future__ import annotations

from bot.llm import DEADLINE, LENGTH, LLM, Finished

INTERRUPTED = ":warning: _Interrupted: Countersign was restarting before this reply finished._"
EMPTY = "_The model returned an empty answer._"
BROKE = "something went wrong on my side (the operator's log has details)"


def failure_note(reason: str) -> str:
    return f":warning: _I could not finish this reply: {reason}. Please try again._"


def pause_note(count: int) -> str:
    what = "1 action" if count == 1 else f"{count} actions"
    return f":hourglass_flowing_sand: _Waiting for approval of {what} (see below)._"


def budget_note(budget: str) -> str:
    """A turn paused before its model call: a budget had no room for it (not a failure)."""
    return f":money_with_wings: _Paused: the budget {budget} is used up (see below)._"


def rounds_note(rounds: int) -> str:
    return f":warning: _I stopped after {rounds} rounds of tool calls without an answer._"


def stopped_note(user: str) -> str:
    return f":octagonal_sign: _Stopped by <@{user}>._"


def answer_note(finished: Finished, llm: LLM, said: bool) -> str:
    """How an answer ends: nothing, or a note if it is empty or was cut short."""
    if finished.finish_reason == LENGTH:
        return length_note(llm.max_tokens)
    if finished.finish_reason == DEADLINE and llm.deadline is not None:
        return deadline_note(llm.deadline)
    return "" if said else EMPTY


def length_note(tokens: int | None) -> str:
    """A reply that reached `max_tokens` (REPLY_TOKENS, or the server's own limit when none
    was sent): its words stay, this ends it."""
    limit = "" if tokens is None else f" ({tokens:,} tokens)"
    return f":scissors: _Stopped here: the reply reached its length limit{limit}._"


def deadline_note(seconds: float) -> str:
    """A reply cut at MODEL_DEADLINE_SECONDS: its words stay, this ends it."""
    return f":scissors: _Stopped here: the model took longer than {_spoken(seconds)}._"


def _spoken(seconds: float) -> str:
    """`300` -> "5 minutes", `90` -> "90 seconds", `1` -> "1 second", `7200` -> "2 hours"."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}" + ("" if count == 1 else "s")
    count_text = f"{seconds:g}"
    return f"{count_text} second" + ("" if seconds == 1 else "s")
