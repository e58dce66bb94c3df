"""The sandbox's page with people alone (`--no-bot`: people typing is all this needs), through
a real browser. The Thread pane, as in Slack: there only while a thread is open, and what is
typed in its Reply box goes to that thread, never to the channel. Sharing files: by the "Share
a file" button in a channel, by dropping a file on a thread and on the DM; each shows on its
message (name, size, an image's preview). And a page of another site, in the same browser,
cannot drive the sandbox: its fetch, WebSocket and form are refused, even with the key."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import FilePayload, Page, Route, expect

from tests.harness import clean_env
from tests.sandbox_browser import ROOT, TIMEOUT_MS, address_in, base_of, key_of, state
from tests.test_sandbox_browser import browser, open_thread_of, page, send

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


CSV = b"region,revenue\nnorth,120\nsouth,95\n"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
EVIL = "http://evil.test"


def drop(page: Page, target: str, name: str, data: bytes, mimetype: str) -> None:
    """Drop a file on `target` (a CSS selector), as a person dragging it from their desktop."""
    transfer = page.evaluate_handle(
        """([name, data, type]) => {
            const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type }));
            return transfer;
        }""",
        [name, base64.b64encode(data).decode(), mimetype],
    )
    page.dispatch_event(target, "dragover", {"dataTransfer": transfer})
    page.dispatch_event(target, "drop", {"dataTransfer": transfer})


def messages_of(address: str, channel: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = next(
        c["messages"] for c in state(address)["channels"] if c["id"] == channel
    )
    return found


def test_share_by_the_button_and_by_dropping_in_a_thread_and_the_dm(
    page: Page, sandbox: str
) -> None:
    bot = page.get_by_role("banner").get_by_role("status")
    expect(bot).to_have_text("Countersign: not connected")  # --no-bot: none was started
    page.get_by_role("link", name="#general").click()
    page.get_by_role("textbox", name="Message").fill("the Q3 numbers")
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Share a file", exact=True).click()
    chooser.value.set_files(files=FilePayload(name="q3.csv", mimeType="text/csv", buffer=CSV))
    shared = page.get_by_role("main").get_by_role("article").filter(has_text="the Q3 numbers")
    card = shared.get_by_role("listitem", name="File: q3.csv")
    expect(card).to_contain_text("q3.csv")
    expect(card).to_contain_text(f"{len(CSV)} B")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")  # sent with it

    thread = open_thread_of(page, "the Q3 numbers")
    drop(page, "#thread-messages", "chart.png", PNG, "image/png")
    image = thread.get_by_role("listitem", name="File: chart.png").get_by_role("img")
    expect(image).to_have_attribute("alt", "chart.png")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#thread img')].some((i) => i.naturalWidth > 0)"
    )  # the preview loaded: the page's own copy, served to the page
    root = next(m for m in messages_of(sandbox, "C0GENERAL") if m["text"] == "the Q3 numbers")
    reply = next(m for m in messages_of(sandbox, "C0GENERAL") if m["files"][:1] and m["thread_ts"])
    assert reply["thread_ts"] == root["ts"]
    assert reply["files"][0]["name"] == "chart.png"

    page.get_by_role("link", name="Assistant").click()
    drop(page, "#messages", "notes.md", b"# Notes\nship it\n", "text/markdown")
    expect(page.get_by_role("main").get_by_role("listitem", name="File: notes.md")).to_be_visible()
    dm = messages_of(sandbox, "DALICE")[-1]
    assert (dm["user"], dm["files"][0]["name"], dm["thread_ts"]) == ("UALICE", "notes.md", None)
    send(page, "and this is text only")  # the composer still posts plain messages
    expect(page.get_by_role("main")).to_contain_text("and this is text only")


FOREIGN_PAGE = """<!doctype html><title>Win a prize</title><script>
const target = %s, key = %s, tried = {};
async function attempt() {
  const body = JSON.stringify({ user: "UBOB", channel: "C0GENERAL", text: "posted by evil.test" });
  try {
    const r = await fetch(target + "/ui/message", { method: "POST", credentials: "include",
      headers: { "Content-Type": "application/json", "X-Sandbox-Key": key }, body });
    tried.fetch = "status " + r.status;
  } catch (e) { tried.fetch = "refused"; }
  try {  // a "simple" request (no preflight): it may leave the browser, and is refused there
    await fetch(target + "/ui/message", { method: "POST", mode: "no-cors",
      credentials: "include", headers: { "Content-Type": "text/plain" }, body });
  } catch (e) { /* or the browser keeps it from a private address */ }
  try {
    const r = await fetch(target + "/api/state?key=" + key);
    tried.state = await r.text();
  } catch (e) { tried.state = "refused"; }
  tried.socket = await new Promise((done) => {
    const ws = new WebSocket(target.replace("http", "ws") + "/ui/live?key=" + key);
    ws.onmessage = (e) => done("read: " + e.data.slice(0, 40));
    ws.onerror = () => done("refused");
  });
  const form = document.createElement("form");
  form.method = "POST"; form.action = target + "/ui/message"; form.target = "sink";
  for (const [k, v] of [["user", "UBOB"], ["channel", "C0GENERAL"], ["text", "posted by a form"]]) {
    const i = document.createElement("input"); i.name = k; i.value = v; form.append(i);
  }
  document.body.append(form);
  form.submit();
  return tried;
}
</script><iframe name="sink"></iframe>"""


def test_a_page_of_another_site_cannot_drive_the_sandbox(page: Page, sandbox: str) -> None:
    """Even knowing the key (the printed address leaked): Origin decides."""
    target, key = base_of(sandbox), key_of(sandbox)

    def serve(route: Route) -> None:
        html = FOREIGN_PAGE % (json.dumps(target), json.dumps(key))
        route.fulfill(status=200, content_type="text/html", body=html)

    page.route(f"{EVIL}/**", serve)
    page.goto(f"{EVIL}/prize")  # same browser: the sandbox's cookie is there
    tried = page.evaluate("attempt()")
    assert tried["fetch"] == "refused"  # 403, and no CORS: the page learns nothing
    assert tried["state"] == "refused"
    assert tried["socket"] == "refused"
    page.wait_for_timeout(500)  # the form's post, into its iframe
    texts = [m["text"] for m in messages_of(sandbox, "C0GENERAL")]
    assert not [t for t in texts if "posted by" in t]
