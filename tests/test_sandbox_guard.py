"""Only the sandbox's own page (and its bot) may drive it: on each kind of route (the page, the
Web API, the page's WebSocket, Socket Mode), a wrong `Host` (DNS rebinding), a foreign
`Origin`, a missing key and a form post are refused before any handler runs; the right ones
pass. And events typed before the bot connects wait for it, and are sent again with Slack's
retry fields until acknowledged."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from sandbox.server import Sandbox
from tests.test_sandbox_api import APP_TOKEN, BOT_TOKEN, KEY, sandbox, slack

__all__ = ["sandbox"]  # the fixture, used by name

Running = tuple[Sandbox, str]
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def status(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    headers: dict[str, str],
    data: str | None = None,
) -> int:
    async with session.request(method, url, headers=headers, data=data) as answer:
        return answer.status


async def ws_status(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> int:
    try:
        async with session.ws_connect(url, headers=headers) as sock:
            await sock.close()
            return 101
    except aiohttp.WSServerHandshakeError as refused:
        return refused.status


async def ticket_url(base: str) -> str:
    opened = await slack(base, APP_TOKEN).apps_connections_open(app_token=APP_TOKEN)
    return str(opened["url"]).replace("ws://", "http://")


async def test_each_route_kind_refuses_a_foreign_host_origin_missing_key_or_form(
    sandbox: Running,
) -> None:
    base = sandbox[1]
    host = base.removeprefix("http://")
    port = host.split(":")[1]
    message = json.dumps({"user": "UALICE", "channel": "C0GENERAL", "text": "hi"})
    socket = await ticket_url(base)
    key = {"X-Sandbox-Key": KEY}
    bot = {"Authorization": f"Bearer {BOT_TOKEN}"}
    async with aiohttp.ClientSession() as session:

        async def kinds(extra: dict[str, str], keyed: bool = True) -> dict[str, int]:
            """Each route kind's answer with `extra` headers (and the key, unless not keyed)."""
            page = {**(key if keyed else {}), **extra}
            api = {**(bot if keyed else {}), **extra}
            return {
                "page": await status(session, "GET", f"{base}/", page),
                "page post": await status(
                    session, "POST", f"{base}/ui/message", {**JSON, **page}, message
                ),
                "api": await status(session, "POST", f"{base}/api/auth.test", api),
                "state": await status(session, "GET", f"{base}/api/state", page),
                "websocket": await ws_status(session, f"{base}/ui/live", page),
                "socket mode": await ws_status(
                    session, socket if keyed else socket.split("?")[0], extra
                ),
                "demo model": await status(
                    session, "GET", f"{base}/demo-model/v1/models", {**page, **extra}
                ),
            }

        ok = await kinds({})
        assert ok == {
            "page": 200,
            "page post": 200,
            "api": 200,
            "state": 200,
            "websocket": 101,
            "socket mode": 101,
            "demo model": 200,
        }
        # DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host.
        for wrong in (f"evil.example:{port}", f"127.0.0.1:{int(port) + 1}", "localhost"):
            assert set((await kinds({"Host": wrong})).values()) == {403}, wrong
        # Another site's fetch or WebSocket (the browser names its origin), even with the key.
        for origin in (
            "http://evil.example",
            "null",
            f"http://localhost:{port}",
            "https://" + host,
        ):
            assert set((await kinds({"Origin": origin})).values()) == {403}, origin
        # The page's own origin is welcome, as localhost too.
        assert (await kinds({"Origin": base}))["page post"] == 200
        local = f"localhost:{port}"
        assert (await kinds({"Host": local, "Origin": f"http://{local}"}))["websocket"] == 101
        # No key (the Socket Mode URL without its ticket).
        assert set((await kinds({}, keyed=False)).values()) == {403}
        assert await ws_status(session, socket.split("=")[0] + "=forged", {}) == 403
        assert await status(session, "GET", f"{base}/?key=f{KEY[1:]}", {}) == 403
        # A form, as another site's <form> posts it: refused, key or not.
        form = "user=UALICE&channel=C0GENERAL&text=from+a+form"
        assert await status(session, "POST", f"{base}/ui/message", {**FORM, **key}, form) == 415
        token_in_form = f"token={BOT_TOKEN}&channel=C0GENERAL&text=hi"
        assert await status(
            session, "POST", f"{base}/api/chat.postMessage", FORM, token_in_form
        ) in (
            403,
            415,
        )
        for path in ("/ui/live", "/socket-mode", "/demo-model/v1/chat/completions", "/"):
            refused = await status(session, "POST", f"{base}{path}", {**FORM, **key}, form)
            assert refused in (403, 415), path  # each route kind: no form gets through
        posted = await status(
            session, "POST", f"{base}/api/chat.postMessage", {**FORM, **bot}, "channel=C0GENERAL"
        )
        assert posted == 200  # Slack's own clients: a form with the token in a header
    texts = [m.text for m in sandbox[0].workspace.messages["C0GENERAL"]]
    assert "from a form" not in texts
    assert texts.count("hi") == 3  # keyed; from its own origin; from localhost, its origin


async def test_the_printed_address_lets_the_page_in_by_a_same_site_cookie(
    sandbox: Running,
) -> None:
    base = sandbox[1]
    jar = aiohttp.CookieJar(unsafe=True)  # keeps cookies of an IP address, as browsers do
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        async with session.get(f"{base}/?key={KEY}") as page:
            assert page.status == 200
            cookie = page.cookies[f"sandbox-key-{base.rsplit(':', 1)[1]}"]
            assert cookie["samesite"] == "Strict"
            assert cookie["httponly"]
        async with session.get(f"{base}/static/app.js") as script:  # the cookie carries the key
            assert script.status == 200


async def bot_socket(session: aiohttp.ClientSession, base: str) -> aiohttp.ClientWebSocketResponse:
    sock = await session.ws_connect((await ticket_url(base)).replace("http://", "ws://"))
    hello = await sock.receive_json(timeout=5)
    assert hello["type"] == "hello"
    return sock


async def post_as_alice(session: aiohttp.ClientSession, base: str, text: str) -> dict[str, Any]:
    body = {"user": "UALICE", "channel": "DALICE", "text": text}
    async with session.post(
        f"{base}/ui/message", json=body, headers={"X-Sandbox-Key": KEY}
    ) as answer:
        assert answer.status == 200
        found: dict[str, Any] = await answer.json()
        return found


async def test_events_typed_before_the_bot_connects_wait_and_are_retried_until_acked(
    sandbox: Running,
) -> None:
    running, base = sandbox
    running.hub.ack_timeout, running.hub.retry_pause = 0.3, 0.0
    running.workspace.bot_started = True  # as `python -m sandbox` does when it starts one
    async with aiohttp.ClientSession() as session:
        first = await post_as_alice(session, base, "typed while the bot starts")
        second = await post_as_alice(session, base, "and another")
        async with session.get(f"{base}/api/state", headers={"X-Sandbox-Key": KEY}) as answer:
            shown = await answer.json()
        assert (shown["bot"]["started"], shown["bot"]["connected"]) == (True, False)  # starting…
        async with session.ws_connect(f"{base}/ui/live?key={KEY}") as page:
            assert (await page.receive_json(timeout=5))["type"] == "state"
            sock = await bot_socket(session, base)
            assert await page.receive_json(timeout=5) == {"type": "bot", "connected": True}
        seen = [await sock.receive_json(timeout=5) for _ in range(2)]
        assert [e["payload"]["event"]["ts"] for e in seen] == [first["ts"], second["ts"]]
        assert {(e["retry_attempt"], e["retry_reason"]) for e in seen} == {(0, "")}
        await sock.send_json({"envelope_id": seen[1]["envelope_id"]})  # the first: no ack
        again = await sock.receive_json(timeout=5)
        assert again["payload"]["event"]["ts"] == first["ts"]
        assert again["payload"]["event_id"] == seen[0]["payload"]["event_id"]  # the same event
        assert again["envelope_id"] != seen[0]["envelope_id"]
        assert (again["retry_attempt"], again["retry_reason"]) == (1, "timeout")
        await sock.send_json({"envelope_id": again["envelope_id"]})
        with pytest.raises(TimeoutError):  # acknowledged: not sent again
            await sock.receive_json(timeout=0.8)
        await sock.close()
