"""The part of an approval card that shows what the write sends, and the "Show all" modals.

Every argument the write will send is on the card (`bot.tools.shown` says how it reads) or one
click from it: a value too long for the card shows its start, its total length and a "Show all
N characters" button; arguments past the card's room sit behind "…and N more fields". Those
buttons carry ids only (proposal, revision, digest, which part), and the modal they open is
built from the proposal's arguments at that revision, split over as many blocks as it needs.

Text is shown as `plain_text` (no emoji), so Slack renders no formatting, link or mention in
it: the approver reads the characters that will be sent, hidden ones as codes. Only a value in
words for its kind (`card_fields.typed`: a person, a channel, a date) is mrkdwn, built by the
bot from the parsed value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
    TextObject,
)

from bot.slack.card_fields import MEANS_MAX, Row, old_text
from bot.slack.card_text import one_line, safe
from bot.slack.unlinked import unlinked, unlinked_pieces
from bot.text import escape
from bot.tools.field_kinds import label_of
from bot.tools.shown import MAX_CHUNKS, ShownValue, chunks

SHOW_ALL = "proposal_show_all"
SHOW_MODAL = "proposal_show_modal"
CARD_VALUE = 1000  # UTF-16 units of a value shown on the card itself
ROWS_ON_CARD = 16  # at most two blocks each; a message holds 50
PREVIEW_MAX = 900  # characters of a preview field's new value (a field holds 2,000)
MORE = "more"
DIGEST_LENGTH = 10
SHORT = 150  # a value this short, plain and on one line sits beside its name


def digest_of(arguments_hash: str) -> str:
    """The short digest a card shows of the arguments it shows (from the revision's hash)."""
    return arguments_hash[:DIGEST_LENGTH]


def show_ref(proposal_id: int, revision: int, digest: str, part: str) -> str:
    return f"{proposal_id}:{revision}:{digest}:{part}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(value: ShownValue, shown_on_card: int | None, row: Row | None = None) -> str:
    """The field's label, its old value, its length, what it means and its notes (mrkdwn,
    escaped)."""
    head = f"*{safe(row.label if row else label_of(value.name), 200)}*"
    if value.length == 0:
        head += " _(empty)_"
    elif shown_on_card is not None:
        head += f" · {value.length:,} characters, the first {shown_on_card:,} shown here"
    elif value.length > 80:
        head += f" · {value.length:,} characters"
    lines = [head]
    if row and row.old is not None:
        lines.append(f"~{old_text(row.kind, row.old)}~ →")
    if row and row.means:
        lines.append(f"_means_ {safe(one_line(row.means), MEANS_MAX)}")
    lines += [f"• {escape(unlinked(note))}" for note in value.notes]
    return _clip("\n".join(lines), 3000)


def _show_button(ref: str, value: ShownValue) -> ButtonElement:
    return ButtonElement(
        text=f"Show all {value.length:,} characters", action_id=SHOW_ALL, value=ref
    )


def value_blocks(
    value: ShownValue, ref: str, room: int = CARD_VALUE, row: Row | None = None
) -> list[Block]:
    """An argument on a card: its label, and its value or the start of it with a Show all
    button when it is longer than `room`."""
    first = chunks(value.raw, room)[0] if value.raw else ""
    clipped = value.shown_length > room
    label = SectionBlock(
        text=MarkdownTextObject(text=_label(value, len(first) if clipped else None, row)),
        accessory=_show_button(ref, value) if clipped else None,
    )
    if not first:
        return [label]
    return [label, SectionBlock(text=PlainTextObject(text=unlinked(first), emoji=False))]


@dataclass(frozen=True)
class CardRef:
    proposal_id: int
    revision: int
    digest: str

    def part(self, part: str) -> str:
        return show_ref(self.proposal_id, self.revision, self.digest, part)


def _short(row: Row) -> bool:
    """A row that sits beside its label: a value in words, or a short plain one-liner."""
    value = row.value
    if value is None or row.words is not None or value.length == 0:
        return True
    return value.shown_length <= SHORT and not value.notes and "\n" not in value.text


def _pair(row: Row) -> list[TextObject]:
    """A short row as two fields: its label (with the old value and what it means) and its
    value: in words (mrkdwn, built from the parsed value) or as sent (plain text)."""
    label = f"*{safe(row.label, 200)}*"
    old = None if row.old is None else f"~{old_text(row.kind, row.old)}~ → "
    value = row.value
    if value is None:  # a preview field: the tool's own words for the target
        new = safe(row.new, PREVIEW_MAX) if row.new else "_(empty)_"
        return [MarkdownTextObject(text=label), MarkdownTextObject(text=(old or "") + new)]
    if row.means:
        label += f"\n_means_ {safe(row.means, MEANS_MAX)}"
    if row.words is not None or value.length == 0:
        words = row.words if row.words is not None else "_(empty)_"
        return [MarkdownTextObject(text=label), MarkdownTextObject(text=(old or "") + words)]
    if old:
        label += "\n" + old.rstrip()
    return [
        MarkdownTextObject(text=label),
        PlainTextObject(text=unlinked(value.text), emoji=False),
    ]


def row_blocks(rows: list[Row], ref: CardRef, room: int = CARD_VALUE) -> list[Block]:
    """Rows as blocks: short ones two to a line (label, value), five to a section; long ones
    each a label and its value (or the start of it and a Show all button)."""
    blocks: list[Block] = []
    pairs: list[TextObject] = []
    for row in rows:
        if _short(row):
            pairs += _pair(row)
            if len(pairs) == 10:
                blocks.append(SectionBlock(fields=pairs))
                pairs = []
            continue
        if pairs:
            blocks.append(SectionBlock(fields=pairs))
            pairs = []
        if row.value is not None:  # a long row is an argument's (`_short` says so)
            blocks += value_blocks(row.value, ref.part(f"a{row.index}"), room, row)
    if pairs:
        blocks.append(SectionBlock(fields=pairs))
    return blocks


def field_blocks(rows: list[Row], ref: CardRef) -> list[Block]:
    """The card's fields: the first `ROWS_ON_CARD`, then a button to the rest."""
    blocks = row_blocks(rows[:ROWS_ON_CARD], ref)
    more = max(0, len(rows) - ROWS_ON_CARD)
    if more:
        button = ButtonElement(
            text=f"…and {more} more field{'s' if more != 1 else ''}",
            action_id=SHOW_ALL,
            value=ref.part(MORE),
        )
        blocks.append(ActionsBlock(block_id=f"more:{ref.proposal_id}", elements=[button]))
    return blocks


def _modal(title: str, ref: CardRef, part: str, blocks: list[Block]) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": SHOW_MODAL,
        "private_metadata": ref.part(part),
        "title": PlainTextObject(text=_clip(title, 24)).to_dict(),
        "close": PlainTextObject(text="Close").to_dict(),
        "blocks": [b.to_dict() for b in blocks],
    }


def _whole(value: ShownValue) -> list[Block]:
    return [
        SectionBlock(text=PlainTextObject(text=shown, emoji=False))
        for piece in chunks(value.raw)
        for shown in unlinked_pieces(piece)
        if shown
    ]


def value_modal(value: ShownValue, ref: CardRef, part: str, description: str) -> dict[str, Any]:
    """One argument, all of it: its notes, then its shown text over as many blocks as needed
    (a value needing more than a modal holds was refused before any card was made)."""
    label = label_of(value.name)
    head = (
        f"{escape(unlinked(_clip(description, 1500)))}\n*{safe(label, 200)}*: "
        f"{value.length:,} characters, all of them below · revision {ref.revision} · "
        f"digest `{ref.digest}`"
    )
    blocks: list[Block] = [ContextBlock(elements=[MarkdownTextObject(text=_clip(head, 3000))])]
    if value.notes:
        notes = "\n".join(f"• {escape(unlinked(n))}" for n in value.notes)
        blocks.append(SectionBlock(text=MarkdownTextObject(text=_clip(notes, 3000))))
    blocks += _whole(value)[:MAX_CHUNKS]
    return _modal(label or "Value", ref, part, blocks)


def more_modal(rows: list[Row], ref: CardRef, description: str) -> dict[str, Any]:
    """The fields the card had no room for, in the card's order; each argument in full where
    the modal has room, else its start and its own Show all button."""
    said = escape(unlinked(_clip(description, 1500)))
    head = f"{said}\nRevision {ref.revision} · digest `{ref.digest}`"
    blocks: list[Block] = [ContextBlock(elements=[MarkdownTextObject(text=_clip(head, 3000))])]
    for offset, row in enumerate(rows):
        left = 100 - len(blocks) - 2 * (len(rows) - offset - 1) - 1
        value = row.value
        if value is None or _short(row):
            blocks += row_blocks([row], ref)
            continue
        whole = _whole(value)
        if len(whole) <= left:
            blocks.append(SectionBlock(text=MarkdownTextObject(text=_label(value, None, row))))
            blocks += whole
        else:
            blocks += row_blocks([row], ref)
    return _modal("More fields", ref, MORE, blocks[:100])
