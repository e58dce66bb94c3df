"""What the page does, turned into what Slack would send the app: messages become events,
clicks become `block_actions`, modal submissions `view_submission`, `/history`, `/approvals` and
`/usage` slash commands; answers to `response_url`s become ephemeral messages. Changes are pushed to
the page over a WebSocket (`/ui/live`)."""

from __future__ import annotations

import asyncio
import re
import secrets
import urllib.parse
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web

from sandbox import files, posting
from sandbox.socket_mode import SocketHub
from sandbox.webapi import WebApi
from sandbox.workspace import BOT_USER_ID, TEAM_ID, Message, Workspace

COMMANDS = ("/history", "/approvals", "/usage")
STATIC = resources.files("sandbox") / "static"
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


class Ui:
    def __init__(self, workspace: Workspace, api: WebApi, hub: SocketHub) -> None:
        self.ws, self.api, self.hub = workspace, api, hub
        self.responses: dict[str, dict[str, Any]] = {}  # response_url id -> where it answers

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/archives/{channel}", self._archives)
        app.router.add_get("/archives/{channel}/{message}", self._archives)
        app.router.add_get("/ui/live", self._live)
        app.router.add_post("/ui/message", self._message)
        app.router.add_post("/ui/file", self._file)
        app.router.add_post("/ui/action", self._action)
        app.router.add_post("/ui/submit", self._submit)
        app.router.add_post("/ui/close", self._close)
        app.router.add_post("/ui/home", self._home)
        app.router.add_post("/response/{id}", self._response)

    # -- the page ------------------------------------------------------------------------------
    async def _index(self, _request: web.Request) -> web.Response:
        return web.Response(
            text=(STATIC / "index.html").read_text("utf-8"), content_type="text/html"
        )

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or ".." in name or suffix not in TYPES:
            raise web.HTTPNotFound()
        item = STATIC / name
        if not item.is_file():
            raise web.HTTPNotFound()
        return web.Response(body=item.read_bytes(), content_type=TYPES[suffix])

    async def _archives(self, request: web.Request) -> web.Response:
        """A permalink (`/archives/C…/p…`, a reply's with `?thread_ts=`): the page, opened on
        that channel and thread."""
        channel = request.match_info["channel"]
        message = request.match_info.get("message", "").removeprefix("p")
        ts = f"{message[:-6]}.{message[-6:]}" if message.isdigit() and len(message) > 6 else ""
        root = request.query.get("thread_ts", "")
        ts = root if re.fullmatch(r"\d+\.\d+", root) else ts
        query = urllib.parse.urlencode({"channel": channel, "thread": ts})
        raise web.HTTPFound(f"/?{query}")

    async def _state(self, _request: web.Request) -> web.Response:
        return web.json_response(self.ws.state())

    async def _live(self, request: web.Request) -> web.WebSocketResponse:
        sock = web.WebSocketResponse(heartbeat=30)
        await sock.prepare(request)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.ws.listeners.append(queue)
        await sock.send_json({"type": "state", "state": self.ws.state()})

        async def pump() -> None:
            while True:
                await sock.send_json(await queue.get())

        pumping = asyncio.create_task(pump())
        try:
            async for message in sock:
                if message.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
                    break
        finally:
            pumping.cancel()
            self.ws.listeners.remove(queue)
        return sock

    # -- people act ----------------------------------------------------------------------------
    def _person(self, body: dict[str, Any]) -> str:
        user = str(body.get("user") or "")
        if user not in self.ws.people:
            raise web.HTTPBadRequest(text="unknown person")
        return user

    def _trigger(self, user: str) -> str:
        trigger = self.ws.next_id(f"{user}.trigger.")
        self.api.views.triggers[trigger] = user
        return trigger

    def _response_url(self, request: web.Request, where: dict[str, Any]) -> str:
        key = secrets.token_urlsafe(18)  # a capability, like Slack's: unguessable
        self.responses[key] = where
        return f"http://{request.host}/response/{key}"

    def _where(self, body: dict[str, Any]) -> tuple[str, str, str | None]:
        """Who posts, in which channel (one they are a member of), in which thread."""
        user = self._person(body)
        channel_id = str(body.get("channel") or "")
        channel = self.ws.channels.get(channel_id)
        if channel is None or user not in channel.members:
            raise web.HTTPForbidden(text="not a member of that channel")
        thread_ts = str(body.get("thread_ts") or "") or None
        return user, channel_id, thread_ts

    async def _message(self, request: web.Request) -> web.Response:
        body = await request.json()
        user, channel_id, thread_ts = self._where(body)
        text = str(body.get("text") or "").strip()
        if not text:
            raise web.HTTPBadRequest(text="an empty message")
        if text.split()[0] in COMMANDS and not body.get("prompt"):  # a prompt is only words
            await self._command(request, user, channel_id, text)
            return web.json_response({"ok": True})
        ts = posting.post(self.ws, self.hub, user, channel_id, text, thread_ts)
        return web.json_response({"ok": True, "ts": ts})

    async def _file(self, request: web.Request) -> web.Response:
        """A file shared in a channel, a thread or the DM (with the composer's text, if any)."""
        body = await request.json()
        user, channel_id, thread_ts = self._where(body)
        text = str(body.get("text") or "").strip()
        try:
            ts = posting.post(self.ws, self.hub, user, channel_id, text, thread_ts, body)
        except files.BadFile as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        return web.json_response({"ok": True, "ts": ts})

    async def _command(self, request: web.Request, user: str, channel: str, text: str) -> None:
        command, _, rest = text.partition(" ")
        payload = {
            "token": "sandbox",
            "team_id": TEAM_ID,
            "team_domain": "sandbox",
            "channel_id": channel,
            "channel_name": self.ws.channels[channel].name,
            "user_id": user,
            "user_name": self.ws.people[user].name.lower(),
            "command": command,
            "text": rest.strip(),
            "api_app_id": "A0SANDBOX",
            "response_url": self._response_url(request, {"channel": channel, "user": user}),
            "trigger_id": self._trigger(user),
        }
        await self.hub.deliver("slash_commands", payload)

    async def _action(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = self._person(body)
        action: dict[str, Any] = {
            "type": body.get("type") or "button",
            "action_id": body.get("action_id"),
            "block_id": body.get("block_id") or "",
            "action_ts": self.ws.next_ts(),
        }
        for name in ("value", "selected_option", "text"):
            if body.get(name) is not None:
                action[name] = body[name]
        payload: dict[str, Any] = {
            "type": "block_actions",
            "team": {"id": TEAM_ID, "domain": "sandbox"},
            "user": {"id": user, "team_id": TEAM_ID, "name": user.lower()},
            "api_app_id": "A0SANDBOX",
            "token": "sandbox",
            "trigger_id": self._trigger(user),
            "actions": [action],
        }
        view_id = body.get("view_id")
        if view_id:
            view = next((v for v in self.ws.views[user] if v["id"] == view_id), None)
            if view is None:
                raise web.HTTPNotFound(text="no such view")
            payload["container"] = {"type": "view", "view_id": view_id}
            payload["view"] = {**view, "state": {"values": body.get("values") or {}}}
        elif body.get("home"):
            payload["container"] = {"type": "view", "view_id": "home"}
            payload["view"] = {**self.ws.homes.get(user, {}), "id": "home", "type": "home"}
        else:
            payload.update(self._message_container(request, user, body))
        await self.hub.deliver("interactive", payload)
        return web.json_response({"ok": True})

    def _message_container(
        self, request: web.Request, user: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        channel, ts = str(body.get("channel") or ""), str(body.get("ts") or "")
        message = self.ws.find(channel, ts)
        if message is None:
            raise web.HTTPNotFound(text="no such message")
        ephemeral = message.visible_to is not None
        where = {"channel": channel, "user": user, "ts": ts, "thread_ts": message.thread_ts}
        return {
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": ephemeral,
            },
            "channel": {"id": channel, "name": self.ws.channels[channel].name},
            "message": {**message.shown(), "blocks": message.blocks or []},
            "response_url": self._response_url(request, where),
        }

    async def _submit(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = self._person(body)
        stack = self.ws.views[user]
        view = next((v for v in stack if v["id"] == body.get("view_id")), None)
        if view is None:
            raise web.HTTPNotFound(text="no such view")
        payload = {
            "type": "view_submission",
            "team": {"id": TEAM_ID, "domain": "sandbox"},
            "user": {"id": user, "team_id": TEAM_ID, "name": user.lower()},
            "api_app_id": "A0SANDBOX",
            "token": "sandbox",
            "trigger_id": self._trigger(user),
            "view": {**view, "state": {"values": body.get("values") or {}}},
        }
        answer = await self.hub.deliver("interactive", payload) or {}
        if answer.get("response_action") == "errors":
            return web.json_response({"ok": False, "errors": answer.get("errors") or {}})
        if answer.get("response_action") == "update" and isinstance(answer.get("view"), dict):
            stack[stack.index(view)] = {**answer["view"], "id": view["id"]}
        elif answer.get("response_action") == "push" and isinstance(answer.get("view"), dict):
            stack.append({**answer["view"], "id": self.ws.next_id("V")})
        else:
            stack.clear()
        self.ws.announce({"type": "views", "user": user, "views": stack})
        return web.json_response({"ok": True})

    async def _close(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = self._person(body)
        stack = self.ws.views[user]
        if stack:
            stack.pop()
        self.ws.announce({"type": "views", "user": user, "views": stack})
        return web.json_response({"ok": True})

    async def _home(self, request: web.Request) -> web.Response:
        """The person opened the app: its Home tab, or its DM (Slack's Messages tab)."""
        body = await request.json()
        user, tab = self._person(body), body.get("tab") or "home"
        if tab not in ("home", "messages"):
            raise web.HTTPBadRequest(text="no such tab")
        event = {
            "type": "app_home_opened",
            "user": user,
            "channel": self.ws.dm_of(user),
            "tab": tab,
            "event_ts": self.ws.next_ts(),
        }
        self.hub.event(event)
        return web.json_response({"ok": True})

    async def _response(self, request: web.Request) -> web.Response:
        """A `response_url` answer: an ephemeral message for the person who acted, replacing
        or deleting the original ephemeral message when asked."""
        where = self.responses.get(request.match_info["id"])
        if where is None:
            raise web.HTTPNotFound()
        body = await request.json()
        channel, user = str(where["channel"]), str(where["user"])
        original = self.ws.find(channel, str(where.get("ts") or ""))
        ephemeral_original = original is not None and original.visible_to == user
        if body.get("delete_original") and ephemeral_original and original is not None:
            self.ws.remove(channel, original.ts)
            return web.Response(text="ok")
        blocks = body.get("blocks")
        if body.get("replace_original") and original is not None and ephemeral_original:
            original.text, original.blocks = str(body.get("text") or ""), blocks
            self.ws.changed(channel, original)
            return web.Response(text="ok")
        in_channel = body.get("response_type") == "in_channel"
        message = Message(
            self.ws.next_ts(),
            str(body.get("text") or ""),
            BOT_USER_ID,
            body.get("thread_ts") or where.get("thread_ts"),
            blocks,
            visible_to=None if in_channel else user,
        )
        self.ws.add(message, channel)
        return web.Response(text="ok")
