"""Files in the fake Slack: messages list them the way Slack does, and the fake serves each
file's `url_private` the way Slack's file host does.

Slack's file host serves a file only to a request carrying a token in `Authorization:
Bearer` whose app has `files:read`; otherwise it answers its sign-in page (HTML, HTTP 200),
not an error. Here `url_private` answers a 302 to the file's download address on the same
host, which serves the bytes, under the same rule. Every request to the file host is recorded
with the token it carried. A test may make a file misbehave: redirect elsewhere, leave out its
Content-Length (sent in chunks), or claim a Content-Length of its own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

SIGN_IN_PAGE = b"<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in</body></html>"


@dataclass
class FakeFile:
    id: str
    name: str
    data: bytes
    mimetype: str
    user: str
    redirect_to: str | None = None  # where url_private redirects instead of its download
    chunked: bool = False  # no Content-Length: the bytes arrive in chunks


@dataclass(frozen=True)
class FileRequest:
    host: str  # the Host header: which address the client meant
    path: str
    token: str | None  # the Bearer token it carried


@dataclass
class SlackFiles:
    slack: FakeSlack
    files: dict[str, FakeFile] = field(default_factory=dict)
    requests: list[FileRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/files-pri/{key}/download/{name}", self._download)
        app.router.add_get("/files-pri/{key}/{name}", self._private)

    def add(self, name: str, data: bytes, mimetype: str, user: str = "UALICE") -> FakeFile:
        file = FakeFile(f"F{next(self._ids):08d}", name, data, mimetype, user)
        self.files[file.id] = file
        return file

    def listing(self, file: FakeFile) -> dict[str, Any]:
        """The file object Slack puts in a message's `files`."""
        base = self.slack.api_url.removesuffix("/api/")
        key = f"{self.slack_team()}-{file.id}"
        return {
            "id": file.id,
            "name": file.name,
            "title": file.name,
            "mimetype": file.mimetype,
            "filetype": file.name.rsplit(".", 1)[-1] if "." in file.name else "binary",
            "size": len(file.data),
            "user": file.user,
            "mode": "hosted",
            "url_private": f"{base}/files-pri/{key}/{file.name}",
            "url_private_download": f"{base}/files-pri/{key}/download/{file.name}",
            "permalink": f"https://test.slack.com/files/{file.user}/{file.id}/{file.name}",
        }

    @staticmethod
    def slack_team() -> str:
        from tests.fakes.slack import TEAM_ID

        return TEAM_ID

    def share(
        self,
        channel: str,
        files: list[FakeFile],
        text: str = "",
        user: str = "UALICE",
        thread_ts: str | None = None,
    ) -> str:
        """A person shares files in a message (a `file_share` message, as Slack stores it);
        returns its ts. The event is the test's to deliver (`share_event`)."""
        ts = self.slack.add_user_message(channel, text, user=user, thread_ts=thread_ts)
        message = self.slack._find(channel, ts)
        assert message is not None
        message.files = [self.listing(f) for f in files]
        return ts

    def share_event(self, channel: str, ts: str) -> dict[str, Any]:
        """The `message` event (subtype `file_share`) Slack sends for a shared message."""
        message = self.slack._find(channel, ts)
        assert message is not None
        assert message.files is not None
        event: dict[str, Any] = {
            "type": "message",
            "subtype": "file_share",
            "channel_type": "im" if channel.startswith("D") else "channel",
            "channel": channel,
            "user": message.user,
            "text": message.text,
            "ts": ts,
            "files": message.files,
        }
        if message.thread_ts:
            event["thread_ts"] = message.thread_ts
        return event

    def _allowed(self, request: web.Request) -> str | None:
        """The Bearer token, recorded; None unless it is the bot's and has files:read."""
        from tests.fakes.slack import BOT_TOKEN

        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        self.requests.append(FileRequest(request.host, request.path, token))
        ok = token == BOT_TOKEN and "files:read" in self.slack.scopes
        return token if ok else None

    def _file(self, request: web.Request) -> FakeFile | None:
        key = request.match_info["key"]
        return self.files.get(key.rsplit("-", 1)[-1])

    async def _private(self, request: web.Request) -> web.StreamResponse:
        file = self._file(request)
        if self._allowed(request) is None:
            return web.Response(body=SIGN_IN_PAGE, content_type="text/html")
        if file is None:
            return web.Response(status=404, text="file not found")
        target = file.redirect_to or (
            f"/files-pri/{request.match_info['key']}/download/{request.match_info['name']}"
        )
        raise web.HTTPFound(target)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        file = self._file(request)
        if self._allowed(request) is None:
            return web.Response(body=SIGN_IN_PAGE, content_type="text/html")
        if file is None:
            return web.Response(status=404, text="file not found")
        if not file.chunked:
            return web.Response(body=file.data, content_type=file.mimetype)
        response = web.StreamResponse(headers={"Content-Type": file.mimetype})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for i in range(0, len(file.data), 256 * 1024):
            await response.write(file.data[i : i + 256 * 1024])
        await response.write_eof()
        return response
