"""The card's one list of fields: each argument the write sends, under its label in words, with
the preview's old value where the tool has one (old → new), in the order a person reads them.

The arguments the preview's fields (`Change`) show come first, in the order the tool wrote
them: a preview field is joined to its argument by name ("due date" ~ `due_date`) or by value
(its new value is the argument's value or the start of it). The value shown is always the
argument's, as it will be sent; a preview field that says more than the argument's characters
(a name the tool resolved, "adds docs; removes ui") adds that as "means …". Then the arguments
no preview field named, in the order the tool declares them; last the preview fields that are
no argument (a merge's base branch), as the tool wrote them: what is sent comes before what
is only said about it, so it is the part the card has room for.

How a value reads depends on its kind (`bot.tools.field_kinds`): a person as `@name` (looked
up by the card's publisher: never a `<@U…>`, which would notify them), a channel as `<#C…>`, a
date in words (a date has no time zone, so every viewer reads the same day), a date and time
as Slack's date token (each viewer sees it in their own time zone). Only values that are
exactly a Slack id or an ISO date become such tokens, and the token is built from the parsed
value, never from the model's text; anything else is shown as sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from bot.slack.card_text import one_line, safe
from bot.text import escape
from bot.tools.field_kinds import FieldKind, Kind, label_of
from bot.tools.invisible import visible
from bot.tools.shown import ShownValue

# `\Z`, not `$`: `$` also matches before a final newline ("UBOB\n" is no id).
USER_ID = re.compile(r"^[UW][A-Z0-9]{2,31}\Z")
CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,31}\Z")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
ISO_DATETIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})\Z"
)
PREFIX_MIN = 40  # a preview value this long or longer may be the start of an argument
OLD_MAX = 700  # characters of an old value (the target's current state) on the card
MEANS_MAX = 700
LIST_MAX = 1200  # characters of a list of people or channels in words (a field holds 2,000)
NO_NAME = "Slack gave no name for this person: check the id before approving"


def slack_date(moment: datetime, seconds: bool = False) -> str:
    """Slack's date token: each viewer reads `moment` in their own time zone; the fallback
    (for clients that cannot) in UTC. Built from a parsed moment, never from given text."""
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    clock = "{time_secs}" if seconds else "{time}"
    fallback = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M" + (":%S" if seconds else ""))
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} at {clock}|{fallback} UTC>"


def day_words(day: date) -> str:
    """`2026-11-27` → "Fri 27 Nov 2026" (the same for every viewer)."""
    return f"{day:%a} {day.day} {day:%b %Y}"


def _moment(raw: str) -> datetime | None:
    if not ISO_DATETIME.match(raw):
        return None
    try:  # year 1 at +14:00 is valid ISO 8601 but before Python's first UTC moment
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        year = moment.astimezone(UTC).year
    except (ValueError, OverflowError):
        return None
    return moment if 1970 <= year <= 9999 else None


def _day(raw: str) -> date | None:
    if not ISO_DATE.match(raw):
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        return None


def _person(raw: Any, people: dict[str, str]) -> str | None:
    if isinstance(raw, str) and USER_ID.match(raw) and people.get(raw):
        return safe(people[raw], 200)
    return None


def typed(kind: Kind, value: Any, people: dict[str, str]) -> str | None:
    """`value` as mrkdwn in words for its kind, or None: shown as sent (plain text)."""
    if kind is Kind.USER:
        return _person(value, people)
    if kind is Kind.CHANNEL and isinstance(value, str) and CHANNEL_ID.match(value):
        return f"<#{value}>"
    if kind is Kind.DATE and isinstance(value, str) and (day := _day(value)):
        return day_words(day)
    if kind is Kind.DATETIME and isinstance(value, str) and (moment := _moment(value)):
        return slack_date(moment, seconds=bool(moment.second))
    if kind is Kind.BOOLEAN and isinstance(value, bool):
        return "Yes" if value else "No"
    if kind in (Kind.USERS, Kind.CHANNELS) and isinstance(value, list) and value:
        one = Kind.USER if kind is Kind.USERS else Kind.CHANNEL
        shown = [typed(one, item, people) for item in value]
        joined = ", ".join(s for s in shown if s)
        return joined if all(shown) and len(joined) <= LIST_MAX else None
    return None


def listed(value: Any) -> str | None:
    """A list of words as "bug, docs" where that cannot be misread; else None (JSON)."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        return None
    if any(not v or v != v.strip() or "," in v or "\n" in v for v in value):
        return None
    return ", ".join(value)


def old_text(kind: Kind, old: str) -> str:
    """A preview's old value (the target's state now) as mrkdwn: a date in words, else as the
    tool wrote it, escaped and clipped."""
    if kind is Kind.DATE and (day := _day(old)):
        return day_words(day)
    if kind is Kind.DATETIME and (moment := _moment(old)):
        return slack_date(moment, seconds=bool(moment.second))
    return safe(one_line(old), OLD_MAX)


@dataclass(frozen=True)
class Row:
    """One field of the card."""

    label: str
    kind: Kind = Kind.TEXT
    value: ShownValue | None = None  # the argument sent (None: a preview field only)
    index: int | None = None  # its place among the arguments sent (the Show all button's)
    old: str | None = None
    new: str | None = None  # the preview's new value: shown when no argument carries it
    means: str | None = None  # what the preview says the value means, when that adds words
    words: str | None = None  # the value in words for its kind (mrkdwn), else shown as sent


def _key(name: str) -> str:
    return label_of(name).lower()


def _starts(raw: str, new: str) -> bool:
    head = new.removesuffix("…").removesuffix("...")
    return raw == new or (len(head) >= PREFIX_MIN and raw.startswith(head))


def _means(kind: Kind, new: str | None, value: ShownValue, words: str | None) -> str | None:
    """The preview's words for a value, when they say more than the value itself (`@lee` for
    the login `lee` says nothing more)."""
    if not new or kind not in (Kind.TEXT, Kind.LIST, Kind.CHOICE, Kind.OTHER):
        return None
    if _starts(value.raw, new) or new in value.raw or (words and escape(new) in words):
        return None
    return None if new.replace("@", "") == value.text.replace("@", "") else new


def field_rows(
    values: list[ShownValue],
    arguments: dict[str, Any],
    changes: list[dict[str, Any]],
    kinds: dict[str, FieldKind],
    people: dict[str, str],
) -> list[Row]:
    """The card's fields in reading order (see the module's docstring)."""
    by_key = {_key(v.name): i for i, v in enumerate(values)}
    used: set[int] = set()
    rows: list[Row] = []
    previewed_only: list[Row] = []
    for change in changes:
        field = str(change.get("field", ""))
        old, new = change.get("old"), change.get("new")
        new = None if new is None else str(new)
        index = by_key.get(_key(field))
        if index is None and old is None and new:
            index = next(
                (i for i, v in enumerate(values) if i not in used and _starts(v.raw, new)), None
            )
        if index is None or index in used:
            if old is not None or new is not None:  # neither: nothing sent, nothing to say
                previewed_only.append(Row(label_of(field), old=_str(old), new=new))
            continue
        used.add(index)
        rows.append(_argument_row(values[index], index, arguments, kinds, people, field, old, new))
    for index, value in enumerate(values):
        if index not in used:
            rows.append(_argument_row(value, index, arguments, kinds, people))
    return rows + previewed_only


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _argument_row(
    value: ShownValue,
    index: int,
    arguments: dict[str, Any],
    kinds: dict[str, FieldKind],
    people: dict[str, str],
    field: str | None = None,
    old: Any = None,
    new: str | None = None,
) -> Row:
    spec = kinds.get(value.name)
    kind = spec.kind if spec else Kind.TEXT
    sent = arguments.get(value.name)
    words = typed(kind, sent, people)
    if words is None and kind is Kind.LIST and (plain := listed(sent)) is not None:
        value = ShownValue(value.name, value.raw, visible(plain), value.notes)
    if words is None and kind is Kind.USER and isinstance(sent, str) and USER_ID.match(sent):
        value = ShownValue(value.name, value.raw, value.text, (*value.notes, NO_NAME))
    label = spec.label if spec else label_of(field or value.name)
    if field is not None and _key(field) != _key(value.name):
        label = label_of(field)  # the preview's word for it ("Repository" for `repo`)
    return Row(
        label=label,
        kind=kind,
        value=value,
        index=index,
        old=_str(old),
        means=_means(kind, new, value, words),
        words=words,
    )
