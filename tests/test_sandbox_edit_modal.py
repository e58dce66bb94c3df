"""The typed Edit modal in the sandbox, through a real browser: a person picks a person, a
date and a priority from real controls, saves, and the card shows the new values."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from tests.sandbox_browser import state
from tests.test_sandbox_browser import (  # noqa: F401 (browser, page and sandbox: fixtures)
    DOCS,
    SHOTS,
    browser,
    open_thread_of,
    page,
    sandbox,
    send,
)


def edit_a_new_task(tab: Page, task: str) -> tuple[Locator, Locator]:
    """Alice asks for a task and clicks Edit on its card: the card and the open modal."""
    send(tab, f"@Countersign create a task to {task}")
    thread = open_thread_of(tab, task)
    card = thread.get_by_role("article").filter(has_text="Approval needed")
    card.get_by_role("button", name="Edit").click()
    return card, tab.get_by_role("dialog", name="Edit action")


def test_edit_picks_a_person_a_date_and_a_priority_and_the_card_shows_them(
    page: Page,  # noqa: F811 (the fixture)
    sandbox: str,  # noqa: F811 (the fixture)
) -> None:
    card, dialog = edit_a_new_task(page, "renew the office lease")
    assignee = dialog.get_by_label("Assignee", exact=True)
    expect(assignee).to_have_value("")  # nobody yet, and no id to type
    assignee.select_option(label="Bob")
    dialog.get_by_label("Due date", exact=True).fill("2026-12-24")
    priority = dialog.get_by_label("Priority", exact=True)
    expect(priority.locator("option:checked")).to_have_text("Normal")
    priority.select_option(label="High")
    if SHOTS:
        page.screenshot(path=str(DOCS / "sandbox-edit-modal.png"))
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_have_count(0)
    expect(card).to_contain_text("revision 2")
    expect(card).to_contain_text("Bob")
    expect(card).to_contain_text("high")
    channels = state(sandbox)["channels"]
    cards = [
        m
        for c in channels
        for m in c["messages"]
        if "renew the office lease" in m["text"] and m.get("blocks")
    ]
    assert cards, "no card"
    shown = str(cards[-1]["blocks"])
    assert "@Bob" in shown  # the person picked, by name (no id to read, nobody pinged)
    assert "24 Dec 2026" in shown  # the date picked, in words


def test_an_emptied_title_and_a_crafted_priority_are_refused_in_words(
    page: Page,  # noqa: F811 (the fixture)
) -> None:
    card, dialog = edit_a_new_task(page, "water the plants")
    title = dialog.get_by_label("Title", exact=True)
    title.fill("")
    title.evaluate("(el) => { el.required = false; }")  # past the page's own check
    priority = dialog.get_by_label("Priority", exact=True)
    priority.evaluate("(el) => { el.options[0].value = 'meh'; el.selectedIndex = 0; }")
    dialog.get_by_role("button", name="Save").click()
    errors = dialog.get_by_role("alert")
    expect(errors.filter(has_text="Title is required")).to_have_count(1)
    expect(errors.filter(has_text="Choose one of the options")).to_have_count(1)
    expect(dialog).to_be_visible()  # nothing saved, the form stays open
    expect(card).not_to_contain_text("revision 2")
