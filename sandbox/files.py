"""Files shared on the page, kept and served the way Slack keeps and serves them.

A shared file becomes a Slack file object (id, name, title, mimetype, filetype, size, user,
`url_private`, `url_private_download`, `permalink`, …) on the message that shares it.
`url_private` is on the sandbox's own host and port (the bot sends its token only to
`SLACK_API_URL`'s host) and answers only with the bot token in `Authorization: Bearer`: with
it, one redirect (`/files-pri/…` to `/files-tmb/…`, same host) and then the bytes; without it,
401 and never the bytes. The page shows its own copy (`/ui/files/F…`, the page's key)."""

from __future__ import annotations

import base64
import binascii
import hmac
import mimetypes
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from aiohttp import hdrs, web

from sandbox.guard import Guard
from sandbox.workspace import TEAM_ID, Workspace

FILE_MAX = 12 * 1024 * 1024  # above the bot's 10 MB cap, so the bot's refusal can be seen
# Slack's `filetype` for the extensions the sandbox expects; others: the extension itself.
FILETYPES = {
    "txt": "text",
    "log": "text",
    "md": "markdown",
    "markdown": "markdown",
    "jpeg": "jpg",
    "py": "python",
    "js": "javascript",
    "yml": "yaml",
}
IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass
class SharedFile:
    id: str
    name: str
    mimetype: str
    size: int
    user: str
    channel: str
    ts: str
    thread_ts: str | None
    data: bytes
    secret: str  # the redirect target's path part
    created: int

    @property
    def filetype(self) -> str:
        extension = self.name.rsplit(".", 1)[-1].lower() if "." in self.name else ""
        return FILETYPES.get(extension, extension or "binary")

    def slack(self, base: str, public: bool) -> dict[str, Any]:
        """The file object as Slack puts it on a message (and in `files.info`)."""
        quoted = urllib.parse.quote(self.name)
        private = f"{base}/files-pri/{TEAM_ID}-{self.id}"
        return {
            "id": self.id,
            "created": self.created,
            "timestamp": self.created,
            "name": self.name,
            "title": self.name,
            "mimetype": self.mimetype,
            "filetype": self.filetype,
            "pretty_type": self.filetype.upper(),
            "user": self.user,
            "user_team": TEAM_ID,
            "editable": False,
            "size": self.size,
            "mode": "hosted",
            "is_external": False,
            "external_type": "",
            "is_public": public,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "url_private": f"{private}/{quoted}",
            "url_private_download": f"{private}/download/{quoted}",
            "permalink": f"{base}/files/{self.user}/{self.id}/{quoted}",
            "file_access": "visible",
        }

    def page(self) -> dict[str, Any]:
        """What the page shows: name, size, and where its own copy is (for an image preview)."""
        return {
            "id": self.id,
            "name": self.name,
            "size": self.size,
            "mimetype": self.mimetype,
            "image": self.mimetype in IMAGES,
            "url": f"/ui/files/{self.id}",
        }


class BadFile(ValueError):
    """A share the page cannot make; the message is for the person."""


def decoded(body: dict[str, Any]) -> tuple[str, bytes, str]:
    """The shared file's name, bytes and type from the page's JSON (`data`: base64)."""
    name = str(body.get("name") or "").replace("/", "_").replace("\\", "_").strip()[:255]
    if not name:
        raise BadFile("a shared file needs a name")
    try:
        data = base64.b64decode(str(body.get("data") or ""), validate=True)
    except (binascii.Error, ValueError):
        raise BadFile("the file's content did not arrive whole") from None
    if len(data) > FILE_MAX:
        raise BadFile(f"{name} is larger than the sandbox takes ({FILE_MAX // 2**20} MB)")
    # Slack decides the type itself; by the name first, then what the browser said.
    given = str(body.get("mimetype") or "")
    mimetype = mimetypes.guess_type(name)[0] or given or "application/octet-stream"
    return name, data, mimetype


def share(
    ws: Workspace, user: str, channel: str, ts: str, thread_ts: str | None, body: dict[str, Any]
) -> SharedFile:
    name, data, mimetype = decoded(body)
    shared = SharedFile(
        id=ws.next_id("F0"),
        name=name,
        mimetype=mimetype,
        size=len(data),
        user=user,
        channel=channel,
        ts=ts,
        thread_ts=thread_ts,
        data=data,
        secret=secrets.token_urlsafe(12),
        created=int(time.time()),
    )
    ws.files[shared.id] = shared
    return shared


class FileRoutes:
    def __init__(self, workspace: Workspace, guard: Guard) -> None:
        self.ws, self.guard = workspace, guard

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/files-pri/{team_file}/{name}", self._private)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._private)
        app.router.add_get("/files-tmb/{team_file}/{name}", self._bytes)
        app.router.add_get("/files/{user}/{file}/{name}", self._permalink)
        app.router.add_get("/ui/files/{file}", self._page_copy)

    def _bot(self, request: web.Request) -> bool:
        """Slack's file host answers only the bot's token, in the header."""
        bearer = request.headers.get(hdrs.AUTHORIZATION, "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(bearer.encode(), self.guard.bot_token.encode())

    def _found(self, team_file: str) -> SharedFile | None:
        team, _, rest = team_file.partition("-")
        return self.ws.files.get(rest.split("-")[0]) if team == TEAM_ID else None

    async def _private(self, request: web.Request) -> web.Response:
        if not self._bot(request):
            return web.Response(status=401, text="sign in to see this file")
        found = self._found(request.match_info["team_file"])
        if found is None:
            return web.Response(status=404, text="file not found")
        name = urllib.parse.quote(found.name)
        target = f"/files-tmb/{TEAM_ID}-{found.id}-{found.secret}/{name}"
        raise web.HTTPFound(f"{self.ws.base or ''}{target}")

    async def _bytes(self, request: web.Request) -> web.Response:
        if not self._bot(request):
            return web.Response(status=401, text="sign in to see this file")
        team_file = request.match_info["team_file"]
        found = self._found(team_file)
        if found is None or not hmac.compare_digest(
            team_file.encode(), f"{TEAM_ID}-{found.id}-{found.secret}".encode()
        ):
            return web.Response(status=404, text="file not found")
        return web.Response(body=found.data, content_type=found.mimetype)

    async def _permalink(self, request: web.Request) -> web.Response:
        """A file's permalink: the page, opened where it was shared."""
        found = self.ws.files.get(request.match_info["file"])
        if found is None:
            raise web.HTTPNotFound()
        query = {"channel": found.channel, "thread": found.thread_ts or found.ts}
        raise web.HTTPFound(f"/?{urllib.parse.urlencode(query)}")

    async def _page_copy(self, request: web.Request) -> web.Response:
        found = self.ws.files.get(request.match_info["file"])
        if found is None:
            raise web.HTTPNotFound()
        # Shown inline only as an image; anything else downloads (never rendered as a page).
        inline = found.mimetype in IMAGES
        disposition = "inline" if inline else "attachment"
        filename = urllib.parse.quote(found.name)
        return web.Response(
            body=found.data,
            content_type=found.mimetype if inline else "application/octet-stream",
            headers={
                "Content-Disposition": f"{disposition}; filename*=UTF-8''{filename}",
                "X-Content-Type-Options": "nosniff",
            },
        )
