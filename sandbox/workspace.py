"""The sandbox's workspace: people, channels, messages, ephemeral notes, modals and App Homes.

Everything the page shows is read from here, and every change is announced to the page's
listeners (an `asyncio.Queue` each), which push it to the browser."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.files import SharedFile

TEAM_ID = "T0SANDBOX"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
BOT_NAME = "Countersign"


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    role: str
    guest: bool = False

    @property
    def label(self) -> str:
        return f"{self.name} ({self.role})"


PEOPLE = (
    Person("UALICE", "Alice", "requester"),
    Person("UBOB", "Bob", "approver"),
    Person("UGAIL", "Gail", "guest", guest=True),
)


@dataclass
class Channel:
    id: str
    name: str
    private: bool
    members: list[str]
    is_im: bool = False
    topic: str = ""


@dataclass
class Message:
    ts: str
    text: str
    user: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    streaming: bool = False
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_at: float = 0.0
    # set for an ephemeral message: the one person who sees it
    visible_to: str | None = None
    # shared files, as Slack's file objects; `file_share` when they came without text
    files: list[dict[str, Any]] = field(default_factory=list)
    subtype: str | None = None

    def shown(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "message",
            "ts": self.ts,
            "text": self.text,
            "user": self.user,
        }
        if self.user == BOT_USER_ID:
            body["bot_id"] = BOT_ID
        if self.thread_ts:
            body["thread_ts"] = self.thread_ts
        if self.files:
            body["files"] = self.files
            body["upload"] = False
            body["display_as_bot"] = False
        if self.subtype:
            body["subtype"] = self.subtype
        return body


class Workspace:
    def __init__(self) -> None:
        self.people = {p.id: p for p in PEOPLE}
        members = [p.id for p in PEOPLE] + [BOT_USER_ID]
        self.channels: dict[str, Channel] = {
            "C0GENERAL": Channel("C0GENERAL", "general", False, members),
            "C0EXEC": Channel("C0EXEC", "exec", True, ["UALICE", "UBOB", BOT_USER_ID]),
        }
        for person in PEOPLE:
            dm = self.dm_of(person.id)
            self.channels[dm] = Channel(dm, "Assistant", True, [person.id, BOT_USER_ID], True)
        self.messages: dict[str, list[Message]] = {c: [] for c in self.channels}
        self.views: dict[str, list[dict[str, Any]]] = {p.id: [] for p in PEOPLE}  # modal stacks
        self.homes: dict[str, dict[str, Any]] = {}
        self.statuses: dict[str, str] = {}  # "channel:thread_ts" -> "is thinking…"
        # "channel:thread_ts" ("channel:" for the DM itself) -> {"title", "prompts"}
        self.prompts: dict[str, dict[str, Any]] = {}
        self.listeners: list[asyncio.Queue[dict[str, Any]]] = []
        self.bot_connected = False
        self.bot_started = False  # a bot was started with the sandbox (not `--no-bot`)
        self.files: dict[str, SharedFile] = {}
        # The sandbox's address as the bot knows it (SLACK_API_URL's scheme, host and port):
        # files are served there, the one host the bot sends its token to.
        self.base = ""
        self._last_ts = 0.0
        self._ids = itertools.count(1)
        self._seed()

    @staticmethod
    def dm_of(user: str) -> str:
        return "D" + user.removeprefix("U")

    def _seed(self) -> None:
        for user, text in (
            ("UBOB", "Morning! The release train leaves Thursday; notes are still a draft."),
            ("UALICE", "I'll review the release notes today. Docs need a pass too."),
            ("UGAIL", "Hi all, Gail from the agency here. Happy to help with the docs."),
        ):
            self.add(Message(self.next_ts(), text, user), "C0GENERAL")
        self.add(
            Message(self.next_ts(), "Board meeting: the Q4 budget is confidential.", "UBOB"),
            "C0EXEC",
        )

    # -- ids -----------------------------------------------------------------------------------
    def next_ts(self) -> str:
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    def next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # -- reads ---------------------------------------------------------------------------------
    def find(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages.get(channel, []) if m.ts == ts), None)

    def user_info(self, user_id: str) -> dict[str, Any]:
        person = self.people.get(user_id)
        name = person.name if person else ("countersign" if user_id == BOT_USER_ID else user_id)
        return {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": name.lower(),
            "real_name": name,
            "tz": "UTC",
            "is_bot": user_id == BOT_USER_ID,
            "is_restricted": bool(person and person.guest),
            "is_ultra_restricted": False,
            "deleted": False,
            "profile": {
                "display_name": name,
                "real_name": name,
                "title": person.role if person else "",
            },
        }

    def channel_info(self, channel_id: str) -> dict[str, Any] | None:
        channel = self.channels.get(channel_id)
        if channel is None:
            return None
        info: dict[str, Any] = {
            "id": channel.id,
            "name": channel.name,
            "is_private": channel.private and not channel.is_im,
            "is_im": channel.is_im,
            "is_channel": not channel.is_im,
            "is_member": True,
            "num_members": len(channel.members),
            "topic": {"value": channel.topic},
            "purpose": {"value": ""},
        }
        if channel.is_im:
            info["user"] = channel.members[0]
        return info

    def state(self) -> dict[str, Any]:
        """Every channel's messages as the page shows them (ephemeral ones marked)."""
        return {
            "team": TEAM_ID,
            "bot": {
                "id": BOT_USER_ID,
                "name": BOT_NAME,
                "connected": self.bot_connected,
                "started": self.bot_started,
            },
            "people": [
                {"id": p.id, "name": p.name, "role": p.role, "label": p.label, "guest": p.guest}
                for p in PEOPLE
            ],
            "channels": [
                {
                    "id": c.id,
                    "name": c.name,
                    "private": c.private,
                    "is_im": c.is_im,
                    "members": c.members,
                    "messages": [self.page_message(m) for m in self.messages[c.id]],
                }
                for c in self.channels.values()
            ],
            "homes": self.homes,
            "views": self.views,
            "statuses": self.statuses,
            "prompts": self.prompts,
        }

    def page_message(self, m: Message) -> dict[str, Any]:
        person = self.people.get(m.user)
        return {
            "ts": m.ts,
            "text": m.text,
            "user": m.user,
            "author": BOT_NAME if m.user == BOT_USER_ID else (person.name if person else m.user),
            "thread_ts": m.thread_ts,
            "blocks": m.blocks,
            "streaming": m.streaming,
            "tasks": list(m.tasks.values()),
            "visible_to": m.visible_to,
            "files": [self.files[f["id"]].page() for f in m.files if f["id"] in self.files],
        }

    # -- writes --------------------------------------------------------------------------------
    def add(self, message: Message, channel: str) -> Message:
        self.messages.setdefault(channel, []).append(message)
        self.announce(
            {"type": "message", "channel": channel, "message": self.page_message(message)}
        )
        return message

    def changed(self, channel: str, message: Message) -> None:
        self.announce(
            {"type": "message", "channel": channel, "message": self.page_message(message)}
        )

    def remove(self, channel: str, ts: str) -> None:
        self.messages[channel] = [m for m in self.messages.get(channel, []) if m.ts != ts]
        self.announce({"type": "removed", "channel": channel, "ts": ts})

    def announce(self, change: dict[str, Any]) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(change)
