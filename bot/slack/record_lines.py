"""A person's record in words: when (Slack's own date formatting, in each viewer's time
zone), where (a link that opens the thread at the bot's answer), what a conversation is called,
and what the bot did ("read messages of #general, 3 messages", "proposed Create task 'X' →
succeeded by @Bob"). Never raw JSON, never an id a person would have to decode.

Everything people, tools or the model wrote is escaped and clipped (`safe`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.approvals.escalation import ESCALATION
from bot.db.models import Message, Proposal
from bot.provenance import source_of
from bot.slack.card_text import safe
from bot.states import state_label
from bot.tools.field_kinds import label_of

TITLE_SHOWN = 80


def when(moment: datetime) -> str:
    """`<!date^…>`: "today at 3:04 PM" in the viewer's time zone, UTC text where it is not
    rendered (notifications, old clients)."""
    fallback = moment.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(moment.timestamp())}^{{date_pretty}} at {{time}}|{fallback}>"


def reply_link(
    team_url: str | None, channel: str, thread_ts: str, reply_ts: str | None = None
) -> str | None:
    """A link that opens the thread at the reply `reply_ts` (Slack's reply permalinks carry
    `thread_ts` and `cid`), else at its root; in a DM's main timeline, at the reply."""
    if not team_url:
        return None
    base = f"{team_url.rstrip('/')}/archives/{channel}"
    if thread_ts:
        at = reply_ts or thread_ts
        return f"{base}/p{at.replace('.', '')}?thread_ts={thread_ts}&cid={channel}"
    return f"{base}/p{reply_ts.replace('.', '')}" if reply_ts else base


def place(channel: str) -> str:
    """Where a conversation took place, as Slack shows it to the viewer."""
    return "your DM with Countersign" if channel.startswith("D") else f"<#{channel}>"


def title_text(title: str | None, channel: str) -> str:
    """The conversation's title (plain words, escaped), or where it was for older ones."""
    if title:
        return safe(title, TITLE_SHOWN)
    return "A conversation in your DM" if channel.startswith("D") else "A conversation"


def linked_title(
    title: str | None, team_url: str | None, channel: str, thread_ts: str, reply_ts: str | None
) -> str:
    shown = title_text(title, channel)
    link = reply_link(team_url, channel, thread_ts, reply_ts)
    return f"*<{link}|{shown}>*" if link else f"*{shown}*"


def decider(decided_by: str) -> str:
    """Who (or what) decided, in words: a person as a mention, a policy rule by its name, a
    standing grant, or the escalation; never an internal key."""
    if decided_by == ESCALATION:
        return "the policy's escalation (nobody answered)"
    if decided_by.startswith("policy:"):
        return f"the rule “{safe(decided_by.removeprefix('policy:'), 80)}”"
    if decided_by.startswith("grant:"):
        return "a standing grant"
    return f"<@{safe(decided_by, 32)}>"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _result(content: str | None) -> dict[str, Any] | None:
    try:
        loaded = json.loads(content or "")
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None


def result_words(content: str | None) -> str:
    """What a tool's result amounts to, in words: "3 messages", "it failed: …", or ""."""
    result = _result(content)
    if result is None:
        return ""
    status = result.get("status")
    if status in ("error", "failed") and isinstance(result.get("error"), str):
        return f"it failed: {safe(result['error'], 200)}"
    if status in ("declined", "expired"):
        return str(status)
    for key, value in result.items():
        if isinstance(value, list):
            noun = label_of(key).lower()
            if len(value) == 1 and noun.endswith("s"):
                noun = noun[:-1]
            return f"{len(value)} {safe(noun, 40)}"
    return ""


def _declared(message: Message) -> str:
    """The tool's own words for what it read (a `Source` stored as JSON, or, from older packs,
    `tool: words`), or ""."""
    name = message.tool_name or ""
    source = message.source or ""
    if source.lstrip().startswith("{"):
        found = source_of(source)
        return found.name if found is not None and found.kind == "tool" else ""
    prefix = f"{name}: "
    return source[len(prefix) :] if name and source.startswith(prefix) else ""


def tool_words(message: Message, proposal: Proposal | None) -> str:
    """A tool's work in a sentence: the proposal it became, or what a read read."""
    if proposal is not None:
        line = f"proposed {safe(proposal.description, 200)} → *{state_label(proposal.state)}*"
        if proposal.decided_by:
            line += f" by {decider(proposal.decided_by)}"
        return line
    label = label_of(message.tool_name or "a tool")
    if message.content is None:
        return f"proposed {safe(label, 80)} → *waiting for approval*"
    declared = _declared(message)
    line = f"read {safe(declared, 200)}" if declared else f"used {safe(label, 80)}"
    outcome = result_words(message.content)
    return f"{line}, {outcome}" if outcome else line


def calls_words(message: Message) -> str:
    """The tools an assistant message asked for, by their labels."""
    names = [
        label_of(str((call.get("function") or {}).get("name") or "a tool"))
        for call in message.tool_calls or []
        if isinstance(call, dict)
    ]
    return ", ".join(safe(n, 60) for n in names[:5]) + (" …" if len(names) > 5 else "")
