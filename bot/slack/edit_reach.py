"""What an Edit may pick: only channels the editor can read in Slack now.

Slack's conversation menus list only what the person can see, but a submission is whatever
was sent, and a channel typed as text has no menu at all. A channel the editor adds must be
one they can read (asked of Slack now, not a cache: a decision on a write), so a forged pick
never aims a write at, nor names on the card, a private channel they are not in. A channel the
card already had is kept as it is: it was the requester's, decided at the proposal, and the
one door decides the whole revision again."""

from __future__ import annotations

from typing import Any

from bot.membership import Reach
from bot.slack.edit_form import EditField
from bot.tools.field_kinds import Kind

NOT_YOURS = "Pick a channel you can see: Slack did not confirm that you can read this one"
# Channels one edit may add: each is asked of Slack before the form is answered (3 seconds,
# on the workspace's rate budget), so a crafted list of hundreds is refused, not checked.
MAX_ADDED = 25
TOO_MANY = f"Add at most {MAX_ADDED} channels in one edit"


def _channels(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, str)]


async def out_of_reach(
    reach: Reach, fields: list[EditField], picked: dict[str, Any], editor: str
) -> dict[str, str]:
    """Slack's form errors (block id -> words) for each field whose new channels include one
    `editor` cannot read."""
    errors: dict[str, str] = {}
    added: dict[str, list[str]] = {}
    for f in fields:
        if f.kind.kind in (Kind.CHANNEL, Kind.CHANNELS) and f.name in picked:
            shown = set(_channels(f.value))
            new = [c for c in _channels(picked[f.name]) if c not in shown]
            added[f.name] = list(dict.fromkeys(new))
    if sum(len(new) for new in added.values()) > MAX_ADDED:
        widest = max(added, key=lambda name: len(added[name]))
        return {widest[:255]: TOO_MANY}
    for name, new in added.items():
        for channel in new:
            if not await reach.can_read(channel, editor, fresh=True):
                errors[name[:255]] = NOT_YOURS
                break
    return errors
