"""The small Slack world of the one-door test (tests/test_one_door_model.py): its people, channels
and user group, who is where now, and who can read what. Written apart from the bot's code,
from Slack's rules as issue 25 states them: a private channel's content is its members';
a public channel is readable by every full member of the workspace, and by guests only where
they are members; a DM with the bot is its one person's."""

from __future__ import annotations

from dataclasses import dataclass, field

FULL_MEMBERS = ("UALICE", "UBOB", "UCAROL", "UDANA", "UMALLORY")
GUESTS = ("UGUEST",)
PEOPLE = (*FULL_MEMBERS, *GUESTS)
GROUP = "S0LEADS"
PUBLIC = "C1"  # where most work is asked for
APPROVERS_CHANNEL = "CAPPROVE"  # public too: `route: channel:CAPPROVE`
EXEC = "GEXEC"  # a private channel: #exec

# Markers of private text: whatever carries one may be shown only to the readers of its source.
EXEC_MARK = "hushhush"  # every text said in #exec carries it


def dm_of(user: str) -> str:
    """The bot's DM with `user`, as the fake Slack names it."""
    return "D" + user.lstrip("UW")


def dm_mark(user: str) -> str:
    """Carried by every text `user` says to the bot in their DM."""
    return f"dmonly{user.lower()}"


@dataclass
class World:
    """Who is where now (the fake Slack is kept equal to it)."""

    members: dict[str, set[str]] = field(default_factory=dict)
    groups: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def initial(cls) -> World:
        return cls(
            members={
                PUBLIC: {*FULL_MEMBERS},
                EXEC: {"UALICE", "UCAROL"},
                APPROVERS_CHANNEL: {"UBOB", "UCAROL"},
            },
            groups={GROUP: {"UCAROL"}},
        )

    def viewers(self, place: str) -> set[str]:
        """Everyone who can see what is posted in `place`."""
        if place.startswith("D"):
            return {p for p in PEOPLE if dm_of(p) == place}
        if place == EXEC:
            return set(self.members.get(EXEC, set()))
        # a public channel: every full member, and guests who are members
        return set(FULL_MEMBERS) | (self.members.get(place, set()) & set(GUESTS))

    def readers(self, audience: frozenset[str]) -> set[str]:
        """Who may read data whose sources are the places in `audience` (all of them)."""
        found = set(PEOPLE)
        for place in audience:
            found &= self.viewers(place)
        return found

    def can_read(self, user: str, audience: frozenset[str]) -> bool:
        return user in self.readers(audience)

    def groups_of(self, user: str) -> frozenset[str]:
        return frozenset(g for g, people in self.groups.items() if user in people)

    def expand(self, names: tuple[str, ...]) -> set[str]:
        """User ids as they are, user groups as their members now."""
        found: set[str] = set()
        for name in names:
            found |= self.groups.get(name, set()) if name.startswith("S") else {name}
        return found
