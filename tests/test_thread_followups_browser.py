"""Threads continue, in the sandbox through a real browser: once the bot answered in a thread,
a reply typed in the thread pane without a mention gets its answer there."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.test_sandbox_browser import (  # noqa: F401 - fixtures, used by name
    DOCS,
    SHOTS,
    browser,
    open_thread_of,
    sandbox,
    send,
)
from tests.test_sandbox_browser import page as page

pytestmark = pytest.mark.timeout(240)


def test_a_reply_in_the_thread_without_a_mention_gets_an_answer(page: Page) -> None:
    page.get_by_role("link", name="#general").click()
    send(page, "@Countersign what is on the board this week?")
    thread = open_thread_of(page, "what is on the board this week?")
    answers = thread.get_by_role("article").filter(has_text="Here is a plain answer")
    expect(answers).to_have_count(1, timeout=30_000)
    expect(answers.first).to_contain_text("demo model", timeout=30_000)  # finished

    send(page, "and which of it is late?", box="Reply")  # no mention
    expect(
        thread.get_by_role("article").filter(has_text="and which of it is late?")
    ).to_be_visible()
    expect(answers).to_have_count(2, timeout=30_000)
    expect(answers.last).to_contain_text("demo model", timeout=30_000)
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-thread-follow-up.png"))
