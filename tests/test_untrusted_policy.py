"""The policy after untrusted input, as pure functions (issue 27 part 2): the facts
`untrusted` and `sources` in conditions; `after_untrusted` (default: an allow does not stand
after outside input, a member's message is covered); asks on reads; open-world reads after
any untrusted input; what is recorded for replay; an Edit or a Retry keeps what the call
followed; `policy check` reports every rule or field that cannot take effect."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_types import Tool as McpTool
from mcp_types import ToolAnnotations

from bot.approvals.questions import context_of, question_of, recorded_context
from bot.approvals.ruling import Ruling
from bot.db.models import Proposal
from bot.policy import cli
from bot.policy.engine import Decision, Facts, decide
from bot.policy.lint import warnings
from bot.policy.model import PolicyError, load_text
from bot.policy.untrusted import with_context
from bot.provenance import Source
from bot.tools.mcp.tools import is_open_world

POLICY = load_text("""\
version: 1
default: ask
rules:
  - name: low-runs
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
  - name: normal-runs-anyway
    tools: [create_task]
    when: 'args.priority == "normal"'
    outcome: allow
    after_untrusted: allow
  - name: high-asks-after-anything
    tools: [create_task]
    when: 'args.priority == "high"'
    outcome: allow
    after_untrusted: ask
  - name: never-after-untrusted
    tools: [post_message]
    outcome: allow
    after_untrusted: deny
  - name: files-go-to-security
    tools: [update_task]
    when: 'sources.exists(s, s.kind == "file" && s.name.endsWith(".pdf"))'
    outcome: ask
    approvers: [USEC]
  - name: tasks
    tools: [create_task, update_task]
    outcome: ask
    grants: [thread]
  - name: wiki-reads-asked
    tools: [wiki__*]
    when: 'args.page == "secret"'
    outcome: ask
  - name: every-write-asks-leads
    outcome: ask
    approvers: [ULEAD]
""")

TOOL = Source("tool", "github_get_issue: acme/api#12")
MEMBER = Source("member", "message", "UBOB")
GUEST = Source("guest", "message", "UGUEST")
FILE = Source("file", "report.pdf", "UBOB")
ME = Source("requester", "message", "UALICE")


def decided(
    tool: str, args: dict[str, str], *sources: Source, read: bool = False, world: bool = False
) -> Decision:
    pack = tool.split("__")[0] if "__" in tool else "tasks"
    facts = Facts(tool, pack, args, "C1", "UALICE", read_only=read, open_world=world)
    return decide(POLICY, "1@x", with_context(facts, sources))


def test_an_allow_becomes_an_ask_after_outside_input_but_not_after_a_member() -> None:
    low = {"priority": "low"}
    assert decided("create_task", low).outcome == "allow"
    assert decided("create_task", low, ME).outcome == "allow"  # the requester's own words
    assert decided("create_task", low, MEMBER).outcome == "allow"
    for outside in (TOOL, GUEST, FILE, Source("external", "message", "UEXT")):
        made = decided("create_task", low, MEMBER, outside)
        assert (made.outcome, made.rule, made.ask) == ("ask", "low-runs", None)
        kept = made.record()
        assert kept["after_untrusted"] == "ask"
        assert "proposed after" in kept["untrusted"]
        assert "teammate" not in kept["untrusted"]  # the outside input is what counted
    assert "report.pdf" in (decided("create_task", low, FILE).untrusted_why or "")


def test_after_untrusted_set_on_a_rule_applies_after_any_untrusted_input() -> None:
    assert decided("create_task", {"priority": "normal"}, TOOL, GUEST).outcome == "allow"
    high = decided("create_task", {"priority": "high"}, MEMBER)
    assert (high.outcome, high.after_untrusted) == ("ask", "ask")
    assert decided("create_task", {"priority": "high"}).outcome == "allow"
    denied = decided("post_message", {}, MEMBER)
    assert denied.outcome == "deny"
    assert denied.reason is not None
    assert "followed untrusted input" in denied.reason
    assert "followed untrusted input" in denied.for_model()["reason"]
    assert decided("post_message", {}).outcome == "allow"


def test_an_ask_after_outside_input_keeps_its_approvers_and_offers_no_grant_cover() -> None:
    plain = decided("create_task", {"priority": "urgent"})
    assert plain.rule == "tasks"
    assert "after_untrusted" not in plain.record()
    after = decided("create_task", {"priority": "urgent"}, TOOL)
    assert (after.rule, after.after_untrusted) == ("tasks", "ask")
    assert after.record()["grants"] == ["thread"]  # offered on the card, never covering
    assert decided("create_task", {"priority": "urgent"}, MEMBER).after_untrusted is None


def test_untrusted_and_sources_are_facts_conditions_read() -> None:
    facts = with_context(Facts("update_task", "tasks", {}, "C1", "UALICE"), [ME, MEMBER, FILE])
    cel = facts.as_cel()
    assert cel["untrusted"] is True
    assert cel["sources"] == [
        {"kind": "member", "name": "message", "author": "UBOB"},
        {"kind": "file", "name": "report.pdf", "author": "UBOB"},
    ]
    routed = decided("update_task", {}, FILE)
    assert (routed.rule, routed.record()["approvers"]) == ("files-go-to-security", ["USEC"])
    assert decided("update_task", {}, TOOL).rule == "tasks"
    assert with_context(facts, [ME]).as_cel()["untrusted"] is False


def test_reads_run_unless_a_rule_naming_them_asks_or_they_are_open_world_after_input() -> None:
    secret = {"page": "secret"}
    assert decided("list_tasks", {}, TOOL, read=True).outcome == "allow"  # `*` is about writes
    assert decided("wiki__page", {"page": "home"}, read=True, world=False).outcome == "allow"
    assert decided("wiki__page", secret, read=True).outcome == "ask"
    # Open-world: at once in a clean turn, an ask after any untrusted input, a member's too.
    assert decided("web__fetch", {}, read=True, world=True).outcome == "allow"
    assert decided("web__fetch", {}, ME, read=True, world=True).outcome == "allow"
    for source in (MEMBER, TOOL):
        made = decided("web__fetch", {}, source, read=True, world=True)
        assert (made.outcome, made.rule, made.after_untrusted) == ("ask", None, "ask")
        assert "open-world read" in (made.untrusted_why or "")
    # A closed read after the same input runs.
    assert decided("web__lookup", {}, TOOL, read=True, world=False).outcome == "allow"


def test_mcp_tools_are_open_world_unless_they_say_otherwise() -> None:
    def tool(hints: ToolAnnotations | None) -> McpTool:
        return McpTool(name="t", input_schema={"type": "object"}, annotations=hints)

    assert is_open_world(tool(None))
    assert is_open_world(tool(ToolAnnotations(read_only_hint=True)))
    assert is_open_world(tool(ToolAnnotations(open_world_hint=True)))
    assert not is_open_world(tool(ToolAnnotations(open_world_hint=False)))


def test_what_a_call_followed_is_recorded_kept_by_edits_and_retries_and_replayed() -> None:
    proposal = Proposal(
        id=7, team_id="T1", tool_name="create_task", arguments={"priority": "low"},
        channel_id="C1", thread_ts="1.0", requester="UALICE", audience="C:C1", revision=1,
        provenance=[MEMBER.as_json(), TOOL.as_json(), "list_tasks {}"],
        policy={"counts": [0, 0]},
    )  # fmt: skip
    asked = question_of(proposal, "tasks")
    edited = question_of(proposal, "tasks", arguments={"priority": "low", "title": "x"})
    assert asked.sources == edited.sources  # an Edit (and a Retry, the same question) keeps it
    assert edited.untrusted
    assert [s.kind for s in edited.sources] == ["member", "tool", "tool"]
    ruling = Ruling("ask", "1@x", "low-runs", record={"read": True, "groups": ["S1"]})
    groups, context = recorded_context(["S1", *context_of(asked, ruling)])
    assert groups == ("S1",)
    assert context["read"] is True
    assert [s["kind"] for s in context["sources"]] == ["member", "tool", "tool"]
    assert recorded_context(["S1"]) == (("S1",), {})


LINTED = """\
version: 1
rules:
  - name: deny-bots
    tools: [create_task]
    channels: [CBOTS]
    outcome: deny
    after_untrusted: allow
  - name: allow-with-ask-fields
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
    approvals_required: 2
    grants: [thread]
    route: dm
  - name: same-again
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: ask
  - name: bots-again
    tools: [create_task]
    channels: [CBOTS]
    requesters: [UALICE]
    outcome: ask
  - name: grants-untouched
    tools: [create_task]
    outcome: ask
    after_untrusted: allow
  - name: typo
    tools: [creat_task, github_create_issue, wiki__fetch]
    outcome: ask
"""


def test_policy_check_reports_every_rule_or_field_that_cannot_take_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = [("create_task", "tasks")]
    found = "\n".join(warnings(load_text(LINTED), {}, known, cli.not_loaded_here))
    for expected in (
        "rule 'deny-bots': after_untrusted does nothing on deny",
        "rule 'allow-with-ask-fields': approvals_required only matters on ask, not on allow",
        "rule 'allow-with-ask-fields': grants only matters on ask",
        "rule 'allow-with-ask-fields': route only matters on ask",
        "rule 'same-again' is never reached: an earlier rule ('allow-with-ask-fields')",
        "rule 'bots-again' is never reached: an earlier rule ('deny-bots')",
        "rule 'grants-untouched': after_untrusted: allow on an ask without grants",
        "rule 'typo': 'creat_task' matches no known tool or pack",
    ):
        assert expected in found, expected
    assert "github_create_issue" not in found  # not known here: not reported
    # A tool list that is not known: names are not checked.
    assert "matches no known tool" not in "\n".join(warnings(load_text(LINTED)))
    path = tmp_path / "policy.yaml"
    path.write_text(LINTED)
    assert cli.check(path, strict=False) == 0
    assert cli.check(path, strict=True) == 1
    assert "after_untrusted does nothing on deny" in capsys.readouterr().out
    with pytest.raises(PolicyError, match="after_untrusted"):
        load_text(LINTED.replace("after_untrusted: allow", "after_untrusted: sometimes", 1))
