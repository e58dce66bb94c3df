"""The sandbox's Slack side and demo model, through the real `slack_sdk` and `openai` clients
(the bot's own): what the bot relies on to decide reach, Slack's streaming rules, the demo's
tool calls, and the page's live updates."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from openai import AsyncOpenAI
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.guard import Guard
from sandbox.server import Sandbox, build, serve


@pytest.fixture
async def sandbox() -> AsyncIterator[tuple[Sandbox, str]]:
    running = build(Guard(KEY))
    runner, port = await serve(running, "127.0.0.1", 0)
    try:
        yield running, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


KEY = "0123456789abcdef0123456789abcdef"
BOT_TOKEN, APP_TOKEN = f"xoxb-{KEY}", f"xapp-{KEY}"


def slack(base: str, token: str = BOT_TOKEN) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=f"{base}/api/")


async def test_reach_guest_and_private_channel(sandbox: tuple[Sandbox, str]) -> None:
    client = slack(sandbox[1])
    gail = await client.users_info(user="UGAIL")
    assert gail["user"]["is_restricted"] is True
    alice = await client.users_info(user="UALICE")
    assert alice["user"]["is_restricted"] is False
    exec_members = (await client.conversations_members(channel="C0EXEC"))["members"]
    assert "UGAIL" not in exec_members
    assert "UALICE" in exec_members
    info = (await client.conversations_info(channel="C0EXEC"))["channel"]
    assert info["is_private"] is True
    dm = (await client.conversations_open(users="UALICE"))["channel"]["id"]
    assert (await client.conversations_info(channel=dm))["channel"]["is_im"] is True


async def test_tokens_and_socket_mode_url(sandbox: tuple[Sandbox, str]) -> None:
    with pytest.raises(SlackApiError, match="invalid_auth"):  # the app token is not the bot's
        await slack(sandbox[1], APP_TOKEN).auth_test()
    opened = await slack(sandbox[1], APP_TOKEN).apps_connections_open(app_token=APP_TOKEN)
    assert opened["url"].startswith("ws://127.0.0.1:")
    assert "/socket-mode?ticket=" in opened["url"]
    assert KEY not in opened["url"]  # a ticket of its own, not the key


async def test_native_streaming_follows_slacks_rules(sandbox: tuple[Sandbox, str]) -> None:
    client = slack(sandbox[1])
    parent = await client.chat_postMessage(channel="C0GENERAL", text="a question")
    with pytest.raises(SlackApiError, match="missing_recipient_user_id"):
        await client.api_call(
            "chat.startStream", json={"channel": "C0GENERAL", "thread_ts": parent["ts"]}
        )
    started = await client.api_call(
        "chat.startStream",
        json={
            "channel": "C0GENERAL",
            "thread_ts": parent["ts"],
            "recipient_user_id": "UALICE",
            "recipient_team_id": "T0SANDBOX",
            "markdown_text": "Hello",
        },
    )
    ts = started["ts"]
    await client.api_call(
        "chat.appendStream", json={"channel": "C0GENERAL", "ts": ts, "markdown_text": " world"}
    )
    with pytest.raises(SlackApiError, match="streaming_state_conflict"):
        await client.chat_update(channel="C0GENERAL", ts=ts, text="edited")
    await client.api_call("chat.stopStream", json={"channel": "C0GENERAL", "ts": ts})
    with pytest.raises(SlackApiError, match="message_not_in_streaming_state"):
        await client.api_call(
            "chat.appendStream", json={"channel": "C0GENERAL", "ts": ts, "markdown_text": "!"}
        )
    message = sandbox[0].workspace.find("C0GENERAL", ts)
    assert message is not None
    assert message.text == "Helloworld"  # Slack drops an appended piece's leading space
    assert message.thread_ts == parent["ts"]


async def demo(base: str, text: str) -> tuple[str, list[tuple[str, dict[str, object]]]]:
    client = AsyncOpenAI(api_key=f"sk-sandbox-{KEY}", base_url=f"{base}/demo-model/v1")
    stream = await client.chat.completions.create(
        model="countersign-demo", messages=[{"role": "user", "content": text}], stream=True
    )
    said, calls = "", []
    async for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta and delta.content:
            said += delta.content
        for call in (delta.tool_calls if delta else None) or []:
            assert call.function is not None
            calls.append((str(call.function.name), json.loads(call.function.arguments or "")))
    await client.close()
    return said, calls


async def test_the_demo_model_understands_a_few_requests(sandbox: tuple[Sandbox, str]) -> None:
    base = sandbox[1]
    assert (await demo(base, "create a task to review the notes"))[1] == [
        ("create_task", {"title": "review the notes"})
    ]
    assert (await demo(base, "summarise #general"))[1] == [
        ("get_recent_messages", {"channel": "C0GENERAL", "limit": 20})
    ]
    assert (await demo(base, "read #exec"))[1][0][1]["channel"] == "C0EXEC"
    said, calls = await demo(base, "hi")
    assert not calls
    assert "demo model" in said


async def test_the_page_is_told_of_every_change(sandbox: tuple[Sandbox, str]) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(f"{sandbox[1]}/ui/live?key={KEY}") as live,
    ):
        first = await live.receive_json(timeout=5)
        assert first["type"] == "state"
        assert {c["name"] for c in first["state"]["channels"]} >= {"general", "exec"}
        await slack(sandbox[1]).chat_postMessage(channel="C0GENERAL", text="pushed")
        change = await live.receive_json(timeout=5)
        assert change["type"] == "message"
        assert change["message"]["text"] == "pushed"
