"""What a file is, decided by its bytes (magic numbers), never by its name or Slack's mimetype.

A file named `report.png` whose bytes are text is text; an executable named `notes.txt` is
neither text nor an image. Text means valid UTF-8 without NUL bytes (a BOM is allowed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

FileKind = Literal["image", "text", "pdf", "other"]

# (prefix, offset, mimetype) for the images a model takes: JPEG, PNG, GIF, WebP.
_IMAGES: tuple[tuple[bytes, int, str], ...] = (
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
)


@dataclass(frozen=True)
class Sniffed:
    kind: FileKind
    mimetype: str
    width: int | None = None
    height: int | None = None


def sniff(data: bytes) -> Sniffed:
    for prefix, offset, mime in _IMAGES:
        if data[offset : offset + len(prefix)] == prefix:
            return _image(mime, data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _image("image/webp", data)
    if data[:5] == b"%PDF-":
        return Sniffed("pdf", "application/pdf")
    if is_text(data):
        return Sniffed("text", "text/plain")
    return Sniffed("other", "application/octet-stream")


def is_text(data: bytes) -> bool:
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _image(mime: str, data: bytes) -> Sniffed:
    try:
        size = _dimensions(mime, data)
    except (struct.error, IndexError, ValueError):
        size = None
    if size is None or min(size) <= 0:
        return Sniffed("image", mime)
    return Sniffed("image", mime, size[0], size[1])


def _dimensions(mime: str, data: bytes) -> tuple[int, int] | None:
    """Width and height from the image's header; None when it does not say (the token
    estimate then assumes the largest image)."""
    if mime == "image/png":
        if data[12:16] != b"IHDR":
            return None
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if mime == "image/gif":
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if mime == "image/webp":
        chunk = data[12:16]
        if chunk == b"VP8X":
            w = int.from_bytes(data[24:27], "little") + 1
            h = int.from_bytes(data[27:30], "little") + 1
            return w, h
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if chunk == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return int(w) & 0x3FFF, int(h) & 0x3FFF
        return None
    return _jpeg_dimensions(data)


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    """The first start-of-frame marker's size; segments are walked, never past the end."""
    i = 2
    for _ in range(10_000):
        while i < len(data) and data[i] == 0xFF:
            i += 1
        if i + 3 > len(data):
            return None
        marker = data[i]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 1
            continue
        (length,) = struct.unpack(">H", data[i + 1 : i + 3])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 4 : i + 8])
            return int(w), int(h)
        if length < 2:
            return None
        i += 1 + length
    return None
