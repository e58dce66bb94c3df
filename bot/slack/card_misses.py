"""A card that could not be delivered is said, not silently lost.

When Slack refuses a card (a DM it will not open, a scope the token lacks, a channel the bot
left, an account that is gone, or no answer after the client's own retries), the requester is
told in the thread, in words: that the card did not reach someone, why as far as a person can
act on it, and where the action still waits (the App Home and `/approvals` list it for whoever
may decide). Each miss is recorded (`ApprovalsService.first_miss`), so it is said once per
proposal and person, however often the card is tried again and on whichever replica. The
approvers who got the card are unaffected, and nothing here changes who may decide: every
click is judged by the one door.

Approvers are named only where everyone in the thread may read what the action carries (their
names say who may read it); elsewhere they are counted. The note never repeats Slack's error
code or anything of the action's data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from bot.approvals.service import ApprovalsService
from bot.db.models import Proposal, utcnow
from bot.poster import NOTHING_PRIVATE, Poster
from bot.slack.card_routing import NAMED_IN_NOTE, REFUSED_BY_POSTER, carried_by, reason_of

log = logging.getLogger(__name__)

THREAD = "thread"  # the card's own thread refused it
CHANNEL = "channel"  # the approvers' channel of `route: channel:…` refused it
REQUESTER = "requester"  # the requester's DM refused a card only they may read

# Slack's error codes, in words a teammate (or the admin they ask) can act on.
WORDS = {
    "missing_scope": "Countersign lacks a Slack permission it needs for this",
    "not_allowed_token_type": "Countersign lacks a Slack permission it needs for this",
    "user_not_found": "Slack cannot find that account",
    "users_not_found": "Slack cannot find that account",
    "user_not_visible": "Slack cannot find that account",
    "user_disabled": "that account is deactivated",
    "account_inactive": "that account is deactivated",
    "channel_not_found": "Countersign is not in that conversation",
    "not_in_channel": "Countersign is not in that conversation",
    "is_archived": "that channel is archived",
    REFUSED_BY_POSTER: "what it carries may not be shown there",
}
TRANSIENT = "Slack did not answer in time"
# A card the sweeper will try again is not said missing for a passing outage: only once it
# has waited this long without a place (a refusal no retry cures is said at once).
PATIENCE = timedelta(minutes=2)
OTHER = "Slack refused it"
WAITS = (
    "The action still waits for a decision: whoever may approve it finds it under "
    "*Waiting for your decision* in Countersign's App Home or with `/approvals`. "
    "If this keeps happening, an admin can run `countersign doctor` to see why."
)


@dataclass
class Delivery:
    """Who now has a copy of the card, and who could not be sent one (with why: a code)."""

    reached: list[str] = field(default_factory=list)
    missed: dict[str, str] = field(default_factory=dict)


def in_words(reason: str) -> str:
    if reason.startswith("transient:"):
        return TRANSIENT
    return WORDS.get(reason, OTHER)


def _list(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def approvers_note(requester: str, missed: dict[str, str], named: bool) -> str:
    """The thread's note: the card did not reach these approvers (named, or counted)."""
    if named:
        by_why: dict[str, list[str]] = {}
        for user, reason in list(missed.items())[:NAMED_IN_NOTE]:
            by_why.setdefault(in_words(reason), []).append(f"<@{user}>")
        extra = len(missed) - NAMED_IN_NOTE
        parts = [f"{_list(users)} ({why})" for why, users in by_why.items()]
        if extra > 0:
            parts.append(f"{extra} more")
        whom = _list(parts)
    else:
        whys = sorted({in_words(r) for r in missed.values()})
        count = "1 approver" if len(missed) == 1 else f"{len(missed)} approvers"
        whom = f"{count} ({'; '.join(whys)})"
    return f":warning: <@{requester}>, the approval card could not be sent to {whom}. {WAITS}"


def place_note(requester: str, target: str, reason: str, channel: str) -> str:
    """The note when the card itself found no place: the thread, the approvers' channel, or
    the requester's own DM (a card only they may read)."""
    why = in_words(reason)
    if target == CHANNEL:
        what = f"could not be posted in the approvers' channel ({why})"
    elif target == THREAD:
        what = f"could not be posted in its thread in <#{channel}> ({why})"
    else:
        what = f"was meant for you alone, by direct message, and could not be sent ({why})"
    return f":warning: <@{requester}>, the approval card for your request {what}. {WAITS}"


class CardMisses:
    """Mixin of `CardPublisher`: telling the requester, once, what did not arrive."""

    approvals: ApprovalsService
    poster: Poster

    async def _note(
        self,
        proposal: Proposal,
        text: str,
        where: tuple[str, str | None] | None = None,
        *,
        carries: str,
    ) -> None:
        raise NotImplementedError  # ThreadNotes'

    async def _requester_dm(self, proposal: Proposal) -> str:
        raise NotImplementedError  # CardPublisher's

    async def _fresh(self, proposal: Proposal, missed: dict[str, str]) -> dict[str, str]:
        fresh = {}
        for who, reason in missed.items():
            try:
                first = await self.approvals.first_miss(proposal.id, who, reason)
            except Exception as exc:  # unrecorded: say nothing rather than on every retry
                log.warning("miss of proposal %s not recorded: %s", proposal.id, type(exc).__name__)
                continue
            # A retry's miss is logged quietly: the first said what failed.
            level = logging.WARNING if first else logging.DEBUG
            log.log(level, "card of proposal %s not delivered to %s: %s", proposal.id, who, reason)
            if first:
                fresh[who] = reason
        return fresh

    async def tell_missed(
        self, proposal: Proposal, missed: dict[str, str], retried: bool = False
    ) -> None:
        """Approvers the card's copies did not reach, said in the thread once each
        (`retried`: the sweeper tries them again, so a passing outage is not said)."""
        fresh = await self._fresh(proposal, _lasting(proposal, missed) if retried else missed)
        if not fresh:
            return
        named = await self._thread_may_know(proposal)
        text = approvers_note(proposal.requester, fresh, named)
        await self._note(proposal, text, carries=NOTHING_PRIVATE)

    async def tell_unplaced(self, proposal: Proposal, target: str, reason: str) -> None:
        """The card found no place at all (`target`: THREAD, CHANNEL or REQUESTER); the
        sweeper tries it again, so a passing outage is not said."""
        if not await self._fresh(proposal, _lasting(proposal, {target: reason})):
            return
        text = place_note(proposal.requester, target, reason, proposal.channel_id)
        if target != THREAD:
            await self._note(proposal, text, carries=NOTHING_PRIVATE)
            return
        try:  # the thread itself refused: the requester's DM is the one place left
            where = (await self._requester_dm(proposal), None)
        except Exception as exc:  # already logged as a miss; nothing else to try
            log.warning("requester of %s unreachable too: %s", proposal.id, reason_of(exc))
            return
        await self._note(proposal, text, where, carries=NOTHING_PRIVATE)

    async def _thread_may_know(self, proposal: Proposal) -> bool:
        try:
            return await self.poster.cleared(
                proposal.channel_id, carried_by(proposal), proposal.requester
            )
        except Exception as exc:  # unknown: count, do not name
            log.warning("audience of %s unknown: %s", proposal.channel_id, reason_of(exc))
            return False


def _lasting(proposal: Proposal, missed: dict[str, str]) -> dict[str, str]:
    """The misses worth saying now: refusals no retry cures, and outages that lasted."""
    waited = utcnow() - proposal.created_at >= PATIENCE
    lasting = {}
    for who, why in missed.items():
        if waited or not why.startswith("transient:"):
            lasting[who] = why
        else:
            log.info("card of proposal %s not yet delivered to %s: %s", proposal.id, who, why)
    return lasting
