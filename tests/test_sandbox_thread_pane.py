"""The sandbox's Thread pane, as in Slack: there only while a thread is open, and what is typed
in its Reply box goes to that thread, never to the channel. The sandbox alone (`--no-bot`):
people typing is all this needs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.harness import clean_env
from tests.sandbox_browser import ROOT, TIMEOUT_MS, address_in, state
from tests.test_sandbox_browser import browser, page  # on this module's `sandbox`

__all__ = ["browser", "page"]  # fixtures used by name

DOCS = ROOT / "docs"
SHOTS = bool(os.environ.get("SANDBOX_SCREENSHOTS"))

pytestmark = pytest.mark.timeout(120)
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp("sandbox")
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--no-bot", "--port", "0"],
        env=clean_env(TMPDIR=str(folder)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield address_in(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=20)


def general(sandbox: str) -> list[dict[str, str]]:
    channel = next(c for c in state(sandbox)["channels"] if c["name"] == "general")
    messages: list[dict[str, str]] = channel["messages"]
    return messages


def test_no_thread_pane_until_a_thread_is_opened(page: Page, sandbox: str) -> None:
    thread = page.get_by_role("complementary", name="Thread")
    reply = page.get_by_role("textbox", name="Reply")
    page.get_by_role("link", name="#general").click()
    expect(page.get_by_role("heading", name="#general")).to_be_visible()
    expect(thread).to_be_hidden()
    expect(reply).to_be_hidden()

    message = page.get_by_role("textbox", name="Message")
    message.fill("lunch at noon?")
    message.press("Enter")
    posted = page.get_by_role("main").get_by_role("article").filter(has_text="lunch at noon?")
    expect(posted).to_be_visible()
    expect(thread).to_be_hidden()  # a message sent is not a thread opened

    posted.get_by_role("button", name="Reply in thread").click()
    expect(thread).to_be_visible()
    expect(reply).to_be_focused()
    reply.fill("noon works")
    reply.press("Enter")
    expect(thread.get_by_role("article").filter(has_text="noon works")).to_be_visible()
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-thread.png"))
    parent = next(m for m in general(sandbox) if m["text"] == "lunch at noon?")
    answer = next(m for m in general(sandbox) if m["text"] == "noon works")
    assert answer["thread_ts"] == parent["ts"]  # in the thread, not in the channel

    page.get_by_role("button", name="Close thread").click()
    expect(thread).to_be_hidden()
    expect(reply).to_be_hidden()
    posted.get_by_role("button", name="1 reply").click()
    expect(thread).to_be_visible()
    page.get_by_role("link", name="#exec").click()  # another channel: the thread closes
    expect(thread).to_be_hidden()


def test_a_reply_box_without_an_open_thread_posts_nothing(page: Page, sandbox: str) -> None:
    """Even driven past the hidden pane (a script, a stale tab): nothing reaches the channel."""
    page.get_by_role("link", name="#general").click()
    before = len(general(sandbox))
    page.evaluate(
        """() => {
          const box = document.getElementById("reply");
          box.value = "typed into a closed thread";
          box.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
        }"""
    )
    page.wait_for_timeout(300)  # what a post would take on loopback, several times over
    assert len(general(sandbox)) == before
    assert all(m["text"] != "typed into a closed thread" for m in general(sandbox))
