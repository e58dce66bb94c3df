"""Small valid files for the file tests: a PNG of a given size, a PDF with a line of text,
and an "evil" server that records whatever reaches it."""

from __future__ import annotations

import struct
import threading
import zlib
from dataclasses import dataclass, field

from aiohttp import web

from tests.fakes.server import ThreadedServer


def png(width: int = 4, height: int = 3) -> bytes:
    """A valid PNG (grey, 8-bit) of `width` x `height` pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pdf(text: str) -> bytes:
    """A one-page PDF whose text layer says `text` (ASCII), with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


@dataclass
class Evil:
    """A server that plays an attacker's host: it records every request and the
    Authorization header it carried, and answers with bytes (or a redirect to itself)."""

    seen: list[tuple[str, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._any)
        self._server = ThreadedServer(app)

    def start(self) -> Evil:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def port(self) -> int:
        return self._server.port

    async def _any(self, request: web.Request) -> web.Response:
        with self._lock:
            self.seen.append((request.path_qs, request.headers.get("Authorization")))
        if request.path.startswith("/again"):
            raise web.HTTPFound("/stolen")
        return web.Response(body=b"stolen", content_type="text/plain")
