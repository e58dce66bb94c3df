"""A Stop reaches every replica: Slack delivers `agent_session_stopped` to one of them, while
the turn may run on another. The receiving replica publishes the Stop on a Redis channel; each
replica cancels the turns of that thread it runs. Without Redis there is one replica."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict

from redis.asyncio import Redis

from bot.conversation.stopping import StopRequest

log = logging.getLogger(__name__)

Handler = Callable[[StopRequest], Awaitable[object]]


class StopSignals:
    def __init__(self, redis_url: str, origin: str, prefix: str = "countersign") -> None:
        # Its own client: a subscription waits on its socket indefinitely, which the shared
        # client's 1 s read timeout would break every second.
        self.redis = Redis.from_url(redis_url)
        self.origin = origin  # this replica: its own messages are not handled twice
        self.channel = f"{prefix}:stops"
        self._listener: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()  # subscribed (tests wait for it)
        self._handling: set[asyncio.Task[None]] = set()

    async def publish(self, request: StopRequest) -> None:
        payload = json.dumps({"origin": self.origin, **asdict(request)})
        try:
            await self.redis.publish(self.channel, payload)
        except Exception as exc:  # the local replica still stops what it runs
            log.warning("could not publish a Stop to the other replicas: %s", type(exc).__name__)

    def listen(self, handler: Handler) -> None:
        self._listener = asyncio.get_running_loop().create_task(
            self._listen(handler), name="stop-signals"
        )

    async def _listen(self, handler: Handler) -> None:
        backoff = 0.5
        while True:
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(self.channel)
                    self.ready.set()
                    backoff = 0.5
                    async for message in pubsub.listen():
                        await self._handle(message, handler)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: resubscribe when it is back
                self.ready.clear()
                log.warning("stop signals: %s; resubscribing", type(exc).__name__)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def _handle(self, message: dict[str, object], handler: Handler) -> None:
        if message.get("type") != "message":
            return
        try:
            raw = message["data"]
            data = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
            if data.pop("origin", None) == self.origin:
                return
            data["streams"] = tuple(data.get("streams") or ())
            request = StopRequest(**data)
        except (ValueError, TypeError, KeyError):
            log.warning("stop signals: ignored a malformed message")
            return
        # In its own task: waiting for a cancelled turn must not hold up the subscription.
        task = asyncio.get_running_loop().create_task(self._run(handler, request))
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    @staticmethod
    async def _run(handler: Handler, request: StopRequest) -> None:
        try:
            await handler(request)
        except Exception:  # one Stop's failure must not end the others
            log.exception("stop signals: handling a Stop failed")

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self.redis.aclose()
