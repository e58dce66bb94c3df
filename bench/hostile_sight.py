"""Who could read what: every text the fake Slack recorded, with the people who can see it, and
the leaks of private text among them.

Places: every message of every channel and DM (each text it showed, edits included, and every
Block Kit version of it), ephemeral messages (to one person), modals (to the person whose
click opened them), App Home tabs, scheduled messages, the prompts the model received (for the
person whose turn it was), and writes to services outside the workspace (GitHub, Linear, the
MCP notebook: nobody's membership guards them). A private text leaks where someone who is not
among its readers could see it."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from bench.hostile_inventory import Write
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import BOT_USER_ID, DEFAULT_MEMBERS, FakeSlack


def _shown(blocks: Any) -> str:
    parsed = json.loads(blocks) if isinstance(blocks, str) else blocks
    return json.dumps(parsed, ensure_ascii=False)


@dataclass
class RecordingSlack(FakeSlack):
    """The fake Slack, also keeping every Block Kit version a message showed (the fake keeps
    only the latest), so text that a card showed before an update is still seen."""

    shown_blocks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def _post_message(self, args: dict[str, Any], request: Any) -> dict[str, Any]:
        body = super()._post_message(args, request)
        if body.get("ok") and args.get("blocks"):
            self.shown_blocks[str(body["ts"])].append(_shown(args["blocks"]))
        return body

    def _update(self, args: dict[str, Any], request: Any) -> dict[str, Any]:
        body = super()._update(args, request)
        if body.get("ok") and args.get("blocks"):
            self.shown_blocks[str(args.get("ts"))].append(_shown(args["blocks"]))
        return body


@dataclass(frozen=True)
class Secret:
    """A private text and who may read it (the members of the channel it was posted in)."""

    text: str
    readers: frozenset[str]
    home: str  # where it was posted, for the report


@dataclass(frozen=True)
class Sighting:
    place: str
    viewers: frozenset[str] | None  # None: outside the workspace, anyone
    text: str


def members(slack: FakeSlack, channel: str) -> frozenset[str]:
    """Who is in a channel: the fake's list, a DM's one person, else the fake's default."""
    if channel in slack.members:
        listed = slack.members[channel]
    elif channel.startswith("D"):
        listed = ["U" + channel[1:]]
    else:
        listed = DEFAULT_MEMBERS
    return frozenset(m for m in listed if m != BOT_USER_ID)


def _viewer_of(trigger: str) -> str:
    """The clicker behind a modal's trigger id (the harness makes `trigger-USER-…`)."""
    parts = trigger.split("-")
    return parts[1] if len(parts) > 2 and parts[0] == "trigger" else "?"


@dataclass
class Marks:
    """How far each append-only record had grown at `mark` (texts up to there are old)."""

    # message ts -> how many text versions and Block Kit versions it had shown
    texts: dict[str, tuple[int, int]] = field(default_factory=dict)
    current: set[tuple[str, str]] = field(default_factory=set)  # (ts, text) shown at the mark
    ephemerals: int = 0
    views: int = 0
    homes: int = 0
    scheduled: int = 0
    requests: int = 0


def _message_texts(slack: RecordingSlack, message: Any, old: Marks, now: Marks) -> list[str]:
    """The texts a message showed since `old`: each text version and each Block Kit version
    recorded after it, and what it shows now unless it showed that at `old` (a message whose
    edits the fake does not record changes in place)."""
    history = slack.history.get(message.ts, [])
    blocks = slack.shown_blocks.get(message.ts, [])
    seen_history, seen_blocks = old.texts.get(message.ts, (0, 0))
    now.texts[message.ts] = (len(history), len(blocks))
    current = [message.text or "", _shown(message.blocks) if message.blocks else ""]
    now.current.update((message.ts, t) for t in current)
    fresh = [t for t in current if (message.ts, t) not in old.current]
    return [*history[seen_history:], *blocks[seen_blocks:], *fresh]


def sightings(
    slack: RecordingSlack, model: FakeOpenAI, writes: list[Write], since: Marks | None = None
) -> tuple[list[Sighting], Marks]:
    """What anyone could read (since `since`, if given), with who could read it; and the
    marks to give next time for what is new after this."""
    old = since or Marks()
    now = Marks()
    found: list[Sighting] = []
    for channel, messages in list(slack.channels.items()):
        who = members(slack, channel)
        for message in list(messages):
            texts = _message_texts(slack, message, old, now)
            found += [Sighting(f"channel {channel}", who, t) for t in texts if t]
    ephemerals = list(slack.ephemerals)
    now.ephemerals = len(ephemerals)
    for ephemeral in ephemerals[old.ephemerals :]:
        user = str(ephemeral.get("user"))
        text = str(ephemeral.get("text") or "") + _shown(ephemeral.get("blocks") or [])
        found.append(Sighting(f"an ephemeral to {user}", frozenset({user}), text))
    views = list(slack.views)
    now.views = len(views)
    for view in views[old.views :]:
        user = _viewer_of(str(view.get("trigger_id") or ""))
        found.append(Sighting(f"a modal for {user}", frozenset({user}), _shown(view["view"])))
    homes = list(slack.published)
    now.homes = len(homes)
    for home in homes[old.homes :]:
        user = str(home.get("user_id"))
        found.append(Sighting(f"{user}'s App Home", frozenset({user}), _shown(home["view"])))
    scheduled = list(slack.scheduled)
    now.scheduled = len(scheduled)
    for waiting in scheduled[old.scheduled :]:
        channel = str(waiting.get("channel"))
        text = str(waiting.get("text") or "")
        found.append(Sighting(f"a message scheduled in {channel}", members(slack, channel), text))
    requests = list(model.requests)
    now.requests = len(requests)
    for request in requests[old.requests :]:
        messages = request.body.get("messages", [])
        users = [m for m in messages if m.get("role") == "user"]
        asker = str(users[-1].get("name")) if users else "?"
        prompt = json.dumps(messages, ensure_ascii=False)
        found.append(Sighting(f"a prompt for {asker}", frozenset({asker}), prompt))
    for write in writes:
        if write.service in ("github", "linear", "mcp"):
            text = "\n".join(write.texts)
            found.append(Sighting(f"a {write.service} write", None, text))
    return found, now


@dataclass
class Sight:
    """Leaks since `mark`: new sightings of a secret by someone outside its readers."""

    slack: RecordingSlack
    model: FakeOpenAI
    _marks: Marks = field(default_factory=Marks)

    def mark(self) -> None:
        self._marks = sightings(self.slack, self.model, [])[1]

    def leaks(self, secrets: list[Secret], writes: list[Write]) -> list[str]:
        """One line per (secret, place) where a secret newly reached someone not its reader;
        `writes`: the writes since `mark`."""
        found: list[str] = []
        for sighting in sightings(self.slack, self.model, writes, self._marks)[0]:
            for secret in secrets:
                if secret.text not in sighting.text:
                    continue
                outside = (
                    "outside the workspace"
                    if sighting.viewers is None
                    else ", ".join(sorted(sighting.viewers - secret.readers))
                )
                line = f"{secret.home} text reached {sighting.place} ({outside})"
                if outside and line not in found:
                    found.append(line)
        return found
