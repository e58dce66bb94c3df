"""Slack's documented rate limit of every Web API method the bot calls, in one table.

Slack counts "per API method per workspace per app" in tiers (docs.slack.dev, "Rate limits"):
Tier 1 1+ a minute, Tier 2 20+, Tier 3 50+, Tier 4 100+ ("+": at least that many; the real
limit is unknown, so a 429 teaches a lower rate, see `bot/slack/learned_rates.py`). "Special"
methods have their own rule: `chat.postMessage` "1 per second per channel, short bursts >1
allowed" (a token bucket per channel, `Bucket`), and "several hundred" a minute per workspace.
A method not in the table is taken to be Tier 3 (the common tier of reads and writes; most
methods are Tier 2 or above).

`chat.update` and the three streaming methods are not here: their budgets (`bot/slack/
budgets.py`) order their callers (finals first, a stop for every open stream) and must not be
counted twice. Nor are `auth.test` ("Special"; asked once per process: bolt and `Reach` keep
its answer, and the client makes one call for everyone asking at once) and
`apps.connections.open` (Tier 1, Socket Mode's connection: its SDK paces reconnections), which
must never wait behind a budget (an event waits for bolt's first `auth.test`).
"""

from __future__ import annotations

from dataclasses import dataclass

TIER_1, TIER_2, TIER_3, TIER_4 = 1, 20, 50, 100

# Reading a conversation: Tier 3, or Tier 1 with pages of at most 15 messages for some apps
# (`SLACK_HISTORY_TIER`). At Tier 1 a read whose minute is spent is skipped, not waited for (a
# reply would wait up to a minute for context it can do without).
HISTORY_METHODS = ("conversations.replies", "conversations.history")
TIER_1_PAGE = 15

# Callers of these wait up to this long for their budget (a full minute's window always frees
# a call within 61.5 s unless Slack's Retry-After paused the method longer); past it the call is
# not made and the caller gets `CallSkipped`, as it would get Slack's refusal.
DEFAULT_PATIENCE_SECONDS = 70.0
# A modal's trigger id lives 3 s: a later `views.open` would be refused anyway.
TRIGGER_PATIENCE_SECONDS = 2.0


@dataclass(frozen=True)
class Bucket:
    """A token bucket: `burst` calls at once (it starts full), then one every `every` seconds."""

    burst: int
    every: float


@dataclass(frozen=True)
class MethodLimit:
    per_minute: int  # per workspace
    learned: bool = True  # Slack documents a floor ("+"): a 429 teaches a lower rate
    # Nice to have (a status, a title, offered prompts): skipped, never waited for, when spent.
    cosmetic: bool = False
    patience: float = DEFAULT_PATIENCE_SECONDS
    # Also counted per channel, in a token bucket.
    per_channel: Bucket | None = None


# chat.postMessage: "1 per second, short bursts >1 allowed", "several hundred a minute" for the
# workspace: per channel one a second with a burst of three (a card, a "Thinking…" placeholder
# and a final at once; the next a second later).
POST_PER_CHANNEL = Bucket(burst=3, every=1.0)

# Reads at Tier 1: once a minute, never waited for.
TIER_1_READS = MethodLimit(TIER_1, learned=False, patience=0.0)

METHODS: dict[str, MethodLimit] = {
    # the thread's status, title and prompts (Tier 3): cosmetic
    "agents.sessions.setStatus": MethodLimit(TIER_3, cosmetic=True),
    "assistant.threads.setStatus": MethodLimit(TIER_3, cosmetic=True),
    "assistant.threads.setTitle": MethodLimit(TIER_3, cosmetic=True),
    "assistant.threads.setSuggestedPrompts": MethodLimit(TIER_3, cosmetic=True),
    # posting
    "chat.postMessage": MethodLimit(300, learned=False, per_channel=POST_PER_CHANNEL),
    "chat.postEphemeral": MethodLimit(TIER_4),
    "chat.scheduleMessage": MethodLimit(TIER_3),
    "chat.scheduledMessages.list": MethodLimit(TIER_3),
    "chat.getPermalink": MethodLimit(TIER_3, learned=False),  # "Special": taken as Tier 3
    # views (Tier 4); a modal must open within its trigger's 3 s
    "views.open": MethodLimit(TIER_4, patience=TRIGGER_PATIENCE_SECONDS),
    "views.push": MethodLimit(TIER_4, patience=TRIGGER_PATIENCE_SECONDS),
    "views.publish": MethodLimit(TIER_4),
    # people
    "users.info": MethodLimit(TIER_4),
    "users.lookupByEmail": MethodLimit(TIER_3),
    "usergroups.users.list": MethodLimit(TIER_2),
    # conversations (history and replies: Tier 1 for some apps, learned from their 429s)
    "conversations.replies": MethodLimit(TIER_3),
    "conversations.history": MethodLimit(TIER_3),
    "conversations.info": MethodLimit(TIER_3),
    "conversations.members": MethodLimit(TIER_4),
    "conversations.open": MethodLimit(TIER_3),
    "conversations.setTopic": MethodLimit(TIER_2),
}

# Paced by their own budgets in `bot/slack/budgets.py`.
PACED_ELSEWHERE = frozenset(
    {"chat.update", "chat.appendStream", "chat.startStream", "chat.stopStream"}
)
NOT_BUDGETED = frozenset({"auth.test", "apps.connections.open"})

UNKNOWN = MethodLimit(TIER_3)


def app_limits(history_tier: int) -> dict[str, MethodLimit]:
    """Limits Slack sets for this app in place of the documented ones (not floors: nothing
    to learn, nor to scale): conversation reads at Tier 1 (`SLACK_HISTORY_TIER=1`)."""
    return dict.fromkeys(HISTORY_METHODS, TIER_1_READS) if history_tier == 1 else {}


def limit_of(method: str) -> MethodLimit | None:
    """The method's limit; None for the methods paced elsewhere or not budgeted."""
    if method in PACED_ELSEWHERE or method in NOT_BUDGETED:
        return None
    return METHODS.get(method, UNKNOWN)
