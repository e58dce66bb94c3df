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


def _channels(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, str)]


async def out_of_reach(
    reach: Reach, fields: list[EditField], picked: dict[str, Any], editor: str
) -> dict[str, str]:
    """Slack's form errors (block id -> words) for each field whose new channels include one
    `editor` cannot read."""
    errors: dict[str, str] = {}
    for f in fields:
        if f.kind.kind not in (Kind.CHANNEL, Kind.CHANNELS) or f.name not in picked:
            continue
        shown = set(_channels(f.value))
        for channel in _channels(picked[f.name]):
            if channel not in shown and not await reach.can_read(channel, editor, fresh=True):
                errors[f.name[:255]] = NOT_YOURS
                break
    return errors
