"""Leases: a process's share of a budget window's room, so most model calls are reserved in
memory, with no await (issue 29: at most 5 ms added per call with 50 turns on the loop).

A lease is granted only under the window row's lock, from room nobody holds: for every window
used + reserved + leased <= limit (+ raises), across replicas (bot/spend/ledger_leases.py).
`Book.take` is the fast path of `Spend.reserve`: when every budget that applies has a lease
here, on its current window, granted under the budget as it is in force now, with room for
the estimate, the estimate is taken from each, all or none, and the call's reservation row is
written behind (`Ticket`, bot/spend/flusher.py). Otherwise the call takes the locked path,
which first gives back this process's own lease room on its windows (counted as free: a
process never refuses itself while it holds room), decides, and grants a lease sized from
what is free (bot/spend/ledger_leases.py `size`: all of it when no other process holds a
lease there, half when one does, never more than CAP estimates).

A call refused while other processes' leases hold room bumps the window's reclaim generation;
every holder's flusher sees it within an interval and gives its unused room back; the refused
call decides again (at most RETRIES times, INTERVAL apart), and only then is refused. Per-turn
budgets (window `turn`) are never leased: a turn's window serves one turn, a lease would gain
nothing, so a call a per-turn budget applies to always takes the locked path.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from bot.spend.budget_model import Budget
from bot.spend.ledger_calls import Grant, Hold, Ticket

INTERVAL = 0.05  # seconds between the flusher's rounds
RETRIES = 3  # a call refused while others hold leases decides again this many times
RENEW = 1.0  # seconds between renewals of the leases held
IDLE = 10.0  # seconds unused before a lease is given back
LAPSE = timedelta(seconds=30)  # not renewed this long: its holder died, charged whole
LOW = 2  # fewer estimates than this left in a lease still used: the flusher tops it up
RECENT = 1.0  # seconds: a lease used this recently is "still used"


@dataclass
class Lease:
    """This process's lease on one window: its room left here, the budget as in force when
    it was granted (a reload changing the budget makes it unusable), the reclaim generation
    it has seen, the estimate it was sized for, and when a call last took from it."""

    window_id: int
    budget: Budget
    room_nano: int
    room_tokens: int
    seen: int
    nano: int
    tokens: int
    used_at: float = field(default_factory=time.monotonic)

    def fits(self, nano: int, tokens: int) -> bool:
        money = self.budget.usd is None or self.room_nano >= nano
        return money and (self.budget.tokens is None or self.room_tokens >= tokens)

    def taken(self, nano: int, tokens: int) -> tuple[int, int]:
        """What a call of this estimate takes (a dimension the budget does not limit: 0)."""
        return (0 if self.budget.usd is None else nano, 0 if self.budget.tokens is None else tokens)


class Book:
    """This process's leases, and what it did in memory that is not written yet."""

    def __init__(self) -> None:
        self.holder = uuid.uuid4().hex
        self.leases: dict[tuple[str, str], Lease] = {}
        self.tickets: list[Ticket] = []  # taken, not written yet
        self.returned: dict[int, list[int]] = {}  # room given back, not written yet
        self.renewed = time.monotonic()
        self.ever = False  # whether it was ever granted a lease

    @property
    def busy(self) -> bool:
        return bool(self.leases or self.tickets or self.returned)

    def take(self, hold: Hold) -> Ticket | None:
        """The fast path: the estimate taken from a lease on every window, all or none; None
        if one has no lease (or no room, or was granted under another budget)."""
        found = []
        for budget, key in zip(hold.budgets, hold.keys, strict=True):
            lease = self.leases.get(key)
            if lease is None or lease.budget != budget or not lease.fits(hold.nano, hold.tokens):
                return None
            found.append(lease)
        now = time.monotonic()
        took = []
        for lease in found:
            nano, tokens = lease.taken(hold.nano, hold.tokens)
            lease.room_nano -= nano
            lease.room_tokens -= tokens
            lease.used_at = now
            took.append((lease.window_id, nano, tokens))
        ticket = Ticket(
            hold.asker,
            hold.model,
            hold.nano,
            hold.tokens,
            [
                {"window": lease.window_id, "budget": b.name, "scope": b.scope.kind}
                for lease, b in zip(found, hold.budgets, strict=True)
            ],
            tuple(took),
            hold.now,
        )
        self.tickets.append(ticket)
        return ticket

    def freeze(self, keys: list[tuple[str, str]]) -> tuple[tuple[int, int, int], ...]:
        """Empty the leases on `keys` (a locked call counts their room as free): what they
        held, which that call gives back."""
        found = []
        for key in keys:
            lease = self.leases.get(key)
            if lease is not None and (lease.room_nano or lease.room_tokens):
                found.append((lease.window_id, lease.room_nano, lease.room_tokens))
                lease.room_nano = lease.room_tokens = 0
        return tuple(found)

    def thaw(self, returned: tuple[tuple[int, int, int], ...]) -> None:
        """A locked call failed: the room it was to give back is this process's again."""
        by_window = {lease.window_id: lease for lease in self.leases.values()}
        for window_id, nano, tokens in returned:
            lease = by_window.get(window_id)
            if lease is not None:
                lease.room_nano += nano
                lease.room_tokens += tokens
            else:
                self.give(window_id, nano, tokens)

    def give(self, window_id: int, nano: int, tokens: int) -> None:
        """Room to give back at the next flush."""
        if nano or tokens:
            returned = self.returned.setdefault(window_id, [0, 0])
            returned[0] += nano
            returned[1] += tokens

    def give_back(self, key: tuple[str, str], drop: bool = False) -> None:
        """Give back a lease's unused room (at the next flush); `drop`: forget it too."""
        lease = self.leases.pop(key) if drop else self.leases.get(key)
        if lease is not None:
            self.give(lease.window_id, lease.room_nano, lease.room_tokens)
            lease.room_nano = lease.room_tokens = 0

    def granted(self, grants: dict[tuple[str, str], Grant], hold: Hold) -> None:
        """Leases a locked call was granted: their room is this process's to take from."""
        budgets = dict(zip(hold.keys, hold.budgets, strict=True))
        self.ever = self.ever or bool(grants)
        for key, grant in grants.items():
            lease = self.leases.get(key)
            if lease is None or lease.window_id != grant.window_id:
                lease = Lease(grant.window_id, budgets[key], 0, 0, grant.reclaim, 0, 0)
                self.leases[key] = lease
            lease.budget = budgets[key]
            lease.room_nano += grant.nano
            lease.room_tokens += grant.tokens
            lease.seen = max(lease.seen, grant.reclaim)
            lease.nano, lease.tokens = hold.nano, hold.tokens

    def renew_due(self) -> bool:
        return bool(self.leases) and time.monotonic() - self.renewed >= RENEW

    def drain(self) -> tuple[list[tuple[Ticket, bool]], tuple[tuple[int, int, int], ...]]:
        """The calls to write and the room to give back, taken out of the book (`restore`
        puts them back if writing them fails)."""
        tickets = [(t, t.settled) for t in self.tickets]
        for ticket in self.tickets:
            ticket.written = True
        returned = tuple((w, n, t) for w, (n, t) in sorted(self.returned.items()))
        self.tickets, self.returned = [], {}
        return tickets, returned

    def restore(
        self, tickets: list[tuple[Ticket, bool]], returned: tuple[tuple[int, int, int], ...]
    ) -> None:
        for ticket, _ in tickets:
            ticket.written = False
        self.tickets[:0] = [t for t, _ in tickets]
        for window_id, nano, tokens in returned:
            self.give(window_id, nano, tokens)

    def stale(self, budgets: dict[str, Budget], current: dict[str, str]) -> list[tuple[str, str]]:
        """Leases to give back: their budget was changed or removed, their window is over,
        or nobody took from them for IDLE seconds."""
        now = time.monotonic()
        return [
            key
            for key, lease in self.leases.items()
            if budgets.get(key[0]) != lease.budget
            or current.get(key[0]) != key[1]
            or now - lease.used_at >= IDLE
        ]

    def low(self) -> list[tuple[str, str]]:
        """Leases still used that are running out: to top up."""
        now = time.monotonic()
        return [
            key
            for key, lease in self.leases.items()
            if now - lease.used_at < RECENT
            and lease.nano | lease.tokens
            and not lease.fits(LOW * lease.nano, LOW * lease.tokens)
        ]
