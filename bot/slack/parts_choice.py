"""When a live reply goes "in parts" (`bot/slack/parts_reply.py`), and the `chat.postMessage`
slots held for the finals of the replies already in parts.

Both count every replica's replies (`bot/shared_counts.py`: with Redis the windows are the
workspace's, and so must the reserves be): each replica used to count its own finals only
(so another replica's first parts took the slots kept for them) and to take the others' open
edits as its own times the replicas (too many whenever they were not spread evenly)."""

from __future__ import annotations

from bot.shared_counts import Count, LocalCount
from bot.slack.edit_budget import EditBudget

# At most this many slots are held: finals come a few a second at most, and the sliding
# minute frees slots as it goes; holding one per open reply starved first parts for 12 s.
MAX_HELD_FOR_FINALS = 6


class OwedFinals:
    """Replies in parts whose final part is still to come, on every replica. An intermediate
    part (the first words included) leaves `held()` of the workspace's `chat.postMessage`
    slots free, and is not posted when it cannot: the finals come first (people wait for them,
    within 2 s of the last token), a first part only shows words sooner."""

    def __init__(self, count: Count | None = None) -> None:
        self.count = count or LocalCount()

    def owe(self) -> None:
        self.count.add(1)

    def paid(self) -> None:
        self.count.add(-1)

    async def held(self) -> int:
        owed = self.count.mine + await self.count.others()
        return min(owed, MAX_HELD_FOR_FINALS)


async def edits_cannot_promise(budget: EditBudget) -> bool:
    """Whether the `chat.update` window cannot promise a new reply's final edit at once.

    Each reply sent as edits (open on the budget, on any replica) is owed at least one final
    edit; the window must hold a free slot for each of them and for this one, now: a slot that
    frees later may come after this reply's last token (a short reply ends within seconds),
    and its final would then wait. Intermediate edits already leave one slot per open reply
    free, so once admitted a reply always finds its slot. This depends only on the budget's
    state: with room (20 or 60 replies at once, a workspace at rest) replies go on as edits;
    under sustained load the finals of replies already open reach what the window holds, and
    new replies go in parts until it frees again."""
    owed = await budget.open_everywhere() + 1
    return await budget.window.free() < owed
