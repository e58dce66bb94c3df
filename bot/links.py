"""Signed, expiring links to pages this bot serves over HTTP (e.g. a task behind a card).

A link names its path, the workspace it belongs to, and when it stops working, and carries an
HMAC of all three; the server refuses any link whose signature does not match or whose time
is up. Ids in a path are therefore not enough to read anything: the link must have been made
by this bot, for that workspace, recently.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True)
class LinkSigner:
    base_url: str
    key: bytes
    ttl_seconds: float = 7 * 24 * 3600

    @classmethod
    def from_secret(cls, base_url: str, secret: str, ttl_seconds: float) -> LinkSigner:
        # A key of its own, derived so that a link never reveals anything about the secret.
        key = hmac.new(secret.encode(), b"countersign signed links v1", hashlib.sha256).digest()
        return cls(base_url.rstrip("/"), key, ttl_seconds)

    def _signature(self, path: str, team: str, expires: int) -> str:
        message = f"{path}\n{team}\n{expires}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def url(self, path: str, team: str, now: float | None = None) -> str:
        expires = int((now if now is not None else time.time()) + self.ttl_seconds)
        query = urlencode(
            {"team": team, "expires": expires, "sig": self._signature(path, team, expires)}
        )
        return f"{self.base_url}{path}?{query}"

    def verify(
        self, path: str, team: str, expires: str, signature: str, now: float | None = None
    ) -> bool:
        if not expires.isdigit() or len(expires) > 12:
            return False
        expected = self._signature(path, team, int(expires))
        fresh = int(expires) > (now if now is not None else time.time())
        return hmac.compare_digest(expected, signature) and fresh
