"""Spend made visible: `/usage` and the App Home's "Your usage" (issue 29). What a person used
(their own answers' tokens and cost, budget or not), every budget that applies to them, and
the budgets they own, named or through a user group they are in.

Reads only: the ledger (`bot.spend.ledger.Spend`) answers each budget's standing, the stored
messages what a person used. Group membership is the cached lookup the approvals use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError

from bot.approvals.policy import GroupMembers
from bot.db.models import utcnow
from bot.db.session import Database
from bot.records.usage_queries import (
    PERIODS,
    ByModel,
    own_usage,
    period_starts,
    recent_channels,
    total,
)
from bot.slack.usage_view import OwnUsage, usage_home, usage_message, usage_words
from bot.spend.prices import Prices
from bot.spend.standing import Asker, Standing
from bot.spend.windows import sentence

if TYPE_CHECKING:
    from bot.spend.ledger import Spend  # made by the app once a budget is configured

log = logging.getLogger(__name__)

USAGE_TURN = "usage"  # the turn key /usage asks with: a per-request budget shows its limit


class UsageViews:
    def __init__(
        self,
        db: Database,
        ledger: Callable[[], Spend | None],
        prices: Prices,
        groups: GroupMembers,
        packs: Callable[[], frozenset[str]],
        model: str,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        """`ledger`: the app's one ledger, None while no budget is configured; `packs`: the
        packs whose tools a turn offers (their budgets apply to each turn); `model`: the
        configured model, whose price (in `prices`) answers stored without their model have."""
        self.db = db
        self.ledger = ledger
        self.prices = prices
        self.groups = groups
        self.packs = packs
        self.model = model
        self.now = now

    def priced_as(self, model: str | None) -> str:
        """The model whose price an answer has: its own; the configured model's for answers
        stored before messages recorded their model."""
        return model or self.model

    def cost(self, by_model: ByModel) -> int | None:
        """What the tokens cost, in nano-dollars: each model's at its own price, cached prompt
        tokens at its cached price; None if a model that answered has no price."""
        nano = 0
        for model, used in by_model.items():
            name = self.priced_as(model)
            if self.prices.of(name) is None:
                return None
            nano += self.prices.nano(name, used.prompt, used.completion, used.cached)
        return nano

    def words(self, by_model: ByModel) -> str:
        """Answers' usage in words ("1,234 tokens, $0.0021"), for /history."""
        return usage_words(total(by_model).total, self.cost(by_model))

    async def groups_of(self, spend: Spend, user: str) -> frozenset[str]:
        """The user groups named in any budget (as its scope or an owner) that `user` is in."""
        named = set()
        for budget in spend.budgets()[0]:
            if budget.scope.group:
                named.add(budget.scope.group)
            named |= {o for o in budget.owners if o.startswith("S")}
        found = set()
        for group in sorted(named):
            try:
                if user in await self.groups.members(group):
                    found.add(group)
            except SlackApiError as exc:  # a group Slack cannot list counts nobody
                log.info("could not read the members of a user group: %s", exc)
        return frozenset(found)

    async def own(self, team: str, user: str, spend: Spend | None) -> OwnUsage:
        """In the budgets' calendar (the policy file's time zone), UTC without budgets."""
        starts = period_starts(self.now(), spend.budgets()[1] if spend is not None else "UTC")
        async with self.db.reading() as session:
            used = await own_usage(session, team, user, starts)
        month = used["month"]  # every model of the shorter periods answered this month too
        models = sorted({self.priced_as(m) for m in month}) or [self.model]
        unpriced = tuple(m for m in models if self.prices.of(m) is None)
        cost = {p: self.cost(used[p]) or 0 for p in PERIODS}
        return OwnUsage(
            {p: total(used[p]) for p in PERIODS},
            None if unpriced else cost,
            tuple(models),
            unpriced,
        )

    def _asker(self, team: str, channel: str, user: str, groups: frozenset[str]) -> Asker:
        return Asker(team, channel, user, groups, self.packs(), USAGE_TURN)

    async def command(self, team: str, channel: str, user: str) -> list[dict[str, Any]]:
        """/usage in `channel`: the caller's usage, the budgets that apply there, theirs."""
        spend = self.ledger()
        own = await self.own(team, user, spend)
        applies: list[Standing] = []
        owned: list[Standing] = []
        if spend is not None and spend.any:
            groups = await self.groups_of(spend, user)
            applies = await spend.standings(self._asker(team, channel, user, groups))
            owned = await spend.owned(user, groups)
        return [b.to_dict() for b in usage_message(own, applies, owned, sentence)]

    async def home(self, team: str, user: str) -> list[dict[str, Any]]:
        """The Home's sections: the budgets that apply anywhere (workspace, the person, their
        groups, packs, per request) and those of the channels they used the bot in lately."""
        spend = self.ledger()
        own = await self.own(team, user, spend)
        applies: list[Standing] = []
        owned: list[Standing] = []
        if spend is not None and spend.any:
            groups = await self.groups_of(spend, user)
            applies = await spend.standings(self._asker(team, "", user, groups))
            async with self.db.reading() as session:
                channels = await recent_channels(session, team, user)
            for channel in channels:
                here = await spend.standings(self._asker(team, channel, user, groups))
                applies += [s for s in here if s.scope_kind == "channel"]
            owned = await spend.owned(user, groups)
        applies = list({s.name: s for s in applies}.values())
        return [b.to_dict() for b in usage_home(own, applies, owned, sentence)]
