"""The sandbox page keeps the nodes of messages that did not change while others do, through a
real browser: a reply streams into a thread (many updates a second) while a person reads,
clicks and presses on other messages. A node rebuilt under the pointer loses the click whose
press and release straddle the rebuild (as a CI run once did), and focus, a selection or a
choice half made in a menu with it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, WebSocket, expect

from tests.sandbox_browser import TIMEOUT_MS, running_sandbox, state, ui_post
from tests.test_sandbox_browser import browser, open_thread_of, send

__all__ = ["browser"]  # a fixture used by name

pytestmark = pytest.mark.timeout(180)
expect.set_options(timeout=TIMEOUT_MS)

SEED = "The release train leaves Thursday"  # a message the sandbox starts with, in #general


@pytest.fixture(scope="module")
def sandbox() -> Iterator[str]:
    # The demo's plain answer (about 70 words) streams over about ten seconds, two updates a
    # second (the bot's pace): long enough to press and release across several of them, with
    # room for a loaded machine (the test waits for updates, never for the whole answer).
    with running_sandbox(SANDBOX_WORD_DELAY="0.15") as (base, _process):
        yield base


class Updates:
    """The changes the page receives over its WebSocket (each one redraws the page)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, object]] = []

    def watch(self, socket: WebSocket) -> None:
        socket.on("framereceived", self._frame)

    def _frame(self, payload: str | bytes) -> None:
        change = json.loads(payload)
        if change.get("type") == "message":
            self.messages.append(change["message"])

    def wait_for(self, page: Page, count: int) -> None:
        """Until `count` more messages' changes reached the page (and it drew them)."""
        goal = len(self.messages) + count
        for _ in range(TIMEOUT_MS // 20):
            if len(self.messages) >= goal:
                page.wait_for_timeout(50)  # the page draws as it receives: let it
                return
            page.wait_for_timeout(20)  # Playwright delivers the frames while it waits
        raise AssertionError(f"{count} updates did not come: {len(self.messages)} < {goal}")

    def streaming(self) -> bool:
        """The bot's reply is still streaming (its last change is not the final one)."""
        return bool(self.messages) and self.messages[-1].get("streaming") is True


@pytest.fixture
def watched(browser: Browser, sandbox: str) -> Iterator[tuple[Page, Updates]]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    updates = Updates()
    page.on("websocket", updates.watch)
    page.goto(sandbox)
    expect(page.get_by_role("banner").get_by_role("status")).to_have_text("Countersign: connected")
    page.get_by_role("link", name="#general").click()
    yield page, updates
    context.close()


# Select a message's text, as a person dragging over it would.
SELECT_TEXT = """node => {
  const range = document.createRange();
  range.selectNodeContents(node.querySelector(".body"));
  getSelection().removeAllRanges();
  getSelection().addRange(range);
}"""


def mark(page: Page, selector: str) -> None:
    """Tag the node itself (a JS property, which a rebuilt node would not carry)."""
    page.locator(selector).evaluate("node => { node.keptForTest = true; }")


def still_marked(page: Page, selector: str) -> bool:
    found: bool = page.locator(selector).evaluate("node => node.keptForTest === true")
    return found


def test_unchanged_messages_keep_their_nodes_while_a_reply_streams(
    watched: tuple[Page, Updates], sandbox: str
) -> None:
    page, updates = watched
    send(page, "@Countersign how do threads work here?")
    thread = open_thread_of(page, "how do threads work here?")  # one plain click
    expect(thread.get_by_role("article").filter(has_text="Here is a plain answer")).to_be_visible()
    seed = page.get_by_role("main").get_by_role("article").filter(has_text=SEED)
    seed_ts = seed.get_attribute("data-ts")
    in_channel = f"#messages article[data-ts='{seed_ts}']"
    parent = thread.get_by_role("article").first
    in_thread = f"#thread-messages article[data-ts='{parent.get_attribute('data-ts')}']"
    mark(page, in_channel)
    mark(page, in_thread)
    button = page.locator(in_channel).get_by_role("button", name="Reply in thread")
    button.focus()
    page.locator(in_channel).evaluate(SELECT_TEXT)
    reply = thread.get_by_role("article").nth(1)
    before = reply.inner_text()

    updates.wait_for(page, 4)
    assert updates.streaming(), "the reply finished too soon for the test to mean anything"
    assert reply.inner_text() != before, "the streaming reply was not redrawn"
    assert still_marked(page, in_channel), "the channel's unchanged message was rebuilt"
    assert still_marked(page, in_thread), "the thread's unchanged parent was rebuilt"
    assert button.evaluate("node => document.activeElement === node"), "focus was lost"
    assert SEED in page.evaluate("String(getSelection())"), "the selected text was lost"

    # A press and a release with updates between them are one click, as in Slack.
    button.hover()
    page.mouse.down()
    updates.wait_for(page, 3)
    assert updates.streaming(), "the reply finished before the release"
    page.mouse.up()
    expect(thread.get_by_role("article").first).to_contain_text(SEED)

    # Kept, drawn again and new nodes together: the channel shows its messages in the
    # server's order, once each.
    question = page.get_by_role("main").get_by_role("article").filter(has_text="threads work")
    expect(question.get_by_role("button", name="1 reply")).to_be_visible()
    general = next(c for c in state(sandbox)["channels"] if c["name"] == "general")
    top = [
        m["ts"]
        for m in general["messages"]
        if m.get("thread_ts") in (None, m["ts"]) and m.get("visible_to") in (None, "UALICE")
    ]
    shown = page.locator("#messages article").evaluate_all("nodes => nodes.map(n => n.dataset.ts)")
    assert shown == top


GAIL = "Gail from the agency here"  # a seeded message of #general nobody answers above


def test_a_messages_first_reply_keeps_its_node_and_its_reply_button_in_place(
    watched: tuple[Page, Updates], sandbox: str
) -> None:
    """A message's first reply arrives right as people reach for "Reply in thread" (a CI run
    lost that click): the count appears on the same node, and the button does not move."""
    page, _ = watched
    message = page.get_by_role("main").get_by_role("article").filter(has_text=GAIL)
    ts = message.get_attribute("data-ts")
    selector = f"#messages article[data-ts='{ts}']"
    mark(page, selector)
    button = message.get_by_role("button", name="Reply in thread")
    before = button.bounding_box()
    said = {"user": "UBOB", "channel": "C0GENERAL", "text": "Welcome, Gail!", "thread_ts": ts}
    ui_post(sandbox, "/ui/message", said)
    expect(message.get_by_role("button", name="1 reply")).to_be_visible()
    assert still_marked(page, selector), "the message was drawn again for its reply count"
    assert button.bounding_box() == before, "Reply in thread moved under the pointer"
    button.click()
    thread = page.get_by_role("complementary", name="Thread")
    expect(thread.get_by_role("article").filter(has_text="Welcome, Gail!")).to_be_visible()
