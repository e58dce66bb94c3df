"""Policy and grants benchmark (issue 20).

    uv run python -m bench.policy                       # SQLite and PostgreSQL
    uv run python -m bench.policy --no-postgres --rounds 300 --replay 10000

Part 1, what the policy file and the grants add to a proposal. The real proposal path
(`conversation.tool_round.tool_round`: validate the call, the gate's counts and decision, the
grant look-up, the proposal, the decision record, the card hand-off) runs one `create_task` call
per round in a fresh thread, against one database, in three interleaved configurations:

- `no policy`: no policy file (the bot's gate with no rules: default ask, no grants offered);
- `200 rules (10 on it), 1000 grants`: RULES rules (RELEVANT of them name `create_task`, with
  a condition that does not hold, the rest other tools) ending in an `ask` rule that offers
  grants, with GRANTS grants in the database (a fifth of them for this requester and tool in
  other threads), so the call is asked for with a grant look-up that finds nothing: a card, as
  without policy;
- `200 rules (all on it)`: the same with every rule naming `create_task` (the worst case).

Then the second configuration with a grant that covers the call: approved by the grant at once.
Percentiles are of the round's wall time; "added" is the difference of the percentiles. Then
the policy's own steps alone (`PolicyGate.decide_round` and `grant_for`), interleaved likewise.

Part 2, `countersign policy replay --since 7d --policy new.yaml` over a recorded week:
REPLAY decisions (asks, allows, denials; proposals approved, declined, succeeded) written with the
project's models; `replay.compare` (what the CLI calls) is timed in process, then the real CLI
(`python -m bot`, a process of its own) twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, cast

import yaml
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import insert

from bot.approvals import grants
from bot.approvals.policy import GroupMembers, Policies
from bot.approvals.questions import turn_key
from bot.approvals.ruling import Question, Step
from bot.approvals.service import ApprovalsService
from bot.conversation.private_reply import TurnAudience
from bot.conversation.tool_round import ActionDesk, Once, tool_round
from bot.conversation.turn_settings import TurnSettings
from bot.db import repositories as repo
from bot.db.migrate import upgrade_to_head
from bot.db.models import Grant, PolicyDecision, Proposal, ProposalState, utcnow
from bot.db.session import Database
from bot.llm import Finished, ToolCall
from bot.membership import Reach
from bot.policy.deciders import rule_hash
from bot.policy.gate import counts
from bot.policy.one_door import OneDoor
from bot.policy.replay import compare
from bot.policy.source import PolicySource, read_file
from bot.slack.card_publisher import CardPublisher
from bot.slack.streamer import ReplyStream
from bot.tools.catalog import ToolRegistry
from bot.tools.registry import Preview, ToolContext
from tests.pg import temporary_database

TEAM, REQUESTER, CHANNEL = "TBENCH", "UREQ", "CBENCH"
ARGS = {"title": "Renew the TLS certificate", "priority": "normal"}
GROUPS = {f"S{n:04d}": frozenset({f"U{n:03d}"}) for n in range(20)}  # UREQ is in none


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def policy_text(rules: int, relevant: int) -> str:
    """RULES rules, RELEVANT of them naming create_task with a condition that does not hold
    for ARGS (comparisons, membership, patterns, groups, counts), then the ask rule."""
    made: list[dict[str, Any]] = []
    conditions = [
        'args.priority == "p{i}"',
        'args.title.startsWith("never-{i}")',
        'args.title.matches("^ticket-{i}-[0-9]+$")',
        '"S{g:04d}" in groups && calls_today > 3',
        "calls_in_thread > {i} + 100",
        'args.priority in ["urgent-{i}", "x-{i}"] || channel == "CNOPE{i}"',
    ]
    step = max(1, (rules - 1) // max(1, relevant)) if relevant < rules else 1
    for i in range(rules - 1):
        names_it = len([r for r in made if r["tools"] == ["create_task"]]) < relevant - 1 and (
            i % step == 0
        )
        rule: dict[str, Any] = {
            "name": f"rule-{i:03d}",
            "tools": ["create_task"] if names_it else [f"tool_{i % 37}", f"pack_{i % 11}_*"],
            "when": conditions[i % len(conditions)].format(i=i, g=i % 20),
            "outcome": ("allow", "deny", "ask")[i % 3],
        }
        if rule["outcome"] == "deny":
            rule["reason"] = f"reason {i}"
        if rule["outcome"] == "ask":
            rule["approvers"] = [f"U{i:03d}"]
        made.append(rule)
    made.append(
        {
            "name": "tasks-ask",
            "tools": ["create_task"],
            "outcome": "ask",
            "grants": ["once", "thread", "channel", "me"],
            "grant_expiry": "8h",
        }
    )
    return yaml.safe_dump({"version": 1, "default": "ask", "rules": made}, sort_keys=False)


class FixedGroups(GroupMembers):
    """Members of the referenced user groups, as `GroupMembers` holds them between its
    reads of Slack (five minutes): no Slack call in the timed path."""

    def __init__(self) -> None:
        super().__init__(AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/"))

    async def members(self, group_id: str, max_age: float | None = None) -> frozenset[str]:
        return GROUPS.get(group_id, frozenset())


class FixedReach(Reach):
    """Everyone reads the bench's channels, as `Reach` holds it between its reads of Slack."""

    def __init__(self) -> None:
        super().__init__(AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/"))

    async def may_read(
        self, user: str, audience: str | None, where: str | None = None, fresh: bool = False
    ) -> bool:
        return True


class NullStream:
    """What `tool_round` asks of the reply stream, without Slack."""

    def __init__(self) -> None:
        self.message_ts: list[str] = []

    def task(self, *args: Any) -> None:
        return None

    def set_status(self, text: str) -> None:
        return None


class NullCards:
    """Cards handed over and dropped: Slack is not part of the decision."""

    async def post(self, proposal: Proposal) -> bool:
        return True

    async def note_granted(self, proposal: Proposal, grant: Grant) -> None:
        return None

    async def note_allowed(self, proposal: Proposal) -> None:
        return None


@dataclass
class Setup:
    db: Database
    registry: ToolRegistry
    approvals: ApprovalsService
    settings: TurnSettings
    definition: str


def desk(setup: Setup, source: PolicySource | None) -> ActionDesk:
    door = None if source is None else OneDoor(source, FixedGroups(), FixedReach(), setup.db)
    return ActionDesk(
        setup.registry,
        Policies(),
        setup.approvals,
        cast(CardPublisher, NullCards()),
        door,
    )


async def one_round(setup: Setup, the_desk: ActionDesk, thread: str, channel: str) -> float:
    """One model round with one create_task call in a new thread: seconds in tool_round."""
    async with setup.db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(
            session, TEAM, channel, thread, REQUESTER
        )
    unused = AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/")
    finished = Finished("tool_calls", [ToolCall("call_1", "create_task", json.dumps(ARGS))], None)
    started = time.perf_counter()
    made = await tool_round(
        the_desk,
        setup.db,
        setup.settings,
        conversation,
        cast(ReplyStream, NullStream()),
        finished,
        "",
        Once(None),
        lambda: ToolContext(setup.db, unused, TEAM, channel, REQUESTER),
        REQUESTER,
        TurnAudience(place=channel),
    )
    took = time.perf_counter() - started
    assert made == 1
    return took


async def thread_round(setup: Setup, the_desk: ActionDesk, index: int, n: int) -> float:
    return await one_round(setup, the_desk, f"{n}.{index}", CHANNEL)


async def add_grants(setup: Setup, count: int) -> None:
    """COUNT live, expired and revoked grants; a fifth for REQUESTER's create_task in other
    threads of CHANNEL (the look-up must pass them over), none covering the timed calls."""
    now = utcnow()
    rows = []
    for n in range(count):
        mine = n % 5 == 0
        scope = ("thread", "channel", "me")[n % 3] if not mine else "thread"
        rows.append(
            {
                "team_id": TEAM,
                "tool_name": "create_task" if mine or n % 2 else f"tool_{n % 37}",
                "definition": setup.definition if mine or n % 4 else "sha256:old",
                "requester": REQUESTER if mine else f"U{n % 200:03d}",
                "scope": scope,
                "channel_id": (CHANNEL if mine else f"C{n % 50:03d}") if scope != "me" else None,
                "thread_ts": f"old-{n}.0" if scope == "thread" else None,
                "granted_by": f"U{(n + 1) % 200:03d}",
                "rule": "tasks-ask",
                "expires_at": now + timedelta(hours=8) if n % 7 else now - timedelta(hours=1),
                "revoked_at": now if n % 13 == 0 else None,
                "created_at": now,
            }
        )
    if rows:
        async with setup.db.transaction() as session:
            await session.execute(insert(Grant), rows)


@dataclass
class Figures:
    label: str
    seconds: list[float]

    def ms(self, q: float) -> float:
        return 1000 * pct(self.seconds, q)


def show(rows: list[Figures], base: Figures) -> None:
    print(f"  {'configuration':34s} {'p50':>8s} {'p95':>8s} {'p99':>8s}   added p50/p95/p99")
    for row in rows:
        added = (
            ""
            if row is base
            else "   " + " / ".join(f"{row.ms(q) - base.ms(q):+.2f}" for q in (0.5, 0.95, 0.99))
        )
        print(
            f"  {row.label:34s} {row.ms(0.5):8.2f} {row.ms(0.95):8.2f} {row.ms(0.99):8.2f}{added}"
        )


async def latency(url: str, label: str, args: argparse.Namespace, folder: Path) -> None:
    db = Database.from_url(url)
    try:
        await upgrade_to_head(db)
        registry = ToolRegistry.from_packs(["bot.tools.packs.tasks"])
        create = registry.get("create_task")
        assert create is not None
        setup = Setup(
            db,
            registry,
            ApprovalsService(db),
            TurnSettings(system_prompt="", history_window=50, max_chars=3000, min_edit_interval=1),
            grants.definition_of(create, None),
        )
        await add_grants(setup, args.grants)
        sources: dict[str, PolicySource | None] = {"no policy": None}
        for name, relevant in (
            (f"{args.rules} rules ({args.relevant} on it), {args.grants} grants", args.relevant),
            (f"{args.rules} rules (all on it), {args.grants} grants", args.rules),
        ):
            path = folder / f"policy-{relevant}.yaml"
            path.write_text(policy_text(args.rules, relevant), encoding="utf-8")
            source = PolicySource(path)
            source.load()
            sources[name] = source
        desks = {
            name: desk(setup, source if source is not None else PolicySource(None))
            for name, source in sources.items()
        }
        rounds = {
            name: partial(thread_round, setup, the_desk, index)
            for index, (name, the_desk) in enumerate(desks.items())
        }
        rows = await interleaved(rounds, args.warmup, args.rounds)
        # A grant covering the call: approved by it (its note and the run are not timed).
        covered = list(desks.values())[1]
        assert covered.door is not None
        asking = next(r for r in covered.door.source.current.policy.rules if r.name == "tasks-ask")
        async with db.transaction() as session:
            session.add(
                Grant(
                    team_id=TEAM,
                    tool_name="create_task",
                    definition=setup.definition,
                    requester=REQUESTER,
                    scope="channel",
                    channel_id="CGRANTED",
                    granted_by="UBOSS",
                    rule="tasks-ask",
                    rule_hash=rule_hash(asking),
                )
            )
        hits = [
            await one_round(setup, covered, f"g{n}.0", "CGRANTED")
            for n in range(args.warmup + args.rounds)
        ][args.warmup :]
        rows.append(Figures(f"{list(desks)[1]}: a grant covers it", hits))
        print(
            f"\n== {label}: one create_task proposal per round, {args.rounds} rounds each "
            f"(+{args.warmup} warm-up), ms in tool_round"
        )
        show(rows, rows[0])
        each = {name: await policy_step(setup, the_desk) for name, the_desk in desks.items()}
        steps = await interleaved(each, args.warmup, args.rounds)
        print("  the policy's own steps alone (the gate's counts and decision, the grant look-up):")
        show(steps, steps[0])
    finally:
        await db.dispose()


async def policy_step(setup: Setup, the_desk: ActionDesk) -> Callable[[int], Awaitable[float]]:
    """What `tool_round` does for the policy, to be timed alone: the counts, the turn and the
    one door's decision (definition hash, rules, grant look-up); seconds a call."""
    door, create = the_desk.door, setup.registry.get("create_task")
    assert door is not None
    assert create is not None
    async with setup.db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(
            session, TEAM, CHANNEL, "steps.0", REQUESTER
        )
    arguments = create.arguments.model_validate(ARGS).model_dump(mode="json")
    preview = Preview("Create task")

    async def step(_round: int) -> float:
        started = time.perf_counter()
        async with setup.db.reading() as session:
            in_thread, today = await counts(session, "create_task", CHANNEL, "steps.0", REQUESTER)
            turn = await turn_key(session, conversation.id)
        question = Question(
            TEAM, "create_task", create.pack, arguments, CHANNEL, "steps.0", REQUESTER,
            f"C:{CHANNEL}", definition=grants.definition_of(create, preview.pin), turn=turn,
            counts=(in_thread, today),
        )  # fmt: skip
        await door(question, Step.PROPOSE)
        return time.perf_counter() - started

    return step


async def interleaved(
    steps: Mapping[str, Callable[[int], Awaitable[float]]], warmup: int, rounds: int
) -> list[Figures]:
    """Each configuration's step (given the round) once a round, in turn: the machine's load
    drifts alike for all of them (timed one configuration after another, the policy's steps
    differed by the drift as much as by the policy)."""
    timed: dict[str, list[float]] = {name: [] for name in steps}
    for n in range(warmup + rounds):
        for name, step in steps.items():
            took = await step(n)
            if n >= warmup:
                timed[name].append(took)
    return [Figures(name, seconds) for name, seconds in timed.items()]


# ---- part 2: the replay of a recorded week --------------------------------------------------

NEW_POLICY = """\
version: 2
default: ask
rules:
  - name: low-priority-tasks
    tools: [create_task]
    when: 'args.priority == "low"'
    outcome: allow
  - name: no-urgent-from-bots
    tools: [create_task]
    channels: [CBOTS]
    when: 'args.priority == "urgent"'
    outcome: deny
    reason: urgent work is not filed from the bots channel
  - name: small-updates
    tools: [update_task]
    when: 'calls_today < 5 && !("status" in args)'
    outcome: allow
  - name: leads-close
    tools: [close_task]
    groups: [S0LEADS]
    outcome: allow
  - name: titles-with-tickets
    tools: [create_task]
    when: 'args.title.matches("^OPS-[0-9]+")'
    outcome: allow
  - name: everything-else
    tools: ["*"]
    outcome: ask
    grants: [once, thread, channel]
"""

TOOLS = ("create_task", "update_task", "close_task", "comment_on_task")
PRIORITIES = ("low", "normal", "high", "urgent")


async def record_week(url: str, count: int) -> None:
    """COUNT decisions over the last 7 days under an older policy, each ask or allow with its
    proposal (approved by a person, declined, succeeded, expired, approved by a rule)."""
    db = Database.from_url(url)
    rng = random.Random(20)
    now = utcnow()
    try:
        await upgrade_to_head(db)
        async with db.transaction() as session:
            for n in range(count):
                tool = TOOLS[n % len(TOOLS)]
                channel = "CBOTS" if n % 7 == 0 else f"C{n % 40:03d}"
                args: dict[str, Any] = {"title": f"OPS-{n} fix" if n % 9 == 0 else f"task {n}"}
                if tool == "create_task":
                    args["priority"] = PRIORITIES[(n // 4) % 4]
                elif tool == "update_task":
                    args |= {"task_id": n} | ({"status": "done"} if n % 3 == 0 else {})
                when = now - timedelta(seconds=rng.uniform(0, 7 * 86400 - 600))
                outcome = "deny" if n % 17 == 0 else ("allow" if n % 5 == 0 else "ask")
                proposal_id = None
                if outcome != "deny":
                    state = (
                        ProposalState.SUCCEEDED
                        if outcome == "allow" or n % 4 == 1
                        else (ProposalState.DECLINED, ProposalState.EXPIRED, ProposalState.FAILED)[
                            n % 3
                        ]
                    )
                    proposal = Proposal(
                        team_id=TEAM,
                        tool_call_id=f"call_{n}",
                        tool_name=tool,
                        arguments=args,
                        arguments_hash=f"{n:064d}",
                        description=f"{tool} {n}",
                        preview=[],
                        requester=f"U{n % 60:03d}",
                        idempotency_key=f"week-{n}",
                        state=state,
                        expires_at=when + timedelta(minutes=15),
                        channel_id=channel,
                        thread_ts=f"{n // 3}.0",
                        decided_by="policy:rule" if outcome == "allow" else f"U{n % 7:03d}",
                        created_at=when,
                        updated_at=when,
                    )
                    session.add(proposal)
                    await session.flush()
                    proposal_id = proposal.id
                session.add(
                    PolicyDecision(
                        team_id=TEAM,
                        channel_id=channel,
                        thread_ts=f"{n // 3}.0",
                        requester=f"U{n % 60:03d}",
                        tool_name=tool,
                        pack="tasks",
                        arguments=args,
                        groups=["S0LEADS"] if n % 6 == 0 else [],
                        calls_in_thread=n % 3,
                        calls_today=n % 8,
                        outcome=outcome,
                        rule={"deny": "old-deny", "allow": "old-allow", "ask": "old-ask"}[outcome],
                        policy_version="1@recorded",
                        reason="old reason" if outcome == "deny" else None,
                        proposal_id=proposal_id,
                        created_at=when,
                    )
                )
                if n % 1000 == 999:
                    await session.flush()
    finally:
        await db.dispose()


def replay_cli(url: str, folder: Path) -> tuple[float, str]:
    """`countersign policy replay --since 7d --policy new.yaml`, as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_"))}
    env |= {"SLACK_BOT_TOKEN": "xoxb-1", "OPENAI_API_KEY": "sk-x", "SLACK_SIGNING_SECRET": "s"}
    env["DATABASE_URL"] = url
    # As an installed package runs: its imports compiled once and kept (this machine's
    # environment sets PYTHONDONTWRITEBYTECODE, which would compile them at every start).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bot", "policy", "replay", "--since", "7d", "--policy", "new.yaml"],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"replay exited {done.returncode}: {done.stderr[-2000:]}")
    return took, done.stdout


async def replay(url: str, label: str, count: int, folder: Path, cli: bool = True) -> None:
    started = time.perf_counter()
    await record_week(url, count)
    recorded = time.perf_counter() - started
    path = folder / "new.yaml"
    path.write_text(NEW_POLICY, encoding="utf-8")
    print(f"\n== {label}: policy replay of a recorded week ({count:,} decisions)")
    print(f"  recorded through the models in                 {recorded:7.2f} s")
    # In process: what the CLI calls once the file is read (reading rows and deciding them).
    policy, version = read_file(path)
    db = Database.from_url(url)
    try:
        started = time.perf_counter()
        found = await compare(db, policy, version, utcnow() - timedelta(days=7))
        took = time.perf_counter() - started
    finally:
        await db.dispose()
    print(f"  replay.compare in process                      {took:7.2f} s")
    print(
        f"    {found.decisions} decisions: {found.asks_removed} asks removed, "
        f"{len(found.approvals_denied)} approvals denied, "
        f"{len(found.denials_allowed)} denials allowed"
    )
    if cli:
        first, _ = await asyncio.to_thread(replay_cli, url, folder)
        took, out = await asyncio.to_thread(replay_cli, url, folder)
        print("  `countersign policy replay --since 7d --policy new.yaml`, whole process:")
        print(f"    run 1 (compiles the imports if not cached)  {first:7.2f} s")
        print(f"    run 2                                       {took:7.2f} s")
        for line in out.splitlines():
            if not line.startswith("  "):  # the figures, not the lists of rows
                print(f"    | {line}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rules", type=int, default=200)
    parser.add_argument("--relevant", type=int, default=10, help="rules that name the tool")
    parser.add_argument("--grants", type=int, default=1000)
    parser.add_argument("--replay", type=int, default=10_000, help="recorded decisions")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        await latency(f"sqlite:///{folder / 'latency.db'}", "SQLite", args, folder)
        await replay(f"sqlite:///{folder / 'replay.db'}", "SQLite", args.replay, folder)
        if not args.no_postgres:
            async with temporary_database("cs_bench") as url:
                await latency(url, "PostgreSQL", args, folder)
            async with temporary_database("cs_bench") as url:
                await replay(url, "PostgreSQL", args.replay, folder)


if __name__ == "__main__":
    asyncio.run(main())
