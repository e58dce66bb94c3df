"""The one guarded way to download a Slack file (`url_private`).

The bot token is sent to Slack's file host only: `files.slack.com` in production (the file
host of GovSlack's `slack-gov.com` likewise), or, where `SLACK_API_URL` points elsewhere (the
tests, the sandbox), exactly that URL's scheme, host and port. A `url_private` anywhere else
is refused, not fetched without the token: a file of Slack's is only ever on Slack's file
host, so another address in a message is a forgery or a mistake, and fetching it would let a
message make the bot call any address it can reach (an IP literal on the internal network
included). Redirects are followed by hand, at most `MAX_REDIRECTS`, each target checked the
same way; a redirect to another host is refused, so the token never leaves with it. A URL
carrying a user name or password (`http://files.slack.com@evil/`) is refused.

Sizes are capped per file and per turn while the bytes arrive (a Content-Length is used only
to refuse early; it is never trusted to stop reading). No proxy settings from the
environment and no cookies are used.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from yarl import URL

PER_FILE_BYTES = 10 * 1024 * 1024
PER_TURN_BYTES = 25 * 1024 * 1024
MAX_REDIRECTS = 3
TIMEOUT_SECONDS = 30.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SLACK_API_HOSTS = {"slack.com": "files.slack.com", "slack-gov.com": "files.slack-gov.com"}


class Refused(Exception):
    """The file was not downloaded; `reason` is plain words, safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class FileHost:
    """The one origin the bot token may be sent to for a file."""

    scheme: str
    host: str
    port: int

    @classmethod
    def for_api(cls, api_url: str) -> FileHost:
        url = URL(api_url)
        host = (url.host or "").lower()
        scheme = url.scheme.lower()
        port = url.port or (443 if scheme == "https" else 80)
        return cls(scheme, _SLACK_API_HOSTS.get(host, host), port)

    def owns(self, url: URL) -> bool:
        """`url` is on this host exactly: scheme, host and port, and no user info."""
        if url.user is not None or url.password is not None or not url.is_absolute():
            return False
        return (
            url.scheme.lower() == self.scheme
            and (url.host or "").lower() == self.host
            and url.port == self.port
        )


@dataclass
class Allowance:
    """What a turn may still download, in bytes (`PER_TURN_BYTES` to start)."""

    left: int = PER_TURN_BYTES


@dataclass(frozen=True)
class Downloaded:
    data: bytes
    content_type: str  # what the server said (Slack answers its sign-in page as text/html)


class Downloader:
    def __init__(
        self,
        token: str,
        host: FileHost,
        per_file: int = PER_FILE_BYTES,
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        self._token = token
        self.host = host
        self.per_file = per_file
        self.timeout = timeout

    async def fetch(self, url_private: str, allowance: Allowance) -> Downloaded:
        """The file's bytes; raises `Refused` (nothing sent anywhere but the file host)."""
        try:
            url = URL(url_private)
        except (ValueError, TypeError):
            raise Refused("its address is not a valid URL") from None
        if not self.host.owns(url):
            raise Refused("its address is not on Slack's file host")
        limit = min(self.per_file, allowance.left)
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with aiohttp.ClientSession(
                trust_env=False, cookie_jar=aiohttp.DummyCookieJar(), timeout=timeout
            ) as session:
                for _ in range(MAX_REDIRECTS + 1):
                    async with session.get(
                        url,
                        headers={"Authorization": f"Bearer {self._token}"},
                        allow_redirects=False,
                    ) as response:
                        if response.status in _REDIRECTS:
                            url = self._next(url, response.headers.get("Location"))
                            continue
                        if response.status != 200:
                            raise Refused(f"Slack answered HTTP {response.status}")
                        data = await _read(response, limit, self.per_file)
                        allowance.left -= len(data)
                        return Downloaded(data, response.content_type or "")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Refused(f"the download failed ({type(exc).__name__})") from None
        raise Refused("Slack redirected it too many times")

    def _next(self, current: URL, location: str | None) -> URL:
        if not location:
            raise Refused("Slack redirected it nowhere")
        try:
            target = current.join(URL(location))
        except (ValueError, TypeError):
            raise Refused("Slack redirected it to an invalid address") from None
        if not self.host.owns(target):
            raise Refused("it was redirected away from Slack's file host")
        return target


async def _read(response: aiohttp.ClientResponse, limit: int, per_file: int) -> bytes:
    """At most `limit` bytes, counted as they arrive."""
    too_big = (
        f"it is larger than {per_file // (1024 * 1024)} MB"
        if limit >= per_file
        else "the files of this message together are over the size a turn may read"
    )
    declared = response.content_length
    if declared is not None and declared > limit:
        raise Refused(too_big)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise Refused(too_big)
        chunks.append(chunk)
    return b"".join(chunks)
