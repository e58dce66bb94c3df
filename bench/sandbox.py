"""The sandbox, measured (docs/benchmarks.md):

1. fresh clone -> first streamed reply visible in the browser: `git clone`, `./run.sh` (which
   installs the locked environment and starts the sandbox and the bot), headless Chromium opens
   the page, Alice mentions the bot, until the first words of the reply show. "cold" is the
   fresh clone (uv's package cache already on the machine, the clone's .venv not yet made);
   "warm" is the second start in the same clone.
2. the sandbox's overhead for one turn against the harness fakes: the same fake model (an
   instant one-sentence answer), the same bot, `STREAMING=edit`; one turn from the person's
   message to the final text stored by "Slack" — through the sandbox (Socket Mode, page
   state) and through the test harness (HTTP mode, the recording fake Slack).

    .venv/bin/python -m bench.sandbox [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from tests.fakes import openai as fake_openai
from tests.fakes import slack as fake_slack
from tests.harness import clean_env, make_settings, start_bot, stop_bot
from tests.sandbox_browser import CHROMIUM, address_in, running_sandbox, state, ui_post

ROOT = Path(__file__).resolve().parent.parent
UV_DIR = Path("/work/main/.tools/bin")
ANSWER = "Hello from the fake model."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_reply_visible(clone: Path) -> dict[str, float]:
    """Start ./run.sh in `clone`; seconds until the address, the bot, the first reply text."""
    port = free_port()
    path = f"{UV_DIR}:{os.environ['PATH']}" if UV_DIR.is_dir() else os.environ["PATH"]
    started = time.monotonic()
    process = subprocess.Popen(
        ["/bin/bash", str(clone / "run.sh")],
        env=clean_env(SANDBOX_PORT=str(port), LOG_LEVEL="WARNING", PATH=path),
        cwd=clone,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        base = address_in(line)
        address = time.monotonic() - started
        while not state(base)["bot"]["connected"]:
            time.sleep(0.05)
        connected = time.monotonic() - started
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            page = browser.new_page()
            page.goto(base)
            box = page.get_by_role("textbox", name="Message")
            box.fill("@Countersign hello there")
            box.press("Enter")
            page.get_by_role("button", name="1 reply").click(timeout=30_000)
            thread = page.get_by_role("complementary", name="Thread")
            thread.get_by_role("article").filter(has_text="Here is a plain answer").wait_for(
                timeout=30_000
            )
            visible = time.monotonic() - started
            browser.close()
        return {"address": address, "bot_connected": connected, "first_reply": visible}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def clone_to_first_reply() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="countersign-clone-") as tmp:
        clone = Path(tmp) / "countersign"
        started = time.monotonic()
        branch = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"],  # noqa: S607
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        subprocess.run(
            ["git", "clone", "--quiet", "--branch", branch, str(ROOT), str(clone)],  # noqa: S607
            check=True,
        )
        cloned = time.monotonic() - started
        cold = first_reply_visible(clone)
        warm = first_reply_visible(clone)
    return {"clone": cloned, "cold": cold, "warm": warm}


def sandbox_turns(turns: int, model: fake_openai.FakeOpenAI) -> list[float]:
    env = {
        "OPENAI_API_KEY": fake_openai.API_KEY,
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MODEL": fake_openai.MODEL,
        "STREAMING": "edit",
    }
    times = []
    with running_sandbox(**env) as (base, _process):
        for n in range(turns):
            body = {"user": "UALICE", "channel": "DALICE", "text": f"turn {n}"}
            started = time.monotonic()
            ts = ui_post(base, "/ui/message", body)["ts"]
            while True:
                dm = next(c for c in state(base)["channels"] if c["id"] == "DALICE")
                later = [m for m in dm["messages"] if float(m["ts"]) > float(ts)]
                if any(m["user"] == "UBOT" and m["text"].startswith(ANSWER) for m in later):
                    break
                time.sleep(0.005)
            times.append(time.monotonic() - started)
    return times


async def harness_turns(turns: int, model: fake_openai.FakeOpenAI) -> list[float]:
    slack = fake_slack.FakeSlack().start()
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        bot = await start_bot(make_settings(slack, model, f"sqlite:///{tmp}/h.db"))
        try:
            for n in range(turns):
                started = time.monotonic()
                ts = await bot.say(slack, "DALICE", f"turn {n}")
                while not any(
                    m.bot_id and float(m.ts) > float(ts) and m.text.startswith(ANSWER)
                    for m in slack.thread("DALICE")
                ):
                    await asyncio.sleep(0.005)
                times.append(time.monotonic() - started)
        finally:
            await stop_bot(bot)
            slack.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--skip-clone", action="store_true")
    args = parser.parse_args()
    if not args.skip_clone:
        print(json.dumps(clone_to_first_reply(), indent=2))
    model = fake_openai.FakeOpenAI(fake_openai.Script(text=ANSWER)).start()
    try:
        through_sandbox = sandbox_turns(args.turns, model)
        through_harness = asyncio.run(harness_turns(args.turns, model))
    finally:
        model.stop()
    for name, times in (("sandbox", through_sandbox), ("harness", through_harness)):
        print(
            f"{name}: one turn median {statistics.median(times) * 1000:.0f} ms, "
            f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
            f"({len(times)} turns)"
        )


if __name__ == "__main__":
    main()
