"""Text out of a file, by its kind: text-like files as they are (UTF-8), PDFs through `pypdf`
(a maintained, pure-Python PDF library). Bounded: at most `MAX_CHARS` characters are kept and
at most `MAX_PAGES` pages of a PDF are read; what a model then sees is cut further to its
token share (`bot.files.shared`)."""

from __future__ import annotations

import io
import logging

from bot.files.kinds import FileKind

log = logging.getLogger(__name__)

MAX_CHARS = 400_000
MAX_PAGES = 200


def text_of(kind: FileKind, data: bytes) -> str | None:
    """The file's text; None when it has none to give (an image, another kind, a PDF that
    cannot be read or has no text layer)."""
    if kind == "text":
        return data.decode("utf-8").removeprefix("\ufeff")[:MAX_CHARS]
    if kind == "pdf":
        return _pdf_text(data)
    return None


def _pdf_text(data: bytes) -> str | None:
    from pypdf import PdfReader  # imported when a PDF comes: it is not needed at start-up

    try:
        reader = PdfReader(io.BytesIO(data))
        pages: list[str] = []
        size = 0
        for number, page in enumerate(reader.pages):
            if number >= MAX_PAGES or size >= MAX_CHARS:
                break
            text = page.extract_text() or ""
            pages.append(text)
            size += len(text)
    except Exception as exc:  # a broken or hostile PDF is unreadable, never a crash
        log.info("a PDF could not be read: %s", type(exc).__name__)
        return None
    text = "\n\n".join(p.strip() for p in pages if p.strip())[:MAX_CHARS]
    return text or None
