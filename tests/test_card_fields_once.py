"""The card says everything once (issue 26): one list of fields in reading order, labels in
words, each value as it will be sent, people by name without a ping, dates in words and date-
times as Slack's date token, changed fields as old → new, and one context line with who asked,
until when, the revision and the digest the buttons carry."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from bot.approvals.machine import State
from bot.db.models import Task
from bot.slack import cards
from bot.slack.card_fields import slack_date
from bot.tools.field_kinds import field_kinds
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, StoredMessage
from tests.harness import RunningBot
from tests.test_approvals_flow import CREATE, call, card_mrkdwn, card_text, proposals, tasks_in_db

MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
LABELS = ("Title", "Description", "Assignee", "Due date", "Priority")


def texts(card: StoredMessage) -> list[str]:
    """Every text object of the card, in order (mrkdwn and plain)."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("mrkdwn", "plain_text") and isinstance(node.get("text"), str):
                found.append(node["text"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(card.blocks or [])
    return found


def notified(card: StoredMessage) -> set[str]:
    """Who Slack notifies for a posted message: every `<@U…>` in its text and mrkdwn (plain
    text is never parsed)."""
    return {m.group(1) for m in MENTION.finditer(card_mrkdwn(card))}


def context_lines(card: StoredMessage) -> list[str]:
    return [e["text"] for b in card.blocks or [] if b["type"] == "context" for e in b["elements"]]


async def propose(
    bot: RunningBot,
    slack: FakeSlack,
    model: FakeOpenAI,
    tool: str,
    args: dict[str, Any],
    then: str | None = None,
) -> StoredMessage:
    """The card of one call (`then`: the model's answer once it is settled)."""
    model.script(Script(tool_calls=[call(tool, args)]), *([Script(text=then)] if then else []))
    await bot.mention("C1", "do it", slack)
    await bot.idle()
    return slack.cards("C1")[-1]


async def test_each_field_once_in_words_in_reading_order_and_one_context_line(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    card = await propose(bot, fake_slack, fake_model, "create_task", CREATE)
    shown = texts(card)
    labels = [t for t in shown if t.strip("*") in LABELS]
    assert [t.strip("*") for t in labels] == list(LABELS)  # each once, in reading order
    everything = card_text(card)
    for machine in ("due_date", '"*assignee*"', "UDANA", "Exactly what will be sent"):
        assert machine not in everything
    assert "Fix login bug" in shown  # as sent, as plain text (no formatting applied)
    assert "@udana" in shown  # the person by name ...
    assert "Fri 27 Nov 2026" in shown  # ... the date in words
    (line,) = [t for t in context_lines(card) if t.startswith("Asked by")]
    (proposal,) = await proposals(bot)
    digest = proposal.arguments_hash[:10]
    assert re.fullmatch(
        rf"Asked by <@UALICE> · expires <!date\^\d+\^\{{date_short_pretty\}} at \{{time\}}\|"
        rf"[0-9-]+ [0-9:]+ UTC> · revision 1 · digest `{digest}`",
        line,
    )
    # The buttons carry the same revision and digest: a click counts for what the card shows.
    values = {e["value"] for b in card.blocks or [] for e in b.get("elements", []) if "value" in e}
    assert values == {f"{proposal.id}:1:{digest}"}
    assert notified(card) == {"UALICE"}  # the requester; never the assignee the model chose


async def test_changed_fields_read_old_to_new(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    async with bot.countersign.db.transaction() as session:
        session.add(
            Task(
                team_id="T0TEST",
                title="Old title",
                assignee="UDANA",
                due_date=date(2026, 11, 27),
                created_by="UALICE",
            )
        )
    new = {"task_id": 1, "title": "New title", "assignee": "UBOB", "due_date": "2026-12-04"}
    card = await propose(bot, fake_slack, fake_model, "update_task", new, then="Updated.")
    shown = texts(card)
    assert "*Title*\n~Old title~ →" in shown
    assert "New title" in shown  # the new value as sent, plain
    assert "~@udana~ → @ubob" in shown
    assert "~Fri 27 Nov 2026~ → Fri 4 Dec 2026" in shown
    assert notified(card) == {"UALICE"}
    await bot.click(card, cards.APPROVE, "UALICE", "C1")
    await bot.idle()
    (task,) = await tasks_in_db(bot)
    assert (task.title, task.assignee, str(task.due_date)) == ("New title", "UBOB", "2026-12-04")


async def test_a_scheduled_time_is_a_slack_date_token_shown_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    at = datetime.now(UTC).replace(microsecond=0, second=0) + timedelta(days=2)
    args = {"channel": "CDEV", "text": "Standup moved", "post_at": at.isoformat()}
    card = await propose(bot, fake_slack, fake_model, "schedule_message", args)
    shown = texts(card)
    token = f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|"
    assert sum(token in t for t in shown) == 1  # the preview's "post at" is the same field
    assert sum(t == "*Post at*" for t in shown) == 1
    assert shown.count("Standup moved") == 1  # the preview's "message" is the argument's value
    assert "<#CDEV>" in shown  # a channel as Slack shows it


async def test_a_name_from_slack_cannot_ping_or_format_and_an_unknown_person_shows_as_sent(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_slack.users["UEVIL"] = {"profile": {"display_name": "<!channel> *boss*"}}
    card = await propose(
        bot, fake_slack, fake_model, "create_task", {**CREATE, "assignee": "UEVIL"}
    )
    assert "<!channel>" not in card_mrkdwn(card)
    assert any("@&lt;!channel&gt; *boss*" in t for t in texts(card))
    assert notified(card) == {"UALICE"}

    fake_slack.users["UNOBODY"] = {"name": "", "real_name": "", "profile": {"display_name": ""}}
    card = await propose(
        bot, fake_slack, fake_model, "create_task", {**CREATE, "assignee": "UNOBODY"}
    )
    shown = card_text(card)
    assert "UNOBODY" in [t for t in texts(card)]  # shown as sent, plain: no name to show
    assert "Slack gave no name for this person" in shown
    assert "UNOBODY" not in notified(card)


# -- what no built-in tool sends: values of an MCP tool's schema ------------------------------
SCHEMA = {
    "type": "object",
    "properties": {
        "reviewers": {"type": "array", "items": {"type": "string", "x-slack": "user"}},
        "room": {"type": "string", "x-slack": "channel"},
        "day": {"type": "string", "format": "date"},
        "starts": {"type": "string", "format": "date-time"},
        "urgent": {"type": "boolean"},
    },
}


def view(arguments: dict[str, Any], people: dict[str, str] | None = None) -> cards.CardView:
    return cards.CardView(
        proposal_id=1,
        revision=2,
        state=State.PROPOSED,
        description="Book the review",
        changes=[],
        requester="UALICE",
        expires_at=datetime(2026, 11, 27, 12, 0, tzinfo=UTC),
        approvers=[],
        approvals_required=1,
        destructive=False,
        arguments=arguments,
        arguments_hash="0123456789abcdef",
        kinds={k.name: k for k in field_kinds(SCHEMA)},
        people=people or {},
    )


def test_many_people_named_by_a_model_are_shown_by_name_and_notify_nobody() -> None:
    ids = [f"U{n:04d}X" for n in range(30)]
    _, blocks = cards.approval_card(view({"reviewers": ids}, {i: f"@p{i}" for i in ids[:20]}))
    card = StoredMessage("1", "", None, "B1", None, blocks=blocks)
    assert notified(card) == {"UALICE"}
    # 30 people is more than the card names (20 looked up): the list is shown as sent.
    assert any(t.startswith('["U0000X"') for t in texts(card))
    _, blocks = cards.approval_card(view({"reviewers": ids[:3]}, {i: f"@p{i}" for i in ids}))
    card = StoredMessage("1", "", None, "B1", None, blocks=blocks)
    assert "@pU0000X, @pU0001X, @pU0002X" in texts(card)


def test_values_that_are_not_what_their_schema_says_are_shown_as_sent() -> None:
    hostile = {
        "room": "C1|<!channel>",
        "day": "next friday <!here>",
        "starts": "2026-13-45T99:00Z",
        "urgent": "yes",
    }
    _, blocks = cards.approval_card(view(hostile))
    card = StoredMessage("1", "", None, "B1", None, blocks=blocks)
    shown = texts(card)
    for value in hostile.values():
        assert value in shown  # plain text: Slack parses nothing in it
    assert card_mrkdwn(card).count("<!date") == 1  # the expiry alone
    assert "<#" not in card_text(card)


def test_good_values_read_in_words_and_tokens_are_built_from_the_parsed_value() -> None:
    good = {"room": "C0GENERAL", "day": "2026-02-28", "starts": "2026-05-01T09:00:00+02:00"}
    _, blocks = cards.approval_card(view({**good, "urgent": True}))
    shown = texts(StoredMessage("1", "", None, "B1", None, blocks=blocks))
    assert "<#C0GENERAL>" in shown
    assert "Sat 28 Feb 2026" in shown
    assert "<!date^1777618800^{date_short_pretty} at {time}|2026-05-01 07:00 UTC>" in shown
    assert "Yes" in shown
    assert slack_date(datetime(2026, 5, 1, 7, 0, 5, tzinfo=UTC), seconds=True).endswith(
        "{time_secs}|2026-05-01 07:00:05 UTC>"
    )


def test_a_schema_s_own_field_names_are_shown_inert_with_hidden_characters_as_codes() -> None:
    hostile = {"<!here> urgent\u202e": "x"}  # an MCP server names its fields
    card_view = view(hostile)
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in hostile}}
    kinds = {k.name: k for k in field_kinds(schema)}
    _, blocks = cards.approval_card(replace(card_view, kinds=kinds))
    card = StoredMessage("1", "", None, "B1", None, blocks=blocks)
    assert "<!here>" not in card_mrkdwn(card)
    assert "&lt;!here&gt; urgent[U+202E]" in card_text(card)
