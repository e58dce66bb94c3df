"""Review of issue 27: the sources a proposal keeps are cut to a few, and the cut must never
lose outside input (a file, a guest's message, a tool result) for teammates' messages, or an
allow rule or a grant covers a call proposed after it (design promises 8, 9)."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation.private_reply import TurnAudience
from bot.conversation.sources import (
    PROPOSAL_SOURCES_KEPT,
    SUMMARY_SOURCES_KEPT,
    kept,
    proposal_sources,
    summarised,
)
from bot.policy.engine import Facts
from bot.policy.untrusted import with_context
from bot.provenance import Source

FILE = Source("file", "invoice.pdf", "UEVE", "https://acme.slack.com/files/UEVE/F1/invoice.pdf")
MEMBERS = [Source("member", "message", f"UMEMBER{i}") for i in range(40)]


def test_a_file_before_many_teammates_messages_still_counts_for_the_policy() -> None:
    followed = proposal_sources([FILE, *MEMBERS[:PROPOSAL_SOURCES_KEPT]])
    assert FILE in followed
    assert len(followed) == PROPOSAL_SOURCES_KEPT
    facts = with_context(Facts("send_message", "slack", {}, "C1", "UALICE"), followed)
    assert facts.outside  # no allow or grant covers it by default
    # the newest teammates are kept beside it, in the order read
    assert followed[-1] == MEMBERS[PROPOSAL_SOURCES_KEPT - 1]
    assert followed[0] == FILE


def test_the_cut_keeps_the_newest_and_every_outside_source_it_has_room_for() -> None:
    tools = [Source("tool", f"github_get_issue: acme/api#{i}") for i in range(3)]
    sources = [tools[0], *MEMBERS[:5], tools[1], *MEMBERS[5:10], tools[2]]
    left = kept(sources, 6)
    assert [s for s in left if s.outside] == tools
    assert left[-1] == tools[2]
    assert [s for s in left if not s.outside] == MEMBERS[7:10]
    assert kept(sources[:4], 6) == sources[:4]


def test_a_summary_keeps_a_file_it_folded_in_before_many_teammates() -> None:
    class Message:
        def __init__(self, source: Source, user: str) -> None:
            self.role, self.source, self.slack_user = "user", source.dumps(), user

    older = [Message(FILE, "UEVE"), *(Message(m, m.author or "") for m in MEMBERS)]
    found = summarised([], older)
    assert len(found) == SUMMARY_SOURCES_KEPT
    assert FILE in found


async def test_a_later_round_of_the_turn_keeps_what_an_earlier_prompt_held() -> None:
    """Round 1 read a file; by round 2 it left the window (no summary could be made): what
    round 2 proposes still followed it."""
    seen = TurnAudience("C:C1")
    slack = AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/")
    await seen.prompt_held(slack, "C:C1", [FILE])
    await seen.prompt_held(slack, "C:C1", [MEMBERS[0]])
    assert FILE in proposal_sources(seen.sources)
    assert seen.sources[-1] == MEMBERS[0]
    assert not seen.private
