"""The `github` pack through the front door, against a recording fake of GitHub's REST API:
cards from live data, exactly one write with the approved arguments, stale targets, a retry
after a lost answer, strangers, the allow-list and rate limits."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.slack import cards
from tests.card_reading import card_fields
from tests.fakes.github import TOKEN, FakeGitHub
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import DEFAULT_MEMBERS, FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.test_approvals_flow import call, card_text, proposals, tool_results
from tests.test_crash_matrix import Bot as CrashBot
from tests.test_crash_matrix import eventually


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    github = FakeGitHub().start()
    github.add_issue("acme/api", 7, "Login loops", labels=["bug", "ui"], assignees=["dana"])
    github.add_pull("acme/api", 9, "Fix SSO loop", head="a1b2c3d4e5f6a7b8")
    github.repo("other/secret")
    yield github
    github.stop()


def github_settings(github: FakeGitHub, **extra: Any) -> dict[str, Any]:
    return {
        "github_token": TOKEN,
        "github_api_url": github.api_url,
        "github_repos": ["acme/*"],
        **extra,
    }


@pytest.fixture
async def gh_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    fake_slack.members["C1"] = [*DEFAULT_MEMBERS, "UBOSS"]  # the approver reads the thread
    running = await start_bot(
        make_settings(
            fake_slack,
            fake_model,
            sqlite_url,
            approval_policies={"github": {"approvers": ["UBOSS", "UALICE"]}},
            **github_settings(fake_github),
        )
    )
    yield running
    await stop_bot(running)


def patches(github: FakeGitHub) -> list[Any]:
    return [w.body for w in github.writes() if w.method == "PATCH"]


async def test_an_update_card_shows_old_and_new_values_and_runs_exactly_once(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    update = {"repo": "acme/api", "number": 7, "labels": ["Bug", "P1"], "state": "closed"}
    fake_model.script(
        Script(tool_calls=[call("github_update_issue", update)]), Script(text="Updated.")
    )
    await gh_bot.mention("C1", "mark the login issue p1 and close it", fake_slack)
    await gh_bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert "Update issue acme/api#7 'Login loops': state, labels" in shown
    fields = card_fields(card)
    assert fields["State"] == "~open~ → closed"
    assert fields["Labels"] == "~bug, ui~ → Bug, P1 (means bug, p1 (adds p1; removes ui))"
    assert patches(fake_github) == []
    await gh_bot.click(card, cards.APPROVE, "UMALLORY", "C1")  # not an approver
    await gh_bot.idle()
    assert patches(fake_github) == []
    await gh_bot.click(card, cards.APPROVE, "UBOSS", "C1")
    await gh_bot.idle()
    assert patches(fake_github) == [{"state": "closed", "labels": ["bug", "p1"]}]
    assert fake_github.labels_of("acme/api", 7) == ["bug", "p1"]
    (proposal,) = await proposals(gh_bot)
    assert proposal.state.value == "succeeded"
    assert proposal.result_summary == "Updated acme/api#7"


async def test_a_target_changed_between_card_and_click_is_stale_and_nothing_is_written(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call("github_update_issue", {"repo": "acme/api", "number": 7, "labels": ["bug"]})
            ]
        ),
        Script(text="Someone changed it."),
    )
    await gh_bot.mention("C1", "drop the ui label", fake_slack)
    await gh_bot.idle()
    (card,) = fake_slack.cards("C1")
    issue = fake_github.repo("acme/api").issues[7]
    issue["labels"] = [{"name": "bug"}, {"name": "ui"}, {"name": "docs"}]  # a teammate, meanwhile
    await gh_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    (proposal,) = await proposals(gh_bot)
    assert proposal.state.value == "failed"
    assert "stale: labels is now 'bug, ui, docs', not 'bug, ui'" in (proposal.error or "")
    assert patches(fake_github) == []


async def test_a_retry_after_the_create_answer_was_lost_finds_the_issue_instead_of_a_second(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    create = {
        "repo": "acme/api",
        "title": "Flaky deploy",
        "body": "It fails 1 in 5.",
        "labels": ["bug"],
        "assignees": ["lee"],
    }
    fake_model.script(
        Script(tool_calls=[call("github_create_issue", create)]), Script(text="Filed.")
    )
    await gh_bot.mention("C1", "file the flaky deploy", fake_slack)
    await gh_bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert card_fields(card)["Assignees"] == "lee"
    assert card_fields(card)["Repository"] == "acme/api"  # the preview's word for `repo`
    fake_github.lose_answer_to = "/repos/acme/api/issues"
    await gh_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    (proposal,) = await proposals(gh_bot)
    assert proposal.state.value == "unknown"  # the answer never came: unknown, so it says so
    shown = card_text(fake_slack.cards("C1")[0])
    assert "Outcome unknown" in shown
    assert "Retry looks for the earlier write first" in shown
    assert tool_results(fake_model)[0]["status"] == "unknown"
    made = [i for i in fake_github.repo("acme/api").issues.values() if i["title"] == "Flaky deploy"]
    assert len(made) == 1
    assert f"<!-- countersign:{proposal.idempotency_key} -->" in made[0]["body"]
    await gh_bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await gh_bot.idle()
    (proposal,) = await proposals(gh_bot)
    assert proposal.state.value == "succeeded"
    assert proposal.result_summary == f"Created acme/api#{made[0]['number']}"
    posts = [w for w in fake_github.writes() if w.path == "/repos/acme/api/issues"]
    assert len(posts) == 1  # the retry found it and did not create a second
    assert posts[0].body["labels"] == ["bug"]
    assert posts[0].body["assignees"] == ["lee"]


async def test_names_outside_the_allow_list_or_the_repository_are_told_to_the_model(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call("github_create_issue", {"repo": "other/secret", "title": "x"}),
                call(
                    "github_update_issue",
                    {"repo": "acme/api", "number": 7, "labels": ["urgent"]},
                    "c2",
                ),
                call("github_get_issue", {"repo": "other/secret", "number": 1}, "c3"),
            ]
        ),
        Script(text="I can't do those."),
    )
    await gh_bot.mention("C1", "do things", fake_slack)
    await gh_bot.idle()
    assert fake_slack.cards("C1") == []
    outside, label, read = tool_results(fake_model)
    assert outside["status"] == "invalid_arguments"
    assert (
        "'other/secret' is not one of the repositories this assistant may use" in (outside["error"])
    )
    assert label["status"] == "invalid_arguments"
    assert "labels: urgent not found in acme/api (its labels: bug, ui, p1, docs)" in label["error"]
    assert read["status"] == "invalid_arguments"
    assert not [r for r in fake_github.requests if "other/secret" in r.path]
    assert fake_github.writes() == []


async def test_merge_shows_the_head_and_method_asks_to_confirm_and_refuses_a_moved_head(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    merge = {"repo": "acme/api", "number": 9, "method": "squash"}
    fake_model.script(
        Script(tool_calls=[call("github_merge_pull_request", merge)]),
        Script(tool_calls=[call("github_merge_pull_request", merge, "c2")]),
        Script(text="Merged."),
    )
    await gh_bot.mention("C1", "merge the SSO fix", fake_slack)
    await gh_bot.idle()
    (card,) = fake_slack.cards("C1")
    shown = card_text(card)
    assert card_fields(card)["Merge method"] == "squash"
    assert card_fields(card)["Head commit"] == "a1b2c3d4e5f6"
    assert "confirm" in shown  # destructive: Approve asks again
    fake_github.repo("acme/api").pulls[9]["head"]["sha"] = "ffff0000ffff0000"  # a new push
    await gh_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    first = (await proposals(gh_bot))[0]
    assert first.state.value == "failed"
    assert "stale: the pull request's head moved to ffff0000ffff" in (first.error or "")
    assert [w for w in fake_github.writes() if w.method == "PUT"] == []

    second_card = fake_slack.cards("C1")[-1]
    assert "ffff0000ffff" in card_text(second_card)
    await gh_bot.click(second_card, cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    (put,) = [w for w in fake_github.writes() if w.method == "PUT"]
    assert put.body == {"sha": "ffff0000ffff0000", "merge_method": "squash"}
    assert fake_github.repo("acme/api").pulls[9]["merged"] is True


async def test_a_short_secondary_limit_is_waited_out_and_a_long_primary_one_fails_at_once(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    fake_github.rate_limited, fake_github.limited_times = ("secondary", 1), 1
    fake_model.script(
        Script(tool_calls=[call("github_get_issue", {"repo": "acme/api", "number": 7})]),
        Script(text="It loops."),
    )
    started = time.monotonic()
    await gh_bot.mention("C1", "what's in acme/api#7?", fake_slack)
    await gh_bot.idle()
    (result,) = tool_results(fake_model)
    assert result["title"] == "Login loops"
    assert time.monotonic() - started >= 1.0  # it honoured Retry-After: 1

    fake_github.rate_limited, fake_github.limited_times = ("primary", 3600), 5
    fake_model.script(
        Script(tool_calls=[call("github_list_labels", {"repo": "acme/api"})]),
        Script(text="GitHub is rate limited."),
    )
    started = time.monotonic()
    await gh_bot.mention("C2", "labels?", fake_slack)
    await gh_bot.idle()
    assert time.monotonic() - started < 10  # an hour is not waited for
    (result,) = tool_results(fake_model)
    assert result["status"] == "error"
    assert "GitHub's rate limit stopped listing the labels of acme/api" in result["error"]
    assert "in about 60 minute(s)" in result["error"]


async def test_reads_return_comments_and_search_stays_inside_the_allow_list(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    fake_github.repo("acme/api").comments[7] = [
        {"body": f"comment {n}", "user": {"login": "lee"}} for n in range(1, 13)
    ]
    fake_github.repo("acme/api").issues[7]["comments"] = 12
    fake_github.add_issue("other/secret", 1, "Login secret plans")
    fake_github.repo("acme/api").checks["a1b2c3d4e5f6a7b8"] = [
        {"name": "ci", "status": "completed", "conclusion": "success"}
    ]
    issue_7 = fake_github.repo("acme/api").issues[7]
    issue_7["body"] = "Loops after SSO.\n\n<!-- countersign:0123456789abcdef0123456789abcdef -->"
    fake_model.script(
        Script(
            tool_calls=[
                call("github_get_issue", {"repo": "acme/api", "number": 7}),
                call("github_search_issues", {"query": "login"}, "c2"),
                call("github_get_checks", {"repo": "acme/api", "number": 9}, "c3"),
                call("github_list_assignees", {"repo": "acme/api"}, "c4"),
            ]
        ),
        Script(text="Here it is."),
    )
    await gh_bot.mention("C1", "tell me about login issues", fake_slack)
    await gh_bot.idle()
    issue, search, checks, assignees = tool_results(fake_model)
    assert checks == {
        "head_sha": "a1b2c3d4e5f6a7b8",
        "checks": [{"name": "ci", "status": "completed", "conclusion": "success"}],
    }
    assert assignees["assignees"] == ["dana", "lee", "countersign-bot"]
    assert [c["body"] for c in issue["recent_comments"]] == [f"comment {n}" for n in range(3, 13)]
    assert issue["labels"] == ["bug", "ui"]
    assert issue["body"] == "Loops after SSO."  # another proposal's marker is never shown
    assert [i["title"] for i in search["items"]] == ["Login loops"]
    query = next(r for r in fake_github.requests if r.path == "/search/issues").query["q"]
    assert "user:acme" in query


async def test_doctor_checks_the_token_with_get_user(fake_github: FakeGitHub) -> None:
    from bot.doctor_integrations import check_github
    from bot.tools.integration_settings import IntegrationSettings

    good = IntegrationSettings(_env_file=None, **github_settings(fake_github))
    (check,) = await check_github(good)
    assert check.ok
    assert check.detail == "authenticated as countersign-bot; repositories: acme/*"
    bad = IntegrationSettings(
        _env_file=None, **github_settings(fake_github, github_token="ghp_wrong_0000")
    )
    (check,) = await check_github(bad)
    assert not check.ok
    assert "GitHub rejected GITHUB_TOKEN (401)" in check.detail
    assert "ghp_wrong" not in check.detail
    assert [r.path for r in fake_github.requests] == ["/user", "/user"]


async def test_a_bot_killed_mid_create_then_retried_makes_one_issue(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """A real process, `kill -9` after GitHub made the issue and before the bot heard back; after
    the restart the card offers Retry, and the retry finds the issue by its marker."""
    bot = CrashBot(fake_slack, fake_model, tmp_path)
    bot.env.update(GITHUB_TOKEN=TOKEN, GITHUB_API_URL=fake_github.api_url, GITHUB_REPOS="acme/*")
    create = {"repo": "acme/api", "title": "Disk full on db-2", "body": "Alerts since 3am."}
    fake_model.script(
        Script(tool_calls=[call("github_create_issue", create)]),
        Script(text="Filed it."),
    )
    try:
        await bot.start()
        await bot.front.mention("C1", "file the disk alert", fake_slack)
        await eventually(lambda: fake_slack.cards("C1"))
        fake_github.hold_create_answer = 30
        await bot.front.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
        await eventually(
            lambda: any(w.path == "/repos/acme/api/issues" for w in fake_github.writes())
        )
        bot.kill()
        fake_github.hold_create_answer = 0
        await bot.start()
        await eventually(lambda: cards.RETRY in json.dumps(fake_slack.cards("C1")[0].blocks))
        await bot.front.click(fake_slack.cards("C1")[0], cards.RETRY, "UALICE", "C1")
        await eventually(
            lambda: "Created acme/api#" in json.dumps(fake_slack.cards("C1")[0].blocks)
        )
    finally:
        await bot.close()
    made = [
        i for i in fake_github.repo("acme/api").issues.values() if i["title"] == create["title"]
    ]
    assert len(made) == 1
    assert len([w for w in fake_github.writes() if w.path == "/repos/acme/api/issues"]) == 1


async def test_a_conversation_waiting_out_a_rate_limit_does_not_hold_up_another(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    fake_github.rate_limited, fake_github.limited_times = ("secondary", 3), 1
    fake_model.script(
        Script(tool_calls=[call("github_list_labels", {"repo": "acme/api"})]),
        Script(text="bug, ui, p1, docs."),
    )
    fake_model.script_for("hello", Script(text="Hello there."))

    def labels() -> int:
        return len([r for r in fake_github.requests if r.path.endswith("/labels")])

    await gh_bot.mention("C1", "which labels does acme/api have?", fake_slack)
    await eventually(lambda: labels() == 1)  # refused: C1 now waits out GitHub's 3 s
    started = time.monotonic()
    await gh_bot.mention("C2", "hello", fake_slack)
    await eventually(lambda: any(m.text == "Hello there." for m in fake_slack.bot_messages("C2")))
    assert labels() == 1  # C2 was answered while C1 still waited (not after it)
    await gh_bot.idle()
    assert labels() == 2
    assert time.monotonic() - started >= 2.5  # C1 did wait (measured from after its refusal)


async def test_two_approvers_clicking_at_once_make_one_write(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    fake_model.script(
        Script(
            tool_calls=[
                call(
                    "github_comment",
                    {"repo": "acme/api", "number": 7, "body": "Deploy is rolled back."},
                )
            ]
        ),
        Script(text="Commented."),
    )
    await gh_bot.mention("C1", "tell them on #7", fake_slack)
    await gh_bot.idle()
    (card,) = fake_slack.cards("C1")
    await asyncio.gather(
        gh_bot.click(card, cards.APPROVE, "UALICE", "C1"),
        gh_bot.click(card, cards.APPROVE, "UBOSS", "C1"),
        gh_bot.click(card, cards.APPROVE, "UALICE", "C1"),
    )
    await gh_bot.idle()
    comments = [w for w in fake_github.writes() if w.path.endswith("/issues/7/comments")]
    assert len(comments) == 1
    assert comments[0].body["body"].startswith("Deploy is rolled back.\n\n<!-- countersign:")


async def test_a_comment_whose_answer_was_lost_is_not_posted_twice_on_retry(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    comment = {"repo": "acme/api", "number": 7, "body": "Fixed in 1.4.2."}
    fake_model.script(Script(tool_calls=[call("github_comment", comment)]), Script(text="Done."))
    await gh_bot.mention("C1", "say it's fixed", fake_slack)
    await gh_bot.idle()
    fake_github.lose_answer_to = "/issues/7/comments"
    await gh_bot.click(fake_slack.cards("C1")[0], cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    (proposal,) = await proposals(gh_bot)
    assert proposal.state.value == "unknown"
    await gh_bot.click_value(proposal.id, cards.RETRY, "UALICE", "C1", fake_slack)
    await gh_bot.idle()
    (proposal,) = await proposals(gh_bot)
    assert proposal.state.value == "succeeded"
    assert len(fake_github.repo("acme/api").comments[7]) == 1


async def test_editing_a_github_card_reads_lists_as_typed_and_checks_them_again(
    gh_bot: RunningBot, fake_slack: FakeSlack, fake_model: FakeOpenAI, fake_github: FakeGitHub
) -> None:
    update = {"repo": "acme/api", "number": 7, "labels": ["bug", "p1"]}
    fake_model.script(Script(tool_calls=[call("github_update_issue", update)]), Script(text="ok"))
    await gh_bot.mention("C1", "label #7 p1", fake_slack)
    await gh_bot.idle()
    await gh_bot.click(fake_slack.cards("C1")[0], cards.EDIT, "UALICE", "C1")
    await gh_bot.idle()
    modal = fake_slack.views[-1]["view"]
    shown = {b["block_id"]: b["element"].get("initial_value") for b in modal["blocks"]}
    assert shown["labels"] == '["bug", "p1"]'
    status, body = await gh_bot.submit_view(
        modal, "UALICE", {"repo": "acme/api", "number": "7", "labels": "bug, wontfix"}
    )
    assert "wontfix not found in acme/api" in body  # checked against the repository again
    status, body = await gh_bot.submit_view(
        modal, "UALICE", {"repo": "acme/api", "number": "7", "labels": "bug, docs"}
    )
    assert status == 200
    await gh_bot.idle()
    card = fake_slack.cards("C1")[0]
    assert card_fields(card)["Labels"] == (
        "~bug, ui~ → bug, docs (means bug, docs (adds docs; removes ui))"
    )
    await gh_bot.click(card, cards.APPROVE, "UALICE", "C1")
    await gh_bot.idle()
    assert patches(fake_github) == [{"labels": ["bug", "docs"]}]
