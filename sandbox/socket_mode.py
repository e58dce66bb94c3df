"""Socket Mode, as Slack serves it: `apps.connections.open` hands out a ws:// URL here (with a
ticket of its own); the app connects, gets `hello`, and every event, click, modal submission
and slash command arrives as an envelope that the app acknowledges (an acknowledgement may
carry a response payload, e.g. a modal's `response_action`).

Events are never lost to a bot that is still starting: each waits for the app's connection,
and one not acknowledged in time is sent again, as Slack does, in a new envelope with
`retry_attempt` (1, 2, 3) and `retry_reason: "timeout"`, the same `event_id` inside."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

from aiohttp import WSMsgType, web

from sandbox.guard import Guard
from sandbox.workspace import BOT_USER_ID, TEAM_ID, Workspace

log = logging.getLogger(__name__)

ACK_TIMEOUT = 10.0  # Slack waits 3 s; the sandbox shares a machine with the bot, so more
RETRIES = 3  # Slack retries a failed event delivery up to three times


class SocketHub:
    def __init__(
        self,
        workspace: Workspace,
        guard: Guard,
        ack_timeout: float = ACK_TIMEOUT,
        retry_pause: float = 0.5,
    ) -> None:
        self.workspace, self.guard = workspace, guard
        self.ack_timeout, self.retry_pause = ack_timeout, retry_pause
        self.sockets: list[web.WebSocketResponse] = []
        self.connected = asyncio.Event()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._pending: set[asyncio.Task[None]] = set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("ticket", "") not in self.guard.tickets:
            return web.Response(status=403, text="no such Socket Mode ticket")
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

    async def _send(
        self, kind: str, payload: dict[str, Any], attempt: int = 0
    ) -> dict[str, Any] | None:
        """One envelope to the connected app; its acknowledgement (None: none in time)."""
        envelope_id = str(uuid.uuid4())
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[envelope_id] = future
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": attempt,
            "retry_reason": "timeout" if attempt else "",
            "payload": payload,
        }
        try:
            await self.sockets[-1].send_json(envelope)
            return await asyncio.wait_for(future, self.ack_timeout)
        except (TimeoutError, ConnectionError, IndexError, RuntimeError):
            log.warning("the app did not acknowledge a %s envelope", kind)
            return None
        finally:
            self._waiting.pop(envelope_id, None)

    async def deliver(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """A click, a submission, a slash command: once, as the person waits for its answer
        (None: nobody connected in time, or no acknowledgement in time)."""
        try:
            await asyncio.wait_for(self.connected.wait(), self.ack_timeout)
        except TimeoutError:
            return None
        return await self._send(kind, payload)

    async def _deliver_event(self, body: dict[str, Any]) -> None:
        for attempt in range(RETRIES + 1):
            await self.connected.wait()  # a bot still starting: the event waits for it
            if await self._send("events_api", body, attempt) is not None:
                return
            await asyncio.sleep(self.retry_pause)
        log.warning("the app never acknowledged event %s; dropped", body["event_id"])

    def event(self, event: dict[str, Any]) -> asyncio.Task[None]:
        """Queue an event for the app: delivered once it is connected, retried until it is
        acknowledged (Slack's three retries)."""
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
        task = asyncio.create_task(self._deliver_event(body))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task
