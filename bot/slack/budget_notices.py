"""A budget's soft threshold: when a settled model call carries a budget past its `soft`
fraction for the first time in its window (the ledger tells it once, across replicas), each of
its owners gets one DM: "support-daily has used 80% ($9.60 of $12.00 today; resets 00:00 UTC)".
Owners named as user groups reach their members (read through the cached group lookup)."""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.policy import GroupMembers
from bot.poster import NOTHING_PRIVATE, poster_of
from bot.spend.standing import SoftCrossing
from bot.spend.windows import PERIOD, resets_phrase, use_phrase

log = logging.getLogger(__name__)


def soft_text(crossing: SoftCrossing) -> str:
    """ "support-daily has used 80% ($9.60 of $12.00 today; resets 00:00 UTC)"."""
    standing = crossing.standing
    share = round((standing.soft or 0) * 100)
    said = f"{use_phrase(standing)} {PERIOD[standing.window]}"
    resets = resets_phrase(standing)
    return f"{standing.name} has used {share}% ({said}{'; ' + resets if resets else ''})"


class SoftNotices:
    def __init__(self, slack: AsyncWebClient, groups: GroupMembers) -> None:
        self.slack = slack
        self.groups = groups
        self.poster = poster_of(slack)

    async def recipients(self, owners: tuple[str, ...]) -> list[str]:
        people: list[str] = []
        for owner in owners:
            if not owner.startswith("S"):
                people.append(owner)
                continue
            try:
                people.extend(sorted(await self.groups.members(owner)))
            except Exception as exc:  # the others are told all the same
                log.warning("owners' group %s unreadable: %s", owner, type(exc).__name__)
        return list(dict.fromkeys(people))

    async def send(self, crossing: SoftCrossing) -> None:
        text = soft_text(crossing)
        for user in await self.recipients(crossing.standing.owners):
            try:
                opened = await self.slack.conversations_open(users=user)
                dm = str((opened.get("channel") or {}).get("id") or "")
                await self.poster.post(dm, text, carries=NOTHING_PRIVATE, reader=user)
            except Exception as exc:  # one owner unreachable: the others still hear it
                log.warning("soft notice of %s not delivered: %s", crossing.standing.name, exc)
