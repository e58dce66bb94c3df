"""What a card's buttons and modals carry: ids only. The proposal's id, the revision of its
arguments the card shows, the digest of those arguments, and for a Show all button which part
it opens; anything else in a button value or modal metadata is a crafted payload."""

from __future__ import annotations

from dataclasses import dataclass


class BadValue(ValueError):
    """A button value or modal metadata that this app did not make."""


def card_ref(proposal_id: int, revision: int, digest: str = "") -> str:
    return f"{proposal_id}:{revision}:{digest}" if digest else f"{proposal_id}:{revision}"


@dataclass(frozen=True)
class ParsedRef:
    proposal_id: int
    revision: int | None
    digest: str | None = None  # the arguments' digest the card showed
    part: str | None = None  # what a Show all button opens: "a3" (an argument) or "more"


def parse_ref(value: object) -> ParsedRef:
    """A button value or modal metadata this app made (`id`, `id:revision`,
    `id:revision:digest` or `id:revision:digest:part`); `BadValue` for anything else (a
    crafted payload). A bare id (cards posted before revisions existed) has no revision."""
    if not isinstance(value, str) or len(value) > 64:
        raise BadValue("not a card reference")
    pieces = value.split(":")
    if len(pieces) > 4:
        raise BadValue("not a card reference")
    head, revision, digest, part = [*pieces, "", "", ""][:4]
    if (
        not head.isdigit()
        or len(head) > 18
        or (revision and (not revision.isdigit() or len(revision) > 9))
        or (digest and (not revision or len(digest) > 16 or not _hex(digest)))
        or (part and (not digest or not (part == "more" or _index(part))))
    ):
        raise BadValue("not a card reference")
    return ParsedRef(int(head), int(revision) if revision else None, digest or None, part or None)


def _hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _index(part: str) -> bool:
    return part.startswith("a") and part[1:].isdigit() and len(part) <= 6


def parse_card_ref(value: object) -> tuple[int, int | None]:
    """`(proposal id, revision)` of `parse_ref`."""
    ref = parse_ref(value)
    return ref.proposal_id, ref.revision
