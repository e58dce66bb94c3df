"""Prometheus metrics: what an operator watches to see the promises hold.

Served at `GET /metrics` in HTTP mode, and on `METRICS_PORT` in Socket Mode. Metric objects live
on prometheus-client's default registry, the way the library is meant to be used; they hold
counts only, never message text, ids of people or secrets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

LIVE_REPLIES = Gauge("countersign_live_replies", "Replies being written in Slack right now")
TURNS = Counter(
    "countersign_turns_total",
    "Turns by how they ended",
    # answered | paused | budget (paused at a budget's limit) | failed | interrupted
    # | rounds_exhausted | length | deadline
    ["outcome"],
)
SLACK_EDITS = Counter(
    "countersign_slack_edits_total",
    "chat.update calls made",
    ["kind"],  # reply | card
)
SLACK_RATELIMITED = Counter(
    "countersign_slack_ratelimited_total", "429 answers from Slack", ["method"]
)
SLACK_CALLS_SKIPPED = Counter(
    "countersign_slack_calls_skipped_total",
    "Slack calls not made because their method's budget was spent (cosmetic or optional calls,"
    " or a wait longer than the caller's patience)",
    ["method"],
)
SLACK_LEARNED_RATE = Gauge(
    "countersign_slack_learned_rate_per_minute",
    "Calls a minute the bot allows itself per Slack method, as learned from Slack's answers",
    ["method"],
)
MODEL_FIRST_TOKEN = Histogram(
    "countersign_model_first_token_seconds",
    "Time from a model request to its first streamed event",
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
)
MODEL_ERRORS = Counter("countersign_model_errors_total", "Model requests that failed")
PROPOSALS = Gauge(
    "countersign_proposals", "Proposals by state (refreshed by the sweeper)", ["state"]
)
TRANSITIONS = Counter(
    "countersign_proposal_transitions_total", "State machine transitions", ["event"]
)
DECISIONS = Counter(
    "countersign_decisions_total",
    "Clicks and submissions on cards by result",
    ["action", "result"],  # result: accepted | refused | stale | already_handled | bad_input
)
EXECUTIONS = Counter(
    "countersign_executions_total",
    "Executions by outcome",
    ["outcome"],  # succeeded | failed
)
POLICY_DECISIONS = Counter(
    "countersign_policy_decisions_total",
    "Write calls decided by the policy file, by outcome (shadow: a shadow rule matched)",
    ["outcome"],  # allow | deny | ask | shadow
)
TOOL_READS = Counter(
    "countersign_tool_reads_total",
    "Read tool calls run at once, by pack",
    ["pack", "outcome"],  # outcome: ok | error | invalid_arguments
)
TOOLS_WITHHELD = Gauge(
    "countersign_tools_withheld",
    "Tools left out of model requests now, by pack and why (schema_too_large, over_budget, "
    "too_many)",
    ["pack", "reason"],
)
MCP_SERVER_UP = Gauge(
    "countersign_mcp_server_up", "1 while an MCP server answers, 0 while it is down", ["server"]
)
LEASE_TAKEOVERS = Counter(
    "countersign_lease_takeovers_total",
    "Work taken over after its holder's lease lapsed",
    ["kind"],  # execution | resume | reply
)
LEASE_LOST = Counter(
    "countersign_lease_lost_total", "Outcomes not recorded because the lease was lost", ["kind"]
)
RESUMES = Counter(
    "countersign_resumes_total",
    "Paused turns resumed",
    ["outcome"],  # done | failed
)
AUDIT_CHECKPOINT_REFUSED = Counter(
    "countersign_audit_checkpoint_refused_total",
    "Audit checkpoints not signed, one per workspace and attempt, because the chain's rows "
    "since the previous checkpoint did not verify (tampering, or a writer without the key)",
)
# Spend (bot/spend): by the kind of budget scope (workspace | channel | user | group | pack |
# per_turn). A call counts once in each budget that applies, so the kinds do not add up.
SPEND_USD = Counter(
    "countersign_spend_usd_total", "Model spend charged to budgets, in USD", ["scope"]
)
SPEND_TOKENS = Counter(
    "countersign_spend_tokens_total", "Model tokens charged to budgets", ["scope"]
)
SPEND_RESERVATIONS = Counter(
    "countersign_spend_reservations_total",
    "Model calls' holds on budgets by event; held minus settled minus released is in flight",
    ["scope", "event"],  # held | settled | released
)
SPEND_REFUSALS = Counter(
    "countersign_spend_refusals_total",
    "Model calls not started because a budget had no room, by the refusing budget's scope",
    ["scope"],
)
SLACK_ACK = Histogram(
    "countersign_slack_ack_seconds",
    "From a signed Slack request arriving to its answer being ready (HTTP mode); Slack gives 3 s",
    ["kind"],  # event | interaction | command
    buckets=(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2, 3, 5),
)
LOOP_LAG = Histogram(
    "countersign_event_loop_lag_seconds",
    "How late the event loop ran a timer (sampled every 0.25 s): the process is saturated "
    "when this grows",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)


async def sample_loop_lag(on_tick: Callable[[float], None], period: float = 0.25) -> None:
    """Run forever: observe how much later than asked each sleep of `period` wakes up, and tell
    `on_tick` when the loop last ran (the HTTP front door's sign of life)."""
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(period)
        LOOP_LAG.observe(max(0.0, time.perf_counter() - asked - period))
        on_tick(time.monotonic())


def exposition() -> tuple[bytes, str]:
    """The current metrics in Prometheus' text format, with its content type."""
    return generate_latest(), CONTENT_TYPE_LATEST
