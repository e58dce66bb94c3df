"""The DM welcomes, in the sandbox through a real browser: opening the "Assistant" DM is
Slack's Messages tab (`app_home_opened`, `tab: "messages"`), the bot's welcome says what needs
approval, its suggested prompts show as buttons under their title, a click sends the prompt as
the person's message (and the prompts go), and a second open does not welcome again. Then
`assistant.threads.setSuggestedPrompts` as Slack takes it, bad input included, through the
real `slack_sdk` client. Screenshot for the docs with SANDBOX_SCREENSHOTS=1."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.suggested_prompts import DEFAULT_PROMPTS
from tests.sandbox_browser import (
    TIMEOUT_MS,
    base_of,
    bot_token,
    key_of,
    running_sandbox,
    state,
)
from tests.test_sandbox_browser import DOCS, SHOTS, act_as, send
from tests.test_sandbox_browser import browser as browser

pytestmark = pytest.mark.timeout(240)
expect.set_options(timeout=TIMEOUT_MS)

WELCOME = "I'm Countersign, an assistant that asks before it acts"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[str]:
    with running_sandbox() as (base, _process):
        yield base


@pytest.fixture(scope="module")
def page(browser: Browser, sandbox: str) -> Iterator[Page]:
    """One page for the module: the tests build on each other's work."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    opened.goto(sandbox)
    expect(opened.get_by_label("Acting as")).to_have_value("UALICE")
    yield opened
    context.close()


def slack(address: str) -> WebClient:
    return WebClient(token=bot_token(address), base_url=f"{base_of(address)}/api/")


def dm_messages(base: str, dm: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = next(
        c["messages"] for c in state(base)["channels"] if c["id"] == dm
    )
    return found


def welcomes(base: str, dm: str) -> int:
    return sum(WELCOME in m["text"] for m in dm_messages(base, dm) if m["user"] == "UBOT")


def test_opening_the_dm_welcomes_with_prompts(page: Page, sandbox: str) -> None:
    page.get_by_role("link", name="Assistant").click()
    main = page.get_by_role("main")
    welcome = main.get_by_role("article").filter(has_text=WELCOME)
    expect(welcome).to_have_count(1)
    # Sandbox policy: four eyes, Bob approves. The welcome says so in words, never as ids.
    expect(welcome).to_contain_text("Asks someone other than you to approve a card first")
    expect(welcome).to_contain_text("Create task")
    expect(welcome).to_contain_text("Hi @Alice")
    expect(welcome).not_to_contain_text("create_task")
    prompts = main.get_by_role("group", name="Try asking")
    expect(prompts).to_contain_text("Try asking")  # the title, above the buttons
    for prompt in DEFAULT_PROMPTS:
        expect(prompts.get_by_role("button", name=prompt.title, exact=True)).to_be_visible()
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-dm-welcome.png"), full_page=True)


def test_a_prompt_is_sent_as_the_persons_message_and_answered(page: Page, sandbox: str) -> None:
    main = page.get_by_role("main")
    board = next(p for p in DEFAULT_PROMPTS if p.title == "What's on the board?")
    main.get_by_role("button", name=board.title).click()
    expect(main.get_by_role("group", name="Try asking")).to_have_count(0)  # gone, as in Slack
    asked = main.get_by_role("article", name="Alice: message").filter(has_text=board.message)
    expect(asked).to_have_count(1)
    answer = page.get_by_role("article").filter(has_text="The board has no open tasks")
    expect(answer.first).to_be_visible()
    expect(answer.first).to_contain_text("demo model")
    sent = [m for m in dm_messages(sandbox, "DALICE") if m["user"] == "UALICE"]
    assert [m["text"] for m in sent] == [board.message]  # the prompt's message, exactly once


def test_the_other_default_prompts_get_sensible_demo_answers(page: Page, sandbox: str) -> None:
    """Each default prompt, as the demo model answers it: what it can do (and what waits for
    an approval), a create-task card for the asker, a question back for the channel."""
    main = page.get_by_role("main")
    expected = {
        "What can you do?": "first becomes an approval card",
        "Catch me up on a channel": "Which channel?",
        "Create a task": "Approval needed",
    }
    for title, answered in expected.items():
        page.get_by_role("link", name="#general").click()
        page.get_by_role("link", name="Assistant").click()  # opened again: the prompts again
        main.get_by_role("button", name=title, exact=True).click()
        expect(main.get_by_role("article").filter(has_text=answered).first).to_be_visible()
    card = main.get_by_role("article").filter(has_text="Approval needed").first
    expect(card).to_contain_text("review the release notes")
    expect(card).to_contain_text("@Alice")  # "for me": the asker, as a mention


def test_opening_the_dm_again_does_not_welcome_again(page: Page, sandbox: str) -> None:
    page.get_by_role("link", name="#general").click()
    page.get_by_role("link", name="Assistant").click()
    act_as(page, "Bob (approver)")  # Bob's open comes after Alice's: his welcome proves it ran
    bob = page.get_by_role("main").get_by_role("article").filter(has_text=WELCOME)
    expect(bob).to_contain_text("Hi @Bob")
    time.sleep(1)
    assert welcomes(sandbox, "DALICE") == 1
    assert welcomes(sandbox, "DBOB") == 1
    act_as(page, "Alice (requester)")
    expect(page.get_by_role("main").get_by_role("article").filter(has_text=WELCOME)).to_have_count(
        1
    )


def test_typing_ones_own_message_puts_the_prompts_away(page: Page, sandbox: str) -> None:
    page.get_by_role("link", name="#general").click()
    page.get_by_role("link", name="Assistant").click()
    main = page.get_by_role("main")
    expect(main.get_by_role("group", name="Try asking")).to_be_visible()
    send(page, "Hello there")
    expect(main.get_by_role("group", name="Try asking")).to_have_count(0)


def test_prompts_for_a_thread_show_in_it_and_reply_there(page: Page, sandbox: str) -> None:
    client = slack(sandbox)
    root = client.chat_postMessage(channel="DALICE", text="A thread of our own")["ts"]
    client.assistant_threads_setSuggestedPrompts(
        channel_id="DALICE",
        thread_ts=root,
        title="Next",
        prompts=[{"title": "<b>Go on</b>", "message": "Tell me more about <!here>"}],
    )
    main = page.get_by_role("main")
    message = main.get_by_role("article").filter(has_text="A thread of our own")
    message.get_by_role("button", name="Reply in thread").click()
    thread = page.get_by_role("complementary", name="Thread")
    button = thread.get_by_role("group", name="Next").get_by_role("button")
    expect(button).to_have_text("<b>Go on</b>")  # text, never markup
    button.click()
    expect(thread.get_by_role("group", name="Next")).to_have_count(0)
    sent = [m for m in dm_messages(sandbox, "DALICE") if m["thread_ts"] == root]
    deadline = time.monotonic() + 10
    while not any(m["user"] == "UALICE" for m in sent) and time.monotonic() < deadline:
        time.sleep(0.1)
        sent = [m for m in dm_messages(sandbox, "DALICE") if m["thread_ts"] == root]
    mine = [m for m in sent if m["user"] == "UALICE"]
    assert [m["text"] for m in mine] == ["Tell me more about <!here>"]


def test_a_prompt_that_looks_like_a_command_is_sent_as_words(page: Page, sandbox: str) -> None:
    """Slack sends a prompt's message as a message; it never runs it as a slash command."""
    act_as(page, "Gail (guest)")
    page.get_by_role("link", name="Assistant").click()
    main = page.get_by_role("main")
    expect(main.get_by_role("group", name="Try asking")).to_be_visible()  # the bot's, first
    slack(sandbox).assistant_threads_setSuggestedPrompts(
        channel_id="DGAIL", prompts=[{"title": "Waiting", "message": "/approvals please"}]
    )
    main.get_by_role("button", name="Waiting", exact=True).click()
    # Stored as her message: a slash command never is.
    expect(main.get_by_role("article", name="Gail: message")).to_contain_text("/approvals please")
    act_as(page, "Alice (requester)")


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"channel_id": "C0GENERAL"}, "channel_not_found"),  # only a DM with the app
        ({"channel_id": "DNOBODY"}, "channel_not_found"),
        ({"channel_id": "DGAIL", "thread_ts": "1.000001"}, "invalid_thread_ts"),
        ({"channel_id": "DGAIL", "prompts": []}, "invalid_arguments"),
        (
            {"channel_id": "DGAIL", "prompts": [{"title": "t", "message": "m"}] * 5},
            "invalid_arguments",
        ),
        ({"channel_id": "DGAIL", "prompts": [{"title": "only a title"}]}, "invalid_arguments"),
        ({"channel_id": "DGAIL", "prompts": [{"title": " ", "message": "m"}]}, "invalid_arguments"),
        ({"channel_id": "DGAIL", "prompts": ["just words"]}, "invalid_arguments"),
        ({"channel_id": "DGAIL", "title": ["not", "words"]}, "invalid_arguments"),
        ({"channel_id": "DGAIL", "prompts": "not JSON"}, "invalid_arguments"),
    ],
)
def test_bad_prompts_are_refused_as_slack_does(
    sandbox: str, arguments: dict[str, Any], error: str
) -> None:
    body = {"prompts": [{"title": "Hi", "message": "Hello"}], **arguments}
    before = state(sandbox)["prompts"]
    with pytest.raises(SlackApiError) as refused:
        slack(sandbox).api_call("assistant.threads.setSuggestedPrompts", json=body)
    assert refused.value.response["error"] == error
    assert state(sandbox)["prompts"] == before  # nothing stored by a refused call


def test_prompts_arrive_as_a_form_too(sandbox: str) -> None:
    """Slack takes the prompts as a JSON string in a form post, as the SDK sends them."""
    prompts = [{"title": "Plan my day", "message": "What is due today?"}]
    slack(sandbox).api_call(
        "assistant.threads.setSuggestedPrompts",
        data={"channel_id": "DGAIL", "prompts": json.dumps(prompts)},
    )
    assert state(sandbox)["prompts"]["DGAIL:"] == {"title": "", "prompts": prompts}


def test_the_page_cannot_open_an_unknown_tab(sandbox: str) -> None:
    request = urllib.request.Request(  # noqa: S310 - the sandbox on loopback
        f"{base_of(sandbox)}/ui/home",
        data=json.dumps({"user": "UALICE", "tab": "settings"}).encode(),
        headers={"Content-Type": "application/json", "X-Sandbox-Key": key_of(sandbox)},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)  # noqa: S310
    assert refused.value.code == 400
