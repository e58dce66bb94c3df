"""Socket Mode, as Slack serves it: `apps.connections.open` hands out a ws:// URL here; the app
connects, gets `hello`, and every event, click, modal submission and slash command arrives as
an envelope that the app acknowledges (an acknowledgement may carry a response payload, e.g. a
modal's `response_action`)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

from aiohttp import WSMsgType, web

from sandbox.workspace import BOT_USER_ID, TEAM_ID, Workspace

log = logging.getLogger(__name__)

ACK_TIMEOUT = 10.0


class SocketHub:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.sockets: list[web.WebSocketResponse] = []
        self.connected = asyncio.Event()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=30)
        await ws.prepare(request)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self.sockets) + 1,
                "connection_info": {"app_id": "A0SANDBOX"},
                "debug_info": {"host": "sandbox"},
            }
        )
        self.sockets.append(ws)
        self.connected.set()
        self.workspace.bot_connected = True
        self.workspace.announce({"type": "bot", "connected": True})
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._acknowledged(message.data)
        finally:
            self.sockets.remove(ws)
            if not self.sockets:
                self.connected.clear()
                self.workspace.bot_connected = False
                self.workspace.announce({"type": "bot", "connected": False})
        return ws

    def _acknowledged(self, data: str) -> None:
        try:
            ack = json.loads(data)
        except json.JSONDecodeError:
            return
        future = self._waiting.pop(str(ack.get("envelope_id")), None)
        if future is not None and not future.done():
            future.set_result(ack.get("payload") or {})

    async def deliver(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Send an envelope to the app and wait for its acknowledgement (None: nobody
        connected, or no acknowledgement in time)."""
        try:
            await asyncio.wait_for(self.connected.wait(), ACK_TIMEOUT)
        except TimeoutError:
            return None
        envelope_id = str(uuid.uuid4())
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[envelope_id] = future
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": payload,
        }
        await self.sockets[-1].send_json(envelope)
        try:
            return await asyncio.wait_for(future, ACK_TIMEOUT)
        except TimeoutError:
            self._waiting.pop(envelope_id, None)
            log.warning("the app did not acknowledge a %s envelope", kind)
            return None

    async def event(self, event: dict[str, Any]) -> None:
        body = {
            "token": "sandbox",
            "team_id": TEAM_ID,
            "api_app_id": "A0SANDBOX",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{uuid.uuid4().hex[:16].upper()}",
            "event_time": int(time.time()),
            "authorizations": [
                {"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True, "enterprise_id": None}
            ],
        }
        await self.deliver("events_api", body)
