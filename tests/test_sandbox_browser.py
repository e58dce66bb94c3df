"""The sandbox through a real browser: headless Chromium driven by Playwright, the unchanged
bot as a process against the sandbox, the built-in demo model (and, at the end, a fake
OpenAI-compatible server, so the real model path is driven too)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, FilePayload, Locator, Page, expect, sync_playwright

from tests.fakes import openai as fake_openai
from tests.sandbox_browser import TIMEOUT_MS, chromium_path, running_sandbox, state

DOCS = Path(__file__).resolve().parent.parent / "docs"
SHOTS = bool(__import__("os").environ.get("SANDBOX_SCREENSHOTS"))
VIEWER_ZONE = "Pacific/Auckland"

pytestmark = pytest.mark.timeout(240)
expect.set_options(timeout=TIMEOUT_MS)  # generous but bounded: the machine is shared


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium_path()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[str]:
    # Slow enough that a reply is seen growing (two partial texts at least), faster than a
    # newcomer's six seconds.
    with running_sandbox(SANDBOX_WORD_DELAY="0.06") as (base, _process):
        yield base


@pytest.fixture
def page(browser: Browser, sandbox: str) -> Iterator[Page]:
    # A viewer far from UTC: Slack's date tokens must read in their time zone, and a date (no
    # time zone) must read as the same day for them as for everyone.
    context = browser.new_context(viewport={"width": 1280, "height": 860}, timezone_id=VIEWER_ZONE)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(sandbox)
    expect(page.get_by_label("Acting as")).to_have_value("UALICE")
    yield page
    context.close()


def act_as(page: Page, who: str) -> None:
    page.get_by_label("Acting as").select_option(label=who)


def send(page: Page, text: str, box: str = "Message") -> None:
    composer = page.get_by_role("textbox", name=box)
    composer.fill(text)
    composer.press("Enter")


def open_thread_of(page: Page, text: str) -> Locator:
    """Open the thread of the channel message holding `text`; returns the thread pane."""
    message = page.get_by_role("main").get_by_role("article").filter(has_text=text).last
    thread = page.get_by_role("complementary", name="Thread")
    # One plain click: the page keeps unchanged messages' nodes across updates, so a click
    # lands while the bot posts (tests/test_sandbox_keeps_nodes.py).
    message.get_by_role("button", name="Reply in thread").click()
    expect(thread).to_be_visible()
    return thread


def bot_reply(thread: Locator, containing: str) -> Locator:
    return thread.get_by_role("article").filter(has_text="Countersign").filter(has_text=containing)


GROWTH_RECORDER = """(pane, opening) => {
  const lengths = (window.replyLengths = []);
  const note = () => {
    const reply = [...pane.querySelectorAll("article")].find((article) =>
      article.innerText.includes(opening));
    if (reply && lengths.at(-1) !== reply.innerText.length) lengths.push(reply.innerText.length);
  };
  new MutationObserver(note).observe(pane, {subtree: true, childList: true, characterData: true});
  note();
}"""


def test_a_mention_streams_a_reply_that_grows_in_the_thread(page: Page, sandbox: str) -> None:
    expect(page.get_by_role("banner").get_by_role("status")).to_have_text("Countersign: connected")
    page.get_by_role("link", name="#general").click()
    send(page, "@Countersign how does this sandbox work?")
    thread = open_thread_of(page, "how does this sandbox work?")
    reply = thread.get_by_role("article").filter(has_text="Here is a plain answer")
    expect(reply).to_be_visible()
    # Every text the reply shows is recorded by the page itself, at each change of the thread
    # pane: polled from here, a busy machine's slow round trips could miss every partial text.
    thread.evaluate(GROWTH_RECORDER, "Here is a plain answer")
    if SHOTS:
        while len(set(thread.evaluate("() => window.replyLengths"))) < 2:
            time.sleep(0.05)
        page.screenshot(path=str(DOCS / "sandbox-streamed-reply.png"))  # still growing
    expect(reply).to_contain_text("then switch to Bob to approve it.", timeout=30_000)  # the end
    grew = sorted(set(thread.evaluate("() => window.replyLengths")))
    assert len(grew) >= 3, f"the reply did not visibly grow: {grew}"  # two partial texts, then all
    # As in Slack: the channel shows the thread's replies count, and the reply is threaded.
    channel = page.get_by_role("main").get_by_role("article").filter(has_text="sandbox work?")
    expect(channel.get_by_role("button", name="1 reply")).to_be_visible()
    # A reply typed in the thread pane stays in the thread, and the bot answers there.
    send(page, "@Countersign and in one sentence?", box="Reply")
    expect(thread.get_by_role("article").filter(has_text="and in one sentence?")).to_be_visible()
    expect(thread.get_by_role("article").filter(has_text="Here is a plain answer")).to_have_count(
        2, timeout=30_000
    )
    expect(channel.get_by_role("button", name="3 replies")).to_be_visible()
    general = next(c for c in state(sandbox)["channels"] if c["name"] == "general")
    answer = next(m for m in general["messages"] if "Here is a plain answer" in m["text"])
    assert answer["thread_ts"]
    assert "demo model" in answer["text"]


def card_reads_as_words(card: Locator) -> None:
    """Each field once under its label in words; the person by name, the date in words, the
    expiry in the viewer's own time zone; no raw key, no id, no UTC."""
    text = card.inner_text()
    for label in ("Title", "Assignee", "Due date"):
        assert text.count(label) == 1, (label, text)
    assert "@Bob" in text
    assert "Fri 4 Dec 2026" in text
    for machine in ("due_date", "assignee", "UBOB", "UALICE", "UTC", "Exactly what"):
        assert machine not in text, (machine, text)
    assert re.search(r"Asked by @Alice · expires .+ · revision 1 · digest [0-9a-f]{10}", text)
    expiry = card.locator("time.date").first
    moment = datetime.fromisoformat(str(expiry.get_attribute("datetime")).replace("Z", "+00:00"))
    local = moment.astimezone(ZoneInfo(VIEWER_ZONE))
    expect(expiry).to_contain_text(local.strftime("%I:%M %p").lstrip("0"))


def test_four_eyes_alice_is_refused_bob_approves_and_the_thread_resumes(page: Page) -> None:
    send(page, "@Countersign create a task to review the release notes for @bob by 2026-12-04")
    thread = open_thread_of(page, "task to review the release notes")
    card = thread.get_by_role("article").filter(has_text="Approval needed")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    card_reads_as_words(card)
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-card-before-approve.png"))
    card.get_by_role("button", name="Approve").click()
    refused = thread.get_by_role("article").filter(has_text="Only visible to you")
    expect(refused.filter(has_text="someone other than the requester")).to_be_visible()

    act_as(page, "Bob (approver)")
    expect(page.get_by_text("Only visible to you")).to_have_count(0)  # it was Alice's alone
    thread = open_thread_of(page, "task to review the release notes")
    card = thread.get_by_role("article").filter(has_text="Approval needed")
    card.get_by_role("button", name="Approve").click()
    expect(bot_reply(thread, "Done: the task “review the release notes”")).to_be_visible()
    expect(card).to_contain_text("Approved by @Bob")
    expect(card.get_by_role("button", name="Approve")).to_have_count(0)
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-card-after-approve.png"))


def test_a_decline_with_a_reason_reaches_the_model(page: Page) -> None:
    send(page, "@Countersign create a task to delete the old docs")
    act_as(page, "Bob (approver)")
    thread = open_thread_of(page, "delete the old docs")
    card = thread.get_by_role("article").filter(has_text="Approval needed")
    card.get_by_role("button", name="Decline").click()
    dialog = page.get_by_role("dialog", name="Decline action")
    dialog.get_by_label("Why? (the assistant will read this)").fill("we still link to them")
    dialog.get_by_role("button", name="Decline").click()
    expect(dialog).to_have_count(0)
    expect(bot_reply(thread, "“we still link to them”")).to_be_visible()
    expect(card).to_contain_text("Declined by @Bob")


def test_show_all_reveals_a_long_value(page: Page) -> None:
    long = " ".join(f"step {n}: check the links, the spelling and the examples." for n in range(40))
    send(page, f"@Countersign create a task to {long}")
    thread = open_thread_of(page, "step 0:")
    card = thread.get_by_role("article").filter(has_text="Approval needed")
    card.get_by_role("button", name="Show all").first.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("step 39: check the links")
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-show-all.png"))
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_have_count(0)


def test_the_guest_cannot_have_exec_read(page: Page) -> None:
    act_as(page, "Gail (guest)")
    page.get_by_role("link", name="#exec").click()
    expect(page.get_by_text("You are not a member of #exec")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_hidden()
    page.get_by_role("link", name="#general").click()
    send(page, "@Countersign read #exec")
    thread = open_thread_of(page, "read #exec")
    expect(bot_reply(thread, "not a member of that channel")).to_be_visible()
    expect(thread).not_to_contain_text("budget")


def test_history_typed_in_the_composer_lists_the_turn(page: Page) -> None:
    page.get_by_role("link", name="Assistant").click()
    send(page, "What is on my plate today?")
    main = page.get_by_role("main")
    expect(main.get_by_role("article").filter(has_text="demo model")).to_be_visible()
    send(page, "/history")
    history = main.get_by_role("article").filter(has_text="Only visible to you")
    expect(history.filter(has_text="Your conversations")).to_be_visible()
    expect(history).to_contain_text("in your DM with Countersign")
    entry = history.locator(".block-section").filter(has_text="What is on my plate").first
    entry.get_by_role("button", name="Open").click()
    expect(history).to_contain_text("What is on my plate today?")


def test_the_real_model_path_with_an_openai_compatible_server(browser: Browser) -> None:
    model = fake_openai.FakeOpenAI(
        fake_openai.Script(text="Hello from the fake model, word by word.", tokens_per_second=20)
    ).start()
    try:
        env = {
            "OPENAI_API_KEY": fake_openai.API_KEY,
            "OPENAI_BASE_URL": model.base_url,
            "LLM_MODEL": fake_openai.MODEL,
        }
        with running_sandbox(**env) as (base, _process):
            context = browser.new_context()
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            page.goto(base)
            page.get_by_role("link", name="Assistant").click()
            send(page, "Say hello")
            reply = page.get_by_role("main").get_by_role("article").filter(has_text="fake model")
            expect(reply).to_contain_text("Hello from the fake model, word by word.")
            expect(reply).not_to_contain_text("demo model")
            context.close()
        assert model.requests, "the model was never asked"
    finally:
        model.stop()


def test_summarise_general_reads_the_channel_then_answers(page: Page) -> None:
    send(page, "@Countersign summarise #general")
    thread = open_thread_of(page, "summarise #general")
    answer = bot_reply(thread, "Here are the latest")
    expect(answer).to_contain_text("Reading recent messages")  # the tool's progress, as a task
    expect(answer).to_contain_text("The release train leaves Thursday")
    expect(answer).to_contain_text("demo model")


def test_edit_the_card_then_bob_sees_it_in_approvals_and_on_the_home_tab(page: Page) -> None:
    send(page, "@Countersign create a task to order new badges")
    thread = open_thread_of(page, "order new badges")
    card = thread.get_by_role("article").filter(has_text="Approval needed")
    card.get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name="Edit action")
    dialog.get_by_label("Title", exact=True).fill("order new badges for the guests")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_have_count(0)
    expect(card).to_contain_text("revision 2")
    expect(card).to_contain_text("order new badges for the guests")

    act_as(page, "Bob (approver)")
    send(page, "/approvals")
    answer = page.get_by_role("main").get_by_role("article").filter(has_text="Only visible to you")
    expect(answer.filter(has_text="Waiting for your decision")).to_contain_text(
        "order new badges for the guests"
    )
    page.get_by_role("link", name="Home").click()
    home = page.get_by_role("main")
    expect(home.get_by_text("Waiting for you", exact=True)).to_be_visible()
    expect(home).to_contain_text("order new badges for the guests")


# Threads continue (issue 26): once the bot answered in a thread, a reply typed in the thread
# pane without a mention gets its answer there.
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


# Issue 27: a file shared with a question is read by the bot (its app_mention lists the file,
# and the bot downloads url_private with its token), and the demo model
# answers from what the bot put in its prompt. Needs the bot side of issue 27 part 1 (branch
# `files`): on this branch alone the demo model says it sees no file.
def test_the_bot_reads_a_file_shared_with_a_mention_and_answers_from_it(page: Page) -> None:
    page.get_by_role("link", name="#general").click()
    page.get_by_role("textbox", name="Message").fill("@Countersign what is in this file?")
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Share a file", exact=True).click()
    csv = b"region,revenue\nnorth,120\nsouth,95\n"
    chooser.value.set_files(files=FilePayload(name="q3.csv", mimeType="text/csv", buffer=csv))
    thread = open_thread_of(page, "what is in this file?")
    answer = thread.get_by_role("article", name="Countersign: message").filter(has_text="q3.csv")
    expect(answer).to_contain_text("region,revenue north,120", timeout=30_000)
    expect(answer).to_contain_text("shared by Alice")
