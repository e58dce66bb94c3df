"""The bot scopes each Slack Web API method the bot calls needs, as Slack's method pages say
(docs.slack.dev/reference/methods/<method>, "Scopes · Bot token"), and what stops working
without them, in words.

Slack checks a conversation method's scope by the kind of conversation it is called on:
`conversations.history` takes `channels:history` in a public channel, `groups:history` in a
private one, `im:history` in a DM and `mpim:history` in a group DM, and otherwise answers
`{"ok": false, "error": "missing_scope", "needed": "groups:history", "provided": "…"}`. So
each entry says which scopes Slack accepts on each kind of conversation (Slack's part, which
the project's fake Slack enforces) and on which kinds the bot calls the method (the bot's
part). `manifest.yml` must grant one accepted scope for each (tests/test_scopes.py), and
`countersign doctor` checks the installed token the same way (`gaps`).

Methods that need no scope (`auth.test`, `chat.getPermalink`, `chat.scheduledMessages.list`,
`views.*`) are listed too: a method the bot starts calling is then never silently unchecked.
Not here: `apps.connections.open`, which Socket Mode calls with the app-level token
(`connections:write`, granted when that token is made, not in the manifest).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """A kind of conversation, as Slack's scopes divide them (the words are for people)."""

    PUBLIC = "public channels"
    PRIVATE = "private channels"
    DM = "DMs"
    GROUP_DM = "group DMs"


def _per_kind(public: str, private: str, dm: str, group_dm: str) -> dict[Kind, frozenset[str]]:
    """Each argument: the scopes (space-separated) Slack accepts on that kind."""
    words = (public, private, dm, group_dm)
    return {kind: frozenset(w.split()) for kind, w in zip(Kind, words, strict=True)}


@dataclass(frozen=True)
class MethodScopes:
    """What Slack accepts for one method, and where and why the bot calls it."""

    breaks: str  # what the bot cannot do without the scope, in words
    accepts: frozenset[str] = frozenset()  # any one of these; empty (and no by_kind): none
    by_kind: Mapping[Kind, frozenset[str]] = field(default_factory=dict)  # conversation methods
    used_on: frozenset[Kind] = frozenset()  # the kinds of conversation the bot calls it on

    def accepted(self, kind: Kind | None) -> frozenset[str]:
        """The scopes Slack takes for a call on a conversation of `kind` (None: not about a
        conversation, or one whose kind is unknown: any the method takes anywhere)."""
        if not self.by_kind:
            return self.accepts
        if kind is None:
            return frozenset().union(*self.by_kind.values())
        return self.by_kind[kind]

    def needs(self) -> list[tuple[Kind | None, frozenset[str]]]:
        """What the bot needs of a token for its calls: per kind it calls the method on, one
        of the scopes Slack accepts there. Empty: no scope at all."""
        if not self.by_kind:
            return [(None, self.accepts)] if self.accepts else []
        return [(kind, self.by_kind[kind]) for kind in Kind if kind in self.used_on]


CHANNELS = frozenset({Kind.PUBLIC, Kind.PRIVATE})
CONVERSATIONS = frozenset({Kind.PUBLIC, Kind.PRIVATE, Kind.DM})  # where the bot talks
_HISTORY = _per_kind("channels:history", "groups:history", "im:history", "mpim:history")
_READ = _per_kind("channels:read", "groups:read", "im:read", "mpim:read")
_CHAT = frozenset({"chat:write"})
_REPLY = "answer, post approval cards and notes"

FILE_DOWNLOAD = "files.download (url_private)"

METHODS: dict[str, MethodScopes] = {
    "auth.test": MethodScopes("nothing: Slack needs no scope for it"),
    # Called with the app-level token (xapp-), whose own scope, connections:write, is chosen
    # when that token is generated (README step 3): nothing the bot token or manifest grants.
    "apps.connections.open": MethodScopes("nothing: it takes the app-level token"),
    "chat.postMessage": MethodScopes(_REPLY, _CHAT),
    "chat.update": MethodScopes("write replies as they arrive and update cards", _CHAT),
    "chat.postEphemeral": MethodScopes("answer privately inside a channel", _CHAT),
    "chat.scheduleMessage": MethodScopes("send the scheduled posts the slack tools make", _CHAT),
    "chat.scheduledMessages.list": MethodScopes("nothing: Slack needs no scope for it"),
    "chat.getPermalink": MethodScopes("nothing: Slack needs no scope for it"),
    "chat.startStream": MethodScopes("stream replies natively", _CHAT),
    "chat.appendStream": MethodScopes("stream replies natively", _CHAT),
    "chat.stopStream": MethodScopes("stream replies natively", _CHAT),
    # Slack's changelog of 2026-03-05: assistant:write still taken, chat:write from now on.
    "assistant.threads.setStatus": MethodScopes(
        "show that the bot is thinking", frozenset({"chat:write", "assistant:write"})
    ),
    "assistant.threads.setSuggestedPrompts": MethodScopes(
        "suggest prompts when someone opens the DM", frozenset({"assistant:write"})
    ),
    "assistant.threads.setTitle": MethodScopes(
        "title DM conversations", frozenset({"assistant:write"})
    ),
    "agents.sessions.setStatus": MethodScopes(
        "show the agent's status and Slack's Stop button", _CHAT
    ),
    "conversations.history": MethodScopes(
        "read a channel for the slack tools, find its own earlier posts and audit checkpoints",
        by_kind=_HISTORY,
        used_on=CONVERSATIONS,
    ),
    "conversations.replies": MethodScopes(
        "read the thread it was called into, and find its own earlier replies",
        by_kind=_HISTORY,
        used_on=CONVERSATIONS,
    ),
    # DMs too: whose DM it is, before a card or a note is posted there (`bot.poster`)
    "conversations.info": MethodScopes(
        "tell who may read a channel or DM before it shows anything there",
        by_kind=_READ,
        used_on=CONVERSATIONS,
    ),
    "conversations.members": MethodScopes(
        "tell who may read a channel or DM before it shows anything there",
        by_kind=_READ,
        used_on=CONVERSATIONS,
    ),
    "conversations.open": MethodScopes(
        "open a DM with one person: private cards, approvers' copies, private answers",
        by_kind=_per_kind("channels:manage", "groups:write", "im:write", "mpim:write"),
        used_on=frozenset({Kind.DM}),
    ),
    "conversations.setTopic": MethodScopes(
        "set a channel's topic (the slack tools)",
        by_kind=_per_kind(
            "channels:write.topic channels:manage",
            "groups:write.topic groups:write",
            "im:write.topic im:write",
            "mpim:write.topic mpim:write",
        ),
        used_on=CHANNELS,
    ),
    "users.info": MethodScopes(
        "tell members from guests and show people's names", frozenset({"users:read"})
    ),
    "users.lookupByEmail": MethodScopes(
        "find a person by email (the slack tools)", frozenset({"users:read.email"})
    ),
    "usergroups.users.list": MethodScopes(
        "let a user group approve (approver groups in the policy)",
        frozenset({"usergroups:read"}),
    ),
    # Not a Web API method: the download of a shared file's `url_private` (`bot.files`),
    # which without files:read answers Slack's sign-in page instead of the file.
    FILE_DOWNLOAD: MethodScopes(
        "read the files shared in a thread (screenshots, logs, CSVs, PDFs)",
        frozenset({"files:read"}),
    ),
    "views.open": MethodScopes("nothing: Slack needs no scope for it"),
    "views.push": MethodScopes("nothing: Slack needs no scope for it"),
    "views.update": MethodScopes("nothing: Slack needs no scope for it"),
    "views.publish": MethodScopes("nothing: Slack needs no scope for it"),
}


def method_name(sdk_name: str) -> str:
    """slack_sdk's method name (`conversations_setTopic`) as Slack's (`conversations.setTopic`)."""
    return sdk_name.replace("_", ".")


@dataclass(frozen=True)
class Gap:
    """Scopes a token lacks: one of `any_of` is needed for `methods` (on `where`)."""

    any_of: frozenset[str]
    where: Kind | None
    methods: tuple[str, ...]
    breaks: tuple[str, ...]

    def sentence(self) -> str:
        """`im:write (for DMs), without which the bot cannot open a DM with one person…`."""
        scopes = " or ".join(sorted(self.any_of))
        where = f" (for {self.where})" if self.where else ""
        return f"{scopes}{where}, without which the bot cannot {' nor '.join(self.breaks)}"


def gaps(granted: Iterable[str], methods: Iterable[str] | None = None) -> list[Gap]:
    """What a token with `granted` scopes lacks for the bot's calls (all of `METHODS`, or
    `methods`), one `Gap` per missing scope choice, the methods it breaks gathered."""
    have = set(granted)
    found: dict[tuple[frozenset[str], Kind | None], list[str]] = {}
    for name in sorted(METHODS if methods is None else methods):
        for kind, any_of in METHODS[name].needs():
            if not any_of & have:
                found.setdefault((any_of, kind), []).append(name)
    return [
        Gap(
            any_of,
            kind,
            tuple(names),
            tuple(dict.fromkeys(METHODS[n].breaks for n in names)),
        )
        for (any_of, kind), names in found.items()
    ]


def needed(method: str, kind: Kind | None, granted: Iterable[str]) -> str | None:
    """Slack's `needed` for a call of `method` on a conversation of `kind` with a token of
    `granted` scopes (the accepted scopes, comma-separated), or None when the token may call
    it. A method not in the table: None (nothing known to check)."""
    entry = METHODS.get(method)
    if entry is None:
        return None
    accepted = entry.accepted(kind)
    if not accepted or accepted & set(granted):
        return None
    return ",".join(sorted(accepted))
