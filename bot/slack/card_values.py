"""The part of an approval card that shows what the write sends, and the "Show all" modals.

Every argument the write will send is on the card (`bot.tools.shown` says how it reads) or one
click from it: a value too long for the card shows its start, its total length and a "Show all
N characters" button; arguments past the card's room sit behind "…and N more fields". Those
buttons carry ids only (proposal, revision, digest, which part), and the modal they open is
built from the proposal's arguments at that revision, split over as many blocks as it needs.

Values are shown as `plain_text` (no emoji), so Slack renders no formatting, link or mention in
them: the approver reads the characters that will be sent, hidden ones as codes.
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

from bot.text import escape
from bot.tools.shown import MAX_CHUNKS, ShownValue, chunks

SHOW_ALL = "proposal_show_all"
SHOW_MODAL = "proposal_show_modal"
CARD_VALUE = 1000  # UTF-16 units of a value shown on the card itself
ARGS_ON_CARD = 12  # two blocks each; a message holds 50
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


def _label(value: ShownValue, shown_on_card: int | None) -> str:
    """The argument's name, its length and its notes (mrkdwn, escaped)."""
    head = f"*{escape(_clip(value.name, 200))}*"
    if value.length == 0:
        head += " _(empty)_"
    elif shown_on_card is not None:
        head += f" · {value.length:,} characters, the first {shown_on_card:,} shown here"
    elif value.length > 80:
        head += f" · {value.length:,} characters"
    lines = [head, *(f"• {escape(note)}" for note in value.notes)]
    return _clip("\n".join(lines), 3000)


def _show_button(ref: str, value: ShownValue) -> ButtonElement:
    return ButtonElement(
        text=f"Show all {value.length:,} characters", action_id=SHOW_ALL, value=ref
    )


def value_blocks(value: ShownValue, ref: str, room: int = CARD_VALUE) -> list[Block]:
    """An argument on a card: its label, and its value or the start of it with a Show all
    button when it is longer than `room`."""
    first = chunks(value.raw, room)[0] if value.raw else ""
    clipped = value.shown_length > room
    label = SectionBlock(
        text=MarkdownTextObject(text=_label(value, len(first) if clipped else None)),
        accessory=_show_button(ref, value) if clipped else None,
    )
    if not first:
        return [label]
    return [label, SectionBlock(text=PlainTextObject(text=first, emoji=False))]


@dataclass(frozen=True)
class CardRef:
    proposal_id: int
    revision: int
    digest: str

    def part(self, part: str) -> str:
        return show_ref(self.proposal_id, self.revision, self.digest, part)


def sent_blocks(values: list[ShownValue], ref: CardRef, hidden_changes: int) -> list[Block]:
    """The card's "what will be sent" blocks: the first `ARGS_ON_CARD` arguments, then a
    button to the rest (and to preview fields the card had no room for)."""
    head = (
        f"*Exactly what will be sent* · revision {ref.revision} · digest `{ref.digest}`"
        if values
        else f"Nothing else is sent · revision {ref.revision} · digest `{ref.digest}`"
    )
    blocks: list[Block] = [ContextBlock(elements=[MarkdownTextObject(text=head)])]
    pairs: list[TextObject] = []  # short values, name and value side by side, 5 to a section
    for index, value in enumerate(values[:ARGS_ON_CARD]):
        if 0 < value.shown_length <= SHORT and not value.notes and "\n" not in value.text:
            pairs += [
                MarkdownTextObject(text=f"*{escape(_clip(value.name, 200))}*"),
                PlainTextObject(text=value.text, emoji=False),
            ]
            if len(pairs) == 10:
                blocks.append(SectionBlock(fields=pairs))
                pairs = []
            continue
        if pairs:
            blocks.append(SectionBlock(fields=pairs))
            pairs = []
        blocks += value_blocks(value, ref.part(f"a{index}"))
    if pairs:
        blocks.append(SectionBlock(fields=pairs))
    more = max(0, len(values) - ARGS_ON_CARD) + hidden_changes
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
        SectionBlock(text=PlainTextObject(text=piece, emoji=False))
        for piece in chunks(value.raw)
        if piece
    ]


def value_modal(value: ShownValue, ref: CardRef, part: str, description: str) -> dict[str, Any]:
    """One argument, all of it: its notes, then its shown text over as many blocks as needed
    (a value needing more than a modal holds was refused before any card was made)."""
    head = (
        f"{escape(_clip(description, 1500))}\nRevision {ref.revision} · digest `{ref.digest}` · "
        f"*{escape(_clip(value.name, 200))}*: {value.length:,} characters, all of them below"
    )
    blocks: list[Block] = [ContextBlock(elements=[MarkdownTextObject(text=_clip(head, 3000))])]
    if value.notes:
        notes = "\n".join(f"• {escape(n)}" for n in value.notes)
        blocks.append(SectionBlock(text=MarkdownTextObject(text=_clip(notes, 3000))))
    blocks += _whole(value)[:MAX_CHUNKS]
    return _modal(value.name or "Value", ref, part, blocks)


def more_modal(
    values: list[ShownValue],
    changes: list[Block],
    ref: CardRef,
    first_index: int,
    description: str,
) -> dict[str, Any]:
    """The fields the card had no room for: preview fields, then arguments; each argument in
    full where the modal has room, else its start and its own Show all button."""
    head = f"{escape(_clip(description, 1500))}\nRevision {ref.revision} · digest `{ref.digest}`"
    blocks: list[Block] = [ContextBlock(elements=[MarkdownTextObject(text=_clip(head, 3000))])]
    blocks += changes
    for offset, value in enumerate(values):
        index = first_index + offset
        whole = _whole(value)
        left = 100 - len(blocks) - 2 * (len(values) - offset - 1) - 1
        if len(whole) <= left:
            blocks.append(SectionBlock(text=MarkdownTextObject(text=_label(value, None))))
            blocks += whole
        else:
            blocks += value_blocks(value, ref.part(f"a{index}"), room=CARD_VALUE)
    return _modal("More fields", ref, MORE, blocks[:100])
