"""The App Home and /history in the sandbox, through a real browser: conversations by title,
sections with their buttons, pages, dates, the card's link opening its thread, and what the
bot did in words (never JSON). Screenshots for the docs with SANDBOX_SCREENSHOTS=1."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.sandbox_browser import TIMEOUT_MS, chromium_path, running_sandbox
from tests.test_sandbox_browser import DOCS, SHOTS, act_as, open_thread_of, send

pytestmark = pytest.mark.timeout(240)
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def sandbox_page() -> Iterator[Page]:
    """One sandbox and one page for the module: the tests build on each other's work."""
    with sync_playwright() as playwright, running_sandbox() as (base, _process):
        browser: Browser = playwright.chromium.launch(executable_path=chromium_path())
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(base)
        expect(page.get_by_label("Acting as")).to_have_value("UALICE")
        yield page
        context.close()
        browser.close()


def test_the_app_home_shows_sections_titles_and_the_cards_link(sandbox_page: Page) -> None:
    """Bob, the approver, asked the bot something in his DM; Alice asks for a task."""
    page = sandbox_page
    act_as(page, "Bob (approver)")
    page.get_by_role("link", name="Assistant").click()
    send(page, "What is on my plate today?")
    reply = page.get_by_role("main").get_by_role("article").filter(has_text="demo model")
    expect(reply).to_be_visible()
    act_as(page, "Alice (requester)")
    page.get_by_role("link", name="#general").click()
    send(page, "@Countersign create a task to order new badges")
    thread = open_thread_of(page, "order new badges")
    expect(thread.get_by_role("article").filter(has_text="Approval needed")).to_be_visible()

    act_as(page, "Bob (approver)")
    page.get_by_role("link", name="Home").click()
    home = page.get_by_role("main")
    for heading in ("Waiting for you", "Your recent work", "Your usage", "Grants"):
        expect(home.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(home).to_contain_text("What is on my plate")  # conversations by their titles
    expect(home).to_contain_text("Create a task to order")
    expect(home).to_contain_text("asked by @Alice")
    expect(home).not_to_contain_text("{")  # no JSON, and every date token rendered
    expect(home).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d|today|at \d"))
    expect(home.get_by_role("button", name="Decline")).to_be_visible()
    opener = home.get_by_role("link", name="Open the card")
    expect(opener).to_be_visible()
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-app-home.png"), full_page=True)

    opener.click()  # Slack's permalink of a reply: the thread opens, the answer around it
    thread = page.get_by_role("complementary", name="Thread")
    expect(thread.get_by_role("article").filter(has_text="Approval needed")).to_be_visible()
    expect(thread).to_contain_text("order new badges")
    act_as(page, "Alice (requester)")


def test_history_reads_as_a_record_and_pages(sandbox_page: Page) -> None:
    page = sandbox_page
    page.get_by_role("link", name="#general").click()
    # Ten conversations, then the summary: eleven at least (two pages), the summary newest.
    for n in range(10):
        send(page, f"@Countersign hello number {n}")
        expect(page.get_by_role("main")).to_contain_text(f"hello number {n}")
    for n in range(10):  # each answered, so each conversation is stored before the lists
        asked = page.get_by_role("main").get_by_role("article").filter(has_text=f"number {n}")
        expect(asked.get_by_role("button", name=re.compile(r"\d+ repl"))).to_be_visible()
    send(page, "@Countersign summarise #general")
    thread = open_thread_of(page, "summarise #general")
    expect(thread.get_by_role("article").filter(has_text="Here are the latest")).to_be_visible()
    send(page, "/history")
    answer = page.get_by_role("main").get_by_role("article").filter(has_text="Only visible to you")
    history = answer.last
    expect(history).to_contain_text("Your conversations")
    expect(history).to_contain_text("(page 1)")
    expect(history).not_to_contain_text("{")
    entry = history.locator(".block-section").filter(has_text="Summarise #general").first
    expect(entry).to_contain_text("in #general")
    entry.get_by_role("button", name="Open").click()
    expect(history).to_contain_text("read messages of #general")  # the tool's work, in words
    expect(history).not_to_contain_text('"messages"')
    expect(history).not_to_contain_text("get_recent_messages")
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-history.png"), full_page=True)

    page.get_by_role("link", name="Home").click()
    home = page.get_by_role("main")
    expect(home).to_contain_text("Conversations, page 1")
    home.get_by_role("button", name="Next").click()
    expect(home).to_contain_text("Conversations, page 2")
    home.get_by_role("button", name="Previous").click()
    expect(home).to_contain_text("Conversations, page 1")
