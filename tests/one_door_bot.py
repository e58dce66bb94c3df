"""The real bot for the one-door model-based test (tests/test_one_door_model.py, bench/one_door.py):
one bot on SQLite with the fake Slack and a fake model, reused across many short sequences,
driven only through its front door (signed events, clicks, modal submissions), and watched
from outside: the tasks table for writes, the grants table for grants made, the proposals table
for the ids a card's buttons carry, and every call Slack received for what was posted where.

Test-only levers, none of them inside `bot/`: the policy file rewritten and read again at once
(`PolicySource.refresh`, what the 2 s poll does); the escalation clock moved by shifting the
proposals' `created_at` back, then one sweep; a board outage as a SQLite trigger refusing
writes to `tasks`; a restart (stop, start on the same database); and between sequences the
tables emptied and the membership caches forgotten, as a fresh process would have them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bot.db.models import Base
from bot.membership import reach_of
from bot.slack import cards
from tests.fakes.openai import Script
from tests.fakes.slack import BOT_USER_ID, TEAM_ID, FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.one_door_fakes import ScriptedModel, SentMessage, read_exec, sent_messages, write_call
from tests.one_door_world import (
    APPROVERS_CHANNEL,
    EXEC,
    EXEC_MARK,
    GROUP,
    GUESTS,
    PEOPLE,
    PUBLIC,
    World,
    dm_of,
)

# Tasks that live as long as the bot (or sleep until its next poll): not work to wait for.
DAEMONS = frozenset(
    {
        "PolicySource.watch",
        "sample_loop_lag",
        "serve_http",
        "WaiterQueue._dispatch",
        # Holds its leases for a while after the last call (bot/spend/flusher.py); what it
        # has to write, `settle` writes (Spend.flush) before it calls the bot quiet.
        "Flusher._run",
        "LiveReplies._renew",
        "WorkspaceBudgets._learn",
    }
)
SECRET = f"{EXEC_MARK}: layoffs on friday"
BUTTONS = {
    "approve": cards.APPROVE,
    "thread": cards.APPROVE_GRANT["thread"],
    "channel": cards.APPROVE_GRANT["channel"],
    "me": cards.APPROVE_GRANT["me"],
    "retry": cards.RETRY,
    "edit": cards.EDIT,
}
OUTAGE = [
    "CREATE TABLE IF NOT EXISTS one_door_outage (down INTEGER)",
    "CREATE TRIGGER IF NOT EXISTS one_door_no_insert BEFORE INSERT ON tasks "
    "WHEN EXISTS (SELECT 1 FROM one_door_outage) BEGIN SELECT RAISE(ABORT, 'board down'); END",
    "CREATE TRIGGER IF NOT EXISTS one_door_no_update BEFORE UPDATE ON tasks "
    "WHEN EXISTS (SELECT 1 FROM one_door_outage) BEGIN SELECT RAISE(ABORT, 'board down'); END",
]


@dataclass
class Snapshot:
    """What the bot's tables hold, read from outside."""

    tasks: dict[int, dict[str, Any]]
    grants: dict[int, dict[str, Any]]
    proposals: dict[int, dict[str, Any]]


@dataclass
class OneDoorBot:
    """The bot, its fakes and the levers; `run` drives it from synchronous code."""

    root: Path
    loop: asyncio.AbstractEventLoop
    slack: FakeSlack
    model: ScriptedModel
    policy_path: Path
    running: RunningBot | None = None
    seen_calls: int = 0
    triggers: dict[str, str] = field(default_factory=dict)  # trigger id -> who clicked
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    restarts: int = 0
    steps: int = 0

    # -- life ---------------------------------------------------------------------------------
    @classmethod
    def open(cls, policy_text: str) -> OneDoorBot:
        root = Path(tempfile.mkdtemp(prefix="one-door-"))
        loop = asyncio.new_event_loop()
        slack = FakeSlack(limits={}).start()  # the budgets are not what is tested here
        model = ScriptedModel().start()
        path = root / "policy.yaml"
        path.write_text(policy_text)
        made = cls(root, loop, slack, model, path)  # type: ignore[arg-type]
        made.run(made._start())
        made.run(made._outage_triggers())
        return made

    def settings(self) -> Any:
        return make_settings(
            self.slack,
            self.model,
            f"sqlite:///{self.root / 'countersign.db'}",
            policy_file=self.policy_path,
            sweep_interval_seconds=300,
            slack_edit_budget_per_minute=600,
            slack_call_budget_scale=100,  # the fake limits nothing here
            proposal_reminder_minutes=0,
        )

    async def _start(self) -> None:
        self.running = await start_bot(self.settings())
        # Sweeps run when a step says so (`tick`), never in the middle of another step: the
        # same sequence must do the same whenever it runs (hypothesis replays it to shrink).
        await self.running.countersign.sweeper.stop()
        await self.settle()

    @property
    def bot(self) -> RunningBot:
        assert self.running is not None
        return self.running

    def close(self) -> None:
        if self.running is not None:
            self.run(stop_bot(self.running))
            self.running = None
        self.slack.stop()
        self.model.stop()
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def settle(self, timeout: float = 30.0) -> None:
        """Wait until no work of the bot is left in this loop (turns, clicks, executions,
        card edits, resumes), seen quiet twice in a row."""
        me = asyncio.current_task()
        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 2:
            await asyncio.sleep(0.002)
            busy = [
                t
                for t in asyncio.all_tasks()
                if t is not me and getattr(t.get_coro(), "__qualname__", "?") not in DAEMONS
            ]
            quiet = 0 if busy else quiet + 1
            if quiet == 1:
                await self._flush_spend()
            if time.monotonic() > deadline:
                names = sorted(getattr(t.get_coro(), "__qualname__", "?") for t in busy)
                raise AssertionError(f"the bot did not settle: {names}")

    async def _flush_spend(self) -> None:
        """The ledger's writes behind (settles of calls taken from leases), written now."""
        spend = self.running.countersign.conversations.spending.spend if self.running else None
        if spend is not None:
            await spend.flush()

    # -- between sequences --------------------------------------------------------------------
    async def reset(self, world: World, policy_text: str) -> None:
        """An empty database, Slack as `world` says, no cached membership, `policy_text` in
        force: as a fresh deployment would be, without the cost of starting one."""
        await self.settle()
        async with self.bot.countersign.db.transaction() as session:
            for table in reversed(Base.metadata.sorted_tables):
                await session.execute(table.delete())
            await session.execute(text("DELETE FROM one_door_outage"))
        slack = self.slack
        for store in (slack.channels, slack.history, slack.timeline):
            store.clear()
        for found in (slack.ephemerals, slack.responses, slack.published, slack.views):
            found.clear()
        slack.calls.clear()
        self.seen_calls = 0
        self.triggers.clear()
        self.model.plans.clear()
        self.model.follow_ups.clear()
        self.model.requests.clear()
        self.model.played.clear()
        slack.users.clear()
        for guest in GUESTS:
            slack.users[guest] = {"is_restricted": True}
        slack.channel_info.clear()
        slack.channel_info[EXEC] = {"id": EXEC, "name": "exec", "is_private": True}
        for channel in (PUBLIC, APPROVERS_CHANNEL):
            slack.channel_info[channel] = {"id": channel, "name": channel.lower()}
        for person in PEOPLE:
            dm = dm_of(person)
            slack.channel_info[dm] = {"id": dm, "is_im": True, "user": person}
        self.apply(world)
        slack.add_user_message(EXEC, SECRET)
        self._forget_caches()
        await self.reload(policy_text)

    def _forget_caches(self) -> None:
        """What a fresh process would not know: who was in which channel and group, and how
        much of the workspace's edit budget the last sequences spent (the suite runs some 20
        sequences a second; the budget would pace every one after the first minute)."""
        countersign = self.bot.countersign
        reach_of(countersign.slack).forget()
        groups = getattr(countersign.sweeper.cards, "groups", None)
        cache = getattr(groups, "_cache", None)
        if isinstance(cache, dict):
            cache.clear()
        budgets = countersign.budgets
        for budget in (budgets.edits, budgets.appends) if budgets is not None else ():
            calls = getattr(budget.window, "_calls", None)
            if calls is not None:
                calls.clear()
            budget.pace.tokens = budget.pace.burst

    def apply(self, world: World) -> None:
        """The fake Slack's channels and user group as `world` has them."""
        slack = self.slack
        slack.members.clear()
        for channel, people in world.members.items():
            slack.members[channel] = [*sorted(people), BOT_USER_ID]
        for person in PEOPLE:
            slack.members[dm_of(person)] = [person, BOT_USER_ID]
        slack.user_groups.clear()
        for group, people in world.groups.items():
            slack.user_groups[group] = sorted(people)
        assert GROUP in slack.user_groups

    # -- levers -------------------------------------------------------------------------------
    async def reload(self, policy_text: str) -> None:
        self.policy_path.write_text(policy_text)
        source = self.bot.countersign.policy
        assert source is not None
        source.refresh()
        await self.settle()

    async def tick(self, hours: int = 1) -> None:
        """The escalation clock moves `hours` for every waiting proposal; one sweep runs."""
        async with self.bot.countersign.db.transaction() as session:
            rows = (await session.execute(text("SELECT id, created_at FROM proposals"))).all()
            for proposal_id, created in rows:
                moved = _shift(created, hours)
                await session.execute(
                    text("UPDATE proposals SET created_at = :at WHERE id = :id"),
                    {"at": moved, "id": proposal_id},
                )
        await self.bot.countersign.sweeper.sweep()
        await self.settle()

    async def restart(self) -> None:
        await self.settle()
        await stop_bot(self.bot)
        await self._start()
        self.restarts += 1

    async def outage(self, down: bool) -> None:
        async with self.bot.countersign.db.transaction() as session:
            await session.execute(text("DELETE FROM one_door_outage"))
            if down:
                await session.execute(text("INSERT INTO one_door_outage VALUES (1)"))

    async def _outage_triggers(self) -> None:
        async with self.bot.countersign.db.transaction() as session:
            for statement in OUTAGE:
                await session.execute(text(statement))

    # -- the front door -----------------------------------------------------------------------
    async def ask(
        self,
        key: str,
        requester: str,
        channel: str,
        thread: str | None,
        tool: str,
        args: dict[str, Any],
        read_exec_first: bool,
        words: str,
        read_first: str | None = None,
    ) -> str:
        """The requester asks the bot in `channel` (a new thread, `thread`, or their DM) for
        one write; the model makes it (after reading #exec, or `read_first`'s channel, if
        asked to). Returns the ts of
        the message that asked."""
        write = Script(tool_calls=[write_call(key, tool, args)], argument_fragment_size=4096)
        if read_exec_first or read_first:
            read = read_exec(key, read_first) if read_first else read_exec(key)
            self.model.plan(key, Script(tool_calls=[read]), write)
        else:
            self.model.plan(key, write)
        said = f"job:{key} {words}"
        if channel.startswith("D"):
            ts = await self.bot.say(self.slack, channel, said, user=requester)
        else:
            ts = await self.bot.mention(channel, said, self.slack, user=requester, thread_ts=thread)
        await self.settle()
        return ts

    async def ask_only(
        self, key: str, requester: str, channel: str, thread: str | None, words: str
    ) -> str:
        """The requester says `job:KEY words` to the bot (KEY's plan, already made, answers);
        the ts of their message."""
        said = f"job:{key} {words}"
        ts = await self.bot.mention(channel, said, self.slack, user=requester, thread_ts=thread)
        await self.settle()
        return ts

    def card_values(self, proposal_id: int) -> dict[int, tuple[str, str]]:
        """revision -> (button value, channel) of the cards Slack shows for the proposal."""
        found: dict[int, tuple[str, str]] = {}
        prefix = f"{proposal_id}:"
        for channel, messages in list(self.slack.channels.items()):
            for message in list(messages):
                for block in message.blocks or []:
                    for element in block.get("elements", []) if isinstance(block, dict) else []:
                        value = element.get("value") if isinstance(element, dict) else None
                        if isinstance(value, str) and value.startswith(prefix):
                            pieces = value.split(":")
                            if len(pieces) >= 2 and pieces[1].isdigit() and len(pieces) <= 3:
                                found.setdefault(int(pieces[1]), (value, f"{channel}|{message.ts}"))
        return found

    async def click(
        self, proposal_id: int, revision: int, button: str, user: str, fallback_channel: str
    ) -> None:
        """`user` clicks `button` on the proposal's card showing `revision` (the value a
        card of that revision carries; crafted if Slack shows none, as a hostile user may)."""
        shown = self.card_values(proposal_id).get(revision)
        if shown is None:
            value, channel, ts = f"{proposal_id}:{revision}", fallback_channel, "1.0"
        else:
            value, where = shown
            channel, ts = where.split("|")
        trigger = f"trigger-{user}-{next(self._ids)}"
        self.triggers[trigger] = user
        await self.bot._interact(
            {
                "type": "block_actions",
                "user": {"id": user, "team_id": TEAM_ID},
                "trigger_id": trigger,
                "container": {"type": "message", "message_ts": ts, "channel_id": channel},
                "channel": {"id": channel},
                "message": {"ts": ts, "text": ""},
                "response_url": "http://127.0.0.1:9/response",
                "actions": [
                    {
                        "type": "button",
                        "action_id": BUTTONS[button],
                        "block_id": "b",
                        "value": value,
                        "action_ts": "1.0",
                    }
                ],
            }
        )
        await self.settle()

    async def edit(
        self,
        proposal_id: int,
        revision: int,
        user: str,
        changes: dict[str, str],
        fallback_channel: str,
    ) -> bool:
        """`user` clicks Edit and submits the modal with `changes` typed over the shown
        values; False if no modal opened."""
        before = len(self.slack.views)
        await self.click(proposal_id, revision, "edit", user, fallback_channel)
        opened = self.slack.views[before:]
        if not opened:
            return False
        view = opened[-1]["view"]
        inputs = {b["block_id"] for b in view.get("blocks", []) if b.get("type") == "input"}
        # The other inputs send what they show, as in Slack (the harness fills them in).
        values = {k: v for k, v in changes.items() if k in inputs}
        await self.bot.submit_view(view, user, values)
        await self.settle()
        return True

    # -- what the bot did ---------------------------------------------------------------------
    async def snapshot(self) -> Snapshot:
        async with self.bot.countersign.db.transaction() as session:
            tasks = (
                await session.execute(
                    text(
                        "SELECT id, title, description, assignee, due_date, priority, status, "
                        "updated_at FROM tasks"
                    )
                )
            ).mappings()
            task_rows = {int(r["id"]): dict(r) for r in tasks}
            grants = (
                await session.execute(
                    text(
                        "SELECT id, scope, requester, granted_by, rule, proposal_id, tool_name, "
                        "channel_id, thread_ts FROM grants"
                    )
                )
            ).mappings()
            grant_rows = {int(r["id"]): dict(r) for r in grants}
            proposals = (
                await session.execute(
                    text(
                        "SELECT id, tool_name, arguments, revision, revised_by, state, "
                        "decided_by, channel_id, thread_ts, requester FROM proposals"
                    )
                )
            ).mappings()
            proposal_rows = {}
            for r in proposals:
                row = dict(r)
                if isinstance(row["arguments"], str):
                    row["arguments"] = json.loads(row["arguments"])
                proposal_rows[int(r["id"])] = row
        return Snapshot(task_rows, grant_rows, proposal_rows)

    def new_messages(self) -> list[SentMessage]:
        """What the bot sent Slack since the last look, with where it is shown."""
        calls = self.slack.calls[self.seen_calls :]
        self.seen_calls += len(calls)
        return sent_messages(calls, self.triggers)


def _shift(created: Any, hours: int) -> str:
    """A stored time (SQLite's text), `hours` earlier, in the same form."""
    moved = datetime.fromisoformat(str(created)) - timedelta(hours=hours)
    return moved.strftime("%Y-%m-%d %H:%M:%S.%f")
