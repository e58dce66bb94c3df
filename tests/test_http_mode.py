"""HTTP mode's front door: signatures, health, long replies, and url verification."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import BOT_USER_ID, FakeSlack, event_body
from tests.harness import RunningBot, make_settings, start_bot, stop_bot


async def test_unsigned_forged_and_stale_requests_are_rejected(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    text = f"<@{BOT_USER_ID}> post to #general now"
    ts = fake_slack.add_user_message("C1", text)
    body = json.dumps(
        event_body(
            {"type": "app_mention", "user": "UEVE", "text": text, "ts": ts, "channel": "C1"}, "EvX"
        )
    ).encode()
    unsigned = {"Content-Type": "application/json"}
    forged = {**bot.signed_headers(body), "X-Slack-Signature": "v0=" + "0" * 64}
    stale = bot.signed_headers(body, timestamp=int(time.time()) - 10 * 60)
    for headers in (unsigned, forged, stale):
        status, _ = await bot.post_raw(body, headers)
        assert status == 401
    await bot.idle()
    assert fake_model.requests == []
    assert fake_slack.bot_messages("C1") == []


async def test_url_verification_challenge(bot: RunningBot) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "t"}).encode()
    status, answer = await bot.post_raw(body, bot.signed_headers(body))
    assert status == 200
    assert "abc123" in answer


async def test_healthz(bot: RunningBot) -> None:
    async with bot.session.get(bot.url + "/healthz") as response:
        assert response.status == 200
        assert (await response.json())["ok"] is True


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) listening on `port`."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(address)
    return found


async def test_metrics_and_health_details_need_the_operator_token_on_the_public_port(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    token = "operator-" + "x" * 24
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, metrics_token=token))
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            async with bot.session.get(bot.url + "/metrics", headers=headers) as response:
                assert response.status == 401
                assert "countersign_" not in await response.text()
            async with bot.session.get(bot.url + "/healthz", headers=headers) as response:
                assert response.status == 200
                assert await response.json() == {"ok": True}  # up or not, nothing more
        operator = {"Authorization": f"Bearer {token}"}
        async with bot.session.get(bot.url + "/metrics", headers=operator) as response:
            assert response.status == 200
            assert "countersign_" in await response.text()
        async with bot.session.get(bot.url + "/healthz", headers=operator) as response:
            assert "replies_in_flight" in await response.json()
    finally:
        await stop_bot(bot)


async def test_without_a_token_metrics_live_on_the_loopback_operator_port_only(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = make_settings(
        fake_slack, fake_model, sqlite_url, metrics_port=port, metrics_token=None
    )
    assert settings.metrics_host == "127.0.0.1"  # the default: not reachable from outside
    bot = await start_bot(settings)
    try:
        async with bot.session.get(bot.url + "/metrics") as response:
            assert response.status == 404  # nobody on the public port is an operator
        async with bot.session.get(f"http://127.0.0.1:{port}/metrics") as response:
            assert response.status == 200
            assert "countersign_" in await response.text()
        async with bot.session.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert "replies_in_flight" in await response.json()
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only, as the kernel says
    finally:
        await stop_bot(bot)


async def test_event_is_acknowledged_before_the_reply_is_done(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Script(text="slow answer", time_to_first_token=2.0))
    text = f"<@{BOT_USER_ID}> hi"
    ts = fake_slack.add_user_message("C1", text)
    started = time.monotonic()
    status = await bot.send_event(
        {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "channel": "C1"}
    )
    assert status == 200
    assert time.monotonic() - started < 1.0  # well inside Slack's 3 s
    await bot.idle()
    assert fake_slack.bot_messages("C1")[0].text == "slow answer"


async def test_twenty_thousand_characters_arrive_whole_across_messages(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    words = [f"w{i:05d}" for i in range(3334)]  # 6 chars + space each: ~23,000 characters
    scripted = " ".join(words)
    assert len(scripted) > 20_000
    fake_model.script(Script(text=scripted, tokens_per_second=2000))
    # A reply this long needs a length limit (max_tokens) above the default 2,000 tokens.
    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, reply_tokens=12_000, token_budget=32_000)
    )
    try:
        root = await bot.mention("C1", "write a lot", fake_slack)
        await bot.idle(timeout=60)
    finally:
        await stop_bot(bot)
    replies = [m for m in fake_slack.bot_messages("C1") if m.thread_ts == root]
    assert len(replies) >= 6
    assert all(len(m.text) <= 4000 for m in replies)
    assert " ".join(m.text for m in replies).split() == words
    failed = [c for c in fake_slack.calls if not c.ok]
    assert failed == []  # never msg_too_long, never rate limited


async def test_task_pages_open_only_through_a_signed_unexpired_link(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    from bot.db.models import Task

    bot = await start_bot(
        make_settings(fake_slack, fake_model, sqlite_url, public_base_url="https://cs.example.com")
    )
    try:
        links = bot.countersign.links
        assert links is not None
        async with bot.countersign.db.transaction() as session:
            session.add(Task(team_id="T0TEST", title="<script>x</script>", created_by="U1"))
            session.add(Task(team_id="TOTHER", title="their secret", created_by="U9"))

        def local(url: str) -> str:
            return url.replace("https://cs.example.com", bot.url)

        async def status(url: str) -> int:
            async with bot.session.get(url) as response:
                return response.status

        signed = local(links.url("/tasks/1", "T0TEST"))
        async with bot.session.get(signed) as response:
            assert response.status == 200
            page = await response.text()
        assert "TASK-1" in page
        assert "<script>" not in page
        # Sequential ids alone open nothing, nor do links for another workspace's task,
        # links whose signature was altered, or links whose time is up.
        assert await status(bot.url + "/tasks/1") == 404
        assert await status(bot.url + "/tasks/2") == 404
        assert await status(local(links.url("/tasks/2", "T0TEST"))) == 404
        assert await status(signed.replace("team=T0TEST", "team=TOTHER")) == 404
        assert await status(signed[:-4] + "0000") == 404
        expired = local(links.url("/tasks/1", "T0TEST", now=time.time() - 8 * 24 * 3600))
        assert await status(expired) == 404
    finally:
        await stop_bot(bot)


async def test_without_a_public_url_there_is_no_task_page(bot: RunningBot) -> None:
    async with bot.session.get(bot.url + "/tasks/1") as response:
        assert response.status == 404


async def test_slack_is_answered_while_the_main_loop_is_busy(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """A long stretch of work on the bot's main loop (here: one second without yielding) does
    not hold Slack's acknowledgement back; the event is handled once the loop is free."""
    import asyncio
    import urllib.request

    fake_model.script(Script(text="handled after the busy second"))
    text = f"<@{BOT_USER_ID}> hi"
    ts = fake_slack.add_user_message("C1", text)
    event = {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "channel": "C1"}
    body = json.dumps(event_body(event, bot.next_event_id())).encode()
    request = urllib.request.Request(  # noqa: S310 - the bot on loopback
        bot.url + "/slack/events", data=body, headers=bot.signed_headers(body), method="POST"
    )

    def deliver() -> tuple[int, float]:  # Slack, from outside this process's event loop
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
            return response.status, time.monotonic() - started

    delivered = asyncio.get_running_loop().run_in_executor(None, deliver)
    time.sleep(1.0)  # noqa: ASYNC251 - the point: the main loop is busy, nothing else runs
    status, took = await delivered
    assert status == 200
    assert took < 0.5
    await bot.idle()
    assert fake_slack.bot_messages("C1")[0].text == "handled after the busy second"


async def test_a_stalled_main_loop_refuses_rather_than_acknowledges(
    bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI
) -> None:
    """If the main loop has not run for seconds, an acknowledgement would promise work nobody
    may do: the request is refused (Slack delivers it again), and accepted once the loop runs."""
    import asyncio
    import urllib.error
    import urllib.request

    fake_model.script(Script(text="answered on the second delivery"))
    text = f"<@{BOT_USER_ID}> hi"
    ts = fake_slack.add_user_message("C1", text)
    event = {"type": "app_mention", "user": "UALICE", "text": text, "ts": ts, "channel": "C1"}
    body = json.dumps(event_body(event, bot.next_event_id())).encode()

    def deliver(after: float) -> int:
        time.sleep(after)
        request = urllib.request.Request(  # noqa: S310 - the bot on loopback
            bot.url + "/slack/events", data=body, headers=bot.signed_headers(body), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    first = asyncio.get_running_loop().run_in_executor(None, deliver, 3.0)
    time.sleep(3.5)  # noqa: ASYNC251 - the point: the main loop is stalled
    assert await first == 503
    await bot.idle()
    assert fake_slack.bot_messages("C1") == []  # refused, so nothing was started
    await asyncio.sleep(0.3)  # the loop has run again
    assert await asyncio.get_running_loop().run_in_executor(None, deliver, 0.0) == 200
    await bot.idle()
    assert fake_slack.bot_messages("C1")[0].text == "answered on the second delivery"


async def test_a_slack_api_url_without_its_trailing_slash_works(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> None:
    """As users paste it: slack_sdk joins method names onto a base that ends in a slash and
    adds the slash itself, so the setting is passed on unchanged and still reaches Slack."""
    pasted = fake_slack.api_url.rstrip("/")
    assert pasted.endswith("/api")
    fake_model.script(Script(text="reached you"))
    bot = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, slack_api_url=pasted))
    try:
        await bot.mention("C1", "hello", fake_slack)
        await bot.idle()
        assert [m.text for m in fake_slack.bot_messages("C1")] == ["reached you"]
    finally:
        await stop_bot(bot)
