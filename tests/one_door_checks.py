"""What the one-door test checks after every step (tests/one_door_machine.py drives the steps).

The bot is left to settle, then:
- every task row that appeared or changed is a write that ran in that step: the reference must
  allow it at that moment, for exactly the arguments it holds (the card's current revision);
- every message the bot sent Slack must be readable by everyone who sees it where it went;
- the writes the reference says must happen (an allow rule; a sole valid approver's click
  under a policy and membership that did not move) happened, so a bot that never writes fails.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from bot.spend.standing import nano_of
from tests.one_door_bot import OneDoorBot, Snapshot
from tests.one_door_continues import adopt
from tests.one_door_findings import Figures, Finding, kind_of, violation_class
from tests.one_door_policy import RAISE, Policy
from tests.one_door_raises import BASE_NANO, raised_nano
from tests.one_door_reference import Call, Grant, Reference
from tests.one_door_world import EXEC, EXEC_MARK, FULL_MEMBERS, PEOPLE, PUBLIC, dm_mark, dm_of

RAN = ("executing", "succeeded", "failed", "unknown")  # a raise that started to run


class Observer:
    """The reference's state beside the bot's, the sequence's story, and the checks."""

    def __init__(self, bot: OneDoorBot, figures: Figures, fails: Callable[[Finding], bool]) -> None:
        self.bot, self.figures, self.fails = bot, figures, fails
        self.ref = Reference(Policy("ask", ()))
        self.story: list[str] = []
        self.steps = 0
        self.before = Snapshot({}, {}, {})  # the bot's tables after the last step
        self.down = False  # the board is down (writes to it fail)
        self.toggled = False  # membership moved: the bot's caches may lag (liveness)
        self.moved_at = 0  # the last step the policy or membership changed
        self.born: dict[str, int] = {}  # call -> the step it was asked in
        self.tasks: dict[int, str] = {}  # task id -> the call that created it
        self.read_exec: set[str | None] = set()  # threads whose turns read #exec
        # Threads whose history holds a tool result: the bot counts it for every later call
        # there (the reference, looser, only for the call whose turn read it).
        self.read_outside: set[str | None] = set()
        self.expect: list[tuple[str, str]] = []  # (call, why) that must write this step
        self.pending_grants: list[tuple[Call, str, str, int]] = []  # made in this step
        self.findings: list[Finding] = []  # found by a step itself (a raise asked)
        self.planned: dict[str, Call] = {}  # writes turns will ask for (one_door_continues)
        figures.sequences += 1

    # -- the story ------------------------------------------------------------------------
    def say(self, line: str) -> None:
        """A step, as the counterexample tells it."""
        self.steps += 1
        self.figures.steps += 1
        self.story.append(f"{self.steps}. {line}")

    def note(self, line: str) -> None:
        """What the bot did in the step, and what the reference says of it."""
        self.story.append(f"   {line}")

    # -- checks ---------------------------------------------------------------------------
    def liveness_for_click(self, call: Call, user: str, state: Any) -> None:
        """A write must follow this click: the first valid approval of a quorum of one,
        under a policy and membership unchanged since the call was asked for."""
        decided = self.ref.decision(call)
        rule_ = decided.rule
        if (
            state != "proposed"
            or self.down
            or call.tool != "create_task"
            or call.audience != frozenset({PUBLIC})
            or call.thread in self.read_exec  # its prompt held #exec's text: narrower
            or call.thread in self.read_outside  # it followed a tool result
            or call.revision != 1
            or decided.outcome != "ask"
            or decided.fail_closed
            or rule_ is None
            or rule_.approvals_required != 1
            or self.moved_at > self.born.get(call.key, 0)
            or self.toggled
            or user not in FULL_MEMBERS
        ):
            return
        by_id = user in rule_.approvers and not (rule_.four_eyes and user == call.requester)
        alone = not rule_.approvers and not rule_.four_eyes and user == call.requester
        if by_id or alone:
            self.expect.append((call.key, f"{user} is a valid approver and the quorum is 1"))

    def check(self) -> None:
        snapshot = self.bot.run(self.bot.snapshot())
        found: list[Finding] = adopt(self, snapshot)  # before the writes: they may have run
        wrote: set[str] = set()
        for task_id, row in sorted(snapshot.tasks.items()):
            old = self.before.tasks.get(task_id)
            if old == row:
                continue
            call = self.ref.calls.get(key_of(row.get("title")) or "")
            if call is None:
                found.append(Finding("an unexplained write", f"task {task_id}: {row}"))
                continue
            if old is None:
                self.tasks[task_id] = call.key
            wrote.add(call.key)
            found.extend(self.judge(call, row, old, snapshot))
        found.extend(self.raises_ran(snapshot, wrote))
        found.extend(self.findings)
        self.findings.clear()
        for source, scope, user, grant_id in self.pending_grants:
            made = self.ref.grant_made(source, scope, user)
            under = f"under rule {made.rule}" if made.rule else "from a card of no ask rule"
            self.note(f"the bot made grant {grant_id} ({scope} by {user}), {under}")
        self.pending_grants.clear()
        for key, why in self.expect:
            self.figures.liveness_expected += 1
            if key in wrote:
                self.figures.liveness_met += 1
            else:
                found.append(Finding("a write that must run did not", f"{key} did not run ({why})"))
        self.expect.clear()
        found.extend(self.leaks())
        self.before = snapshot
        if not found:
            return
        story = "\n".join(self.story)
        found = [Finding(f.kind, f.detail, story) for f in found]
        for finding in found:
            self.figures.add(finding)
        failing = [f for f in found if self.fails(f)]
        if failing:
            first = failing[0]
            raise violation_class(first.kind)(
                f"{first.kind}\n{first.detail}\nThe sequence:\n{story}"
            )

    def raises_ran(self, snapshot: Snapshot, wrote: set[str]) -> list[Finding]:
        """Every raise that started to run in this step must be allowed by the reference now;
        the budget is raised to the highest limit a raise that ran showed, never past it (a
        raise applied twice would)."""
        found = []
        done = [BASE_NANO]  # the limits of raises that succeeded
        tried = [BASE_NANO]  # and of those that ran at all (a failure may have applied)
        for proposal_id, row in sorted(snapshot.proposals.items()):
            if row["tool_name"] != RAISE:
                continue
            target = nano_of(Decimal(str(row["arguments"]["usd"])))
            if row["state"] in RAN:
                tried.append(target)
            if row["state"] == "succeeded":
                done.append(target)
            was = self.before.proposals.get(proposal_id, {}).get("state")
            if row["state"] not in RAN or was in RAN:
                continue
            call = next((c for c in self.ref.calls.values() if c.proposal_id == proposal_id), None)
            if call is None:
                found.append(Finding("an unexplained raise", f"proposal {proposal_id}: {row}"))
                continue
            wrote.add(call.key)
            self.figures.writes_judged += 1
            judged = self.ref.judge(call)
            self.note(
                f"the bot ran raise {call.key} (decided by {row['decided_by']}); the reference "
                f"{'allows' if judged.allowed else 'does NOT allow'} it now: "
                f"{judged.decision.describe()}, approvals {sorted(call.votes)}"
            )
            if not judged.allowed:
                why = "; ".join(judged.why)
                found.append(
                    Finding("a raise ran that the door does not allow", f"{call.key}: {why}")
                )
        least, most = max(done) - BASE_NANO, max(tried) - BASE_NANO
        raised = self.bot.run(raised_nano(self.bot))
        if not least <= raised <= most:
            found.append(
                Finding(
                    "a raise applied twice or not to the limit its card showed",
                    f"raised by {raised} nano-dollars; the raises that ran say "
                    f"{least} (succeeded) to {most}",
                )
            )
        return found

    def judge(
        self, call: Call, row: dict[str, Any], old: dict[str, Any] | None, snap: Snapshot
    ) -> list[Finding]:
        self.figures.writes_judged += 1
        judged = self.ref.judge(call)
        decided_by = snap.proposals.get(call.proposal_id or -1, {}).get("decided_by")
        grant = self.grant_named(decided_by, snap)
        self.note(
            f"the bot wrote {call.key} ({'created' if old is None else 'updated'} task "
            f"{row['id']}, decided by {decided_by}); the reference "
            f"{'allows' if judged.allowed else 'does NOT allow'} it now: "
            f"{judged.decision.describe()}, approvals {sorted(call.votes)}"
        )
        found = []
        if not judged.allowed:
            found.append(
                Finding(
                    kind_of(judged, decided_by, grant, call),
                    f"{call.key} ran; the reference: " + "; ".join(judged.why),
                )
            )
        differ = self.ref.fields_differ(call, row, old)
        if differ:
            found.append(
                Finding("a write with other arguments than its card", f"{call.key}: {differ}")
            )
        return found

    def grant_named(self, decided_by: str | None, snap: Snapshot) -> Grant | None:
        """The reference's record of the grant a `grant:N` decider names."""
        if not decided_by or not decided_by.startswith("grant:"):
            return None
        row = snap.grants.get(int(decided_by.removeprefix("grant:")))
        if row is None:
            return None
        source = next(
            (c.key for c in self.ref.calls.values() if c.proposal_id == row["proposal_id"]),
            None,
        )
        return next(
            (
                g
                for g in self.ref.grants
                if (g.granter, g.scope, g.from_call) == (row["granted_by"], row["scope"], source)
            ),
            None,
        )

    def leaks(self) -> list[Finding]:
        world = self.ref.world
        found = []
        for message in self.bot.new_messages():
            self.figures.messages_checked += 1
            sources = {EXEC} if EXEC_MARK in message.body else set()
            sources |= {dm_of(p) for p in PEOPLE if dm_mark(p) in message.body}
            if not sources:
                continue
            readers = world.readers(frozenset(sources))
            if message.places is not None:
                shown = set().union(*(world.viewers(p) for p in message.places))
                where = f"{message.method} in {', '.join(sorted(message.places))}"
            else:
                shown = set(message.viewers or set())
                where = f"{message.method} to {', '.join(sorted(shown))}"
            strangers = shown - readers
            if strangers:
                source = "#exec" if EXEC in sources else "a DM"
                found.append(
                    Finding(
                        f"text from {source} sent by {message.method} to "
                        f"{_destination(message.places)}",
                        f"{where} shows {source}'s text to {sorted(strangers)}: "
                        f"{message.body[:300]}",
                    )
                )
        return found


def key_of(title: Any) -> str | None:
    return str(title).split(" ")[0] if title else None


def shown(args: dict[str, Any]) -> str:
    return str({k: v for k, v in args.items() if v not in (None, "")})


def _destination(places: set[str] | None) -> str:
    if places is None:
        return "someone who may not read it"
    if any(p.startswith("D") for p in places):
        return "the DM of someone who may not read it"
    if any(p.startswith("C") for p in places):
        return "a public channel"
    return "a channel some of whose members may not read it"
