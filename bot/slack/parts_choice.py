"""When a live reply goes "in parts" (`bot/slack/parts_reply.py`), and the `chat.postMessage`
slots held for the finals of the replies already in parts."""

from __future__ import annotations

from bot.slack.edit_budget import EditBudget

# At most this many slots are held: finals come a few a second at most, and the sliding
# minute frees slots as it goes; holding one per open reply starved first parts for 12 s.
MAX_HELD_FOR_FINALS = 6


class OwedFinals:
    """Replies in parts of this process whose final part is still to come. An intermediate
    part (the first words included) leaves `held()` of the workspace's `chat.postMessage`
    slots free, and is not posted when it cannot: the finals come first (people wait for them,
    within 2 s of the last token), a first part only shows words sooner."""

    def __init__(self) -> None:
        self.count = 0

    def owe(self) -> None:
        self.count += 1

    def paid(self) -> None:
        self.count -= 1

    def held(self) -> int:
        return min(self.count, MAX_HELD_FOR_FINALS)


OWED_FINALS = OwedFinals()


async def edits_cannot_promise(budget: EditBudget) -> bool:
    """Whether the `chat.update` window cannot promise a new reply's final edit at once.

    Each reply sent as edits (open on the budget) is owed at least one final edit; the window
    must hold a free slot for each of them and for this one, now: a slot that frees later may
    come after this reply's last token (a short reply ends within seconds), and its final
    would then wait. Intermediate edits already leave one slot per open reply free, so once
    admitted a reply always finds its slot. With Redis the window is the workspace's and the
    other replicas owe finals too: they are counted as owing as many as this one
    (`replicas`, when the window knows them). This depends only on the budget's state: with
    room (20 or 60 replies at once, a workspace at rest) replies go on as edits; under
    sustained load the finals of replies already open reach what the window holds, and new
    replies go in parts until it frees again."""
    replicas = max(1, int(getattr(budget.window, "replicas", 1)))
    owed = (budget.open_count + 1) * replicas
    return await budget.window.free() < owed
