"""The one-door model-based test: hypothesis' stateful testing drives the real bot
(`tests/one_door_bot.py`) and the reference model (`tests/one_door_reference.py`) side by side
over random sequences (`tests/one_door_steps.py`) of policy reloads, proposals, edits, grants
of each scope, clicks by anyone, user-group and membership changes, escalation ticks, retries
after an outage, and restarts.

After every step, the checks of tests/one_door_checks.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from tests.one_door_bot import SECRET, OneDoorBot
from tests.one_door_checks import Observer, key_of, shown
from tests.one_door_continues import continue_cheaper
from tests.one_door_findings import Figures, Finding
from tests.one_door_policy import RAISE, decide_raise, may_ask_raise
from tests.one_door_raises import ask_raise
from tests.one_door_reference import Call, Reference
from tests.one_door_steps import (
    INITIAL,
    Approve,
    ApproveInOutage,
    ApproveRaise,
    Ask,
    AskRaise,
    Click,
    Continue,
    Edit,
    Propose,
    Reload,
    Restart,
    Retry,
    Tick,
    Toggle,
    amend,
    amended,
    asks,
    raise_asks,
    resolve,
    steps,
)
from tests.one_door_world import (
    APPROVERS_CHANNEL,
    EXEC,
    EXEC_MARK,
    GROUP,
    PUBLIC,
    dm_mark,
    dm_of,
)


def one_door_machine(
    bot: OneDoorBot,
    figures: Figures,
    fails: Callable[[Finding], bool] = lambda _f: True,
    restarts: bool = True,
    raises: bool = False,
) -> type[RuleBasedStateMachine]:
    """A state machine class for `run_state_machine_as_test`, on one running bot. `fails`:
    which findings fail the run (all are counted in `figures`)."""

    class OneDoor(Observer, RuleBasedStateMachine):
        def __init__(self) -> None:
            RuleBasedStateMachine.__init__(self)
            Observer.__init__(self, bot, figures, fails)
            self.numbers = 0  # calls asked for
            self.version = 1  # of the policy file
            self.restarted = False
            self.threads: dict[str, list[str]] = {}  # channel -> its threads' ts, oldest first

        @initialize(
            changes=st.lists(st.sampled_from(INITIAL), max_size=2),
            ask=asks,
            first_raise=raise_asks if raises else st.none(),
        )
        def start(self, changes: list[str], ask: Ask, first_raise: AskRaise | None = None) -> None:
            """The base policy amended by `changes` in force, an empty bot, a first request
            (and with `raises`, a first raise asked)."""
            policy = amended(changes)
            self.ref = Reference(policy)
            self.note(f"policy in force: {policy.describe()}")
            bot.run(bot.reset(self.ref.world, policy.text(self.version)))
            self.before = bot.run(bot.snapshot())
            bot.new_messages()
            self.propose(ask)
            if first_raise is not None:
                figures.operations["AskRaise"] += 1
                self.ask_raise(first_raise)
            self.check()

        @rule(step=steps(restarts, raises))
        def step(self, step: Any) -> None:
            figures.operations[type(step).__name__] += 1
            if isinstance(step, Propose):
                self.propose(step.ask)
            elif isinstance(step, Approve):
                call = self.carded(step.back, waiting=True)
                if call is None:
                    self.follow_up()
                else:
                    self.click(call, resolve(step.who, call, self.ref), step.button, False)
            elif isinstance(step, Click):
                call = self.carded(step.back)
                if call is not None:
                    self.click(call, step.user, step.button, step.stale)
            elif isinstance(step, ApproveInOutage):
                self.in_outage(step)
            elif isinstance(step, Edit):
                self.edit(step)
            elif isinstance(step, Retry):
                self.retry(step)
            elif isinstance(step, Reload):
                self.reload(step.change)
            elif isinstance(step, Toggle):
                self.toggle(step.user, step.where)
            elif isinstance(step, Tick):
                for call in self.ref.calls.values():
                    call.age_hours += 1
                self.say("an hour passes; the sweeper runs")
                bot.run(bot.tick())
            elif isinstance(step, AskRaise):
                self.ask_raise(step)
            elif isinstance(step, ApproveRaise):
                self.approve_raise(step)
            elif isinstance(step, Continue):
                continue_cheaper(self, step)
            elif isinstance(step, Restart):
                if self.restarted:
                    self.say("(the bot restarted once already in this sequence)")
                    return
                self.restarted = True
                self.say("the bot restarts")
                bot.run(bot.restart())
            self.check()

        # -- steps ----------------------------------------------------------------------------
        def carded(self, back: int, waiting: bool = False) -> Call | None:
            """The `back`-th latest call with a card (wrapping), of those still waiting for a
            decision if there are any; None before any card (or, `waiting`, with none)."""
            with_cards = [c for c in self.ref.calls.values() if c.proposal_id is not None]
            pending = [
                c
                for c in with_cards
                if self.before.proposals.get(c.proposal_id or -1, {}).get("state") == "proposed"
            ]
            if pending or waiting:
                with_cards = pending
            if not with_cards:
                if not waiting:
                    self.say("(no card to click yet)")
                return None
            return with_cards[-1 - back % len(with_cards)]

        def follow_up(self) -> None:
            """Nothing waits for an approval: the last requester asks for one more task where
            they asked last (the same thread), as people do once a card is settled."""
            last = list(self.ref.calls.values())[-1]
            place = "DM" if last.is_dm else EXEC if last.channel == EXEC else PUBLIC
            threads = self.threads.get(last.channel, [])
            thread = threads.index(last.thread) if last.thread in threads else None
            self.note("(nothing waits for an approval: the last requester asks again)")
            self.propose(Ask(requester=last.requester, place=place, thread=thread))

        def propose(self, ask: Ask) -> None:
            self.numbers += 1
            ref = self.ref
            requester, place = ask.requester, ask.place
            if place in (EXEC, "C1+exec") and requester not in ref.world.members[EXEC]:
                place = PUBLIC  # only #exec's members speak there or read it
            tool = ask.tool if self.tasks else "create_task"
            key = f"{'p' if tool == 'create_task' else 'u'}{self.numbers}"
            dm = place == "DM"
            channel = dm_of(requester) if dm else EXEC if place == EXEC else PUBLIC
            marks = {EXEC: f" {EXEC_MARK}", "DM": f" {dm_mark(requester)}"}.get(place, "")
            title = f"{key}{marks}"
            earlier = self.threads.get(channel, [])
            thread = None
            if ask.thread is not None and earlier and not dm:
                thread = earlier[ask.thread % len(earlier)]
            sent: dict[str, Any] = {"title": title}
            if tool == "create_task":
                if place == "C1+exec":
                    sent["description"] = SECRET
                args: dict[str, Any] = {
                    "title": title,
                    "description": sent.get("description", ""),
                    "assignee": ask.assignee,
                    "due_date": None,
                    "priority": ask.priority or "normal",
                }
            else:
                task = sorted(self.tasks)[ask.target % len(self.tasks)]
                sent["task_id"] = task
                args = {
                    "task_id": task,
                    "title": title,
                    "description": None,
                    "assignee": ask.assignee,
                    "due_date": None,
                    "priority": ask.priority,
                    "status": None,
                }
            if ask.priority:
                sent["priority"] = ask.priority
            if ask.assignee:
                sent["assignee"] = ask.assignee
            reads = place == "C1+exec"
            audience = frozenset({channel, EXEC} if reads else {channel})
            read_public = place == "C1+read"  # a tool result from a public channel
            if read_public:
                audience = frozenset({channel, APPROVERS_CHANNEL})
            words = f"please{marks}"
            member = place == "C1+member" and thread is not None
            if member:  # another full member wrote in the thread before the requester asks
                other = "UCAROL" if requester != "UCAROL" else "UBOB"
                bot.slack.add_user_message(channel, "ship it today", user=other, thread_ts=thread)
            ts = bot.run(
                bot.ask(
                    key, requester, channel, thread, tool, sent, reads, words,
                    APPROVERS_CHANNEL if read_public else None,
                )
            )  # fmt: skip
            if not dm and thread is None:
                self.threads.setdefault(channel, []).append(ts)
            call = Call(
                key, tool, requester, channel, None if dm else thread or ts, ts, audience, args,
                outside=reads or read_public, member=member,
            )  # fmt: skip
            ref.calls[key] = call
            self.born[key] = self.steps
            if reads:
                self.read_exec.add(call.thread)
            if reads or read_public:
                self.read_outside.add(call.thread)
            snapshot = bot.run(bot.snapshot())
            for proposal_id, row in snapshot.proposals.items():
                if key_of(row["arguments"].get("title")) == key and row["tool_name"] == tool:
                    call.proposal_id = proposal_id
                    call.args = dict(row["arguments"])
            ref.card_made(call)
            decided = ref.decision(call)
            where = "their DM" if dm else f"{channel} ({thread or 'a new thread'})"
            after = {
                "C1+exec": " after reading #exec",
                "C1+read": f" after reading {APPROVERS_CHANNEL} (a tool result)",
                "C1+member": " after a member's message",
            }
            self.say(
                f"{requester} asks in {where} for {tool} {shown(args)}"
                f"{after.get(place, '') if reads or read_public or member else ''}: the "
                "reference says "
                f"{decided.describe()}; the bot made proposal {call.proposal_id}"
            )
            allowed = decided.outcome == "allow" and not decided.fail_closed
            # An allow must run, also after a member's message (covered as before) unless
            # its rule sets `after_untrusted`; not in a thread whose history holds #exec's
            # read (a tool result the bot rightly counts).
            explicit = decided.rule is not None and decided.rule.after_untrusted is not None
            plain = place == PUBLIC or (place == "C1+member" and not explicit)
            if (
                allowed
                and tool == "create_task"
                and plain
                and call.thread not in self.read_outside
                and not self.toggled
            ):
                self.expect.append((key, "an allow rule decides it"))

        def click(self, call: Call, user: str, button: str, stale: bool) -> None:
            assert call.proposal_id is not None
            revision = max(1, call.revision - 1) if stale else call.revision
            state = self.before.proposals.get(call.proposal_id, {}).get("state")
            if revision == call.revision:
                self.liveness_for_click(call, user, state)
                call.votes.add(user)
            self.say(
                f"{user} clicks {button!r} on {call.key}'s card (revision {revision} of "
                f"{call.revision}; {state})"
            )
            grants = set(self.before.grants)
            bot.run(bot.click(call.proposal_id, revision, button, user, call.channel))
            snapshot = bot.run(bot.snapshot())
            now = snapshot.proposals.get(call.proposal_id, {}).get("state")
            if now == state:
                self.note(f"(the bot left it {state})")
            for grant_id in sorted(set(snapshot.grants) - grants):
                row = snapshot.grants[grant_id]
                source = next(
                    (c for c in self.ref.calls.values() if c.proposal_id == row["proposal_id"]),
                    call,
                )
                self.pending_grants.append((source, str(row["scope"]), user, grant_id))

        def in_outage(self, step: ApproveInOutage) -> None:
            call = self.carded(step.back)  # a waiting card if there is one
            if call is None:
                return
            self.down = True
            bot.run(bot.outage(True))
            try:
                self.click(call, resolve(step.who, call, self.ref), "approve", False)
            finally:
                self.down = False
                bot.run(bot.outage(False))
            self.note("(the board was down during that click; it is back now)")

        def retry(self, step: Retry) -> None:
            failed = [
                c
                for c in self.ref.calls.values()
                if self.before.proposals.get(c.proposal_id or -1, {}).get("state")
                in ("failed", "unknown")
            ]
            if not failed:
                self.say("(nothing failed to retry)")
                return
            call = failed[-1 - step.back % len(failed)]
            assert call.proposal_id is not None
            self.say(f"{step.user} clicks Retry on {call.key}'s card")
            bot.run(bot.click(call.proposal_id, call.revision, "retry", step.user, call.channel))

        def edit(self, step: Edit) -> None:
            call = self.carded(step.back)  # a waiting card if there is one
            if call is None:
                return
            assert call.proposal_id is not None
            user = resolve(step.who, call, self.ref)
            changes = {}
            if step.priority is not None:
                changes["priority"] = step.priority
            if step.assignee is not None:
                changes["assignee"] = step.assignee
            opened = bot.run(bot.edit(call.proposal_id, call.revision, user, changes, call.channel))
            row = bot.run(bot.snapshot()).proposals.get(call.proposal_id, {})
            if int(row.get("revision") or 0) > call.revision:
                self.ref.edited(call, user, row["arguments"], int(row["revision"]))
                self.say(
                    f"{user} edits {call.key} to {shown(call.args)} (revision "
                    f"{call.revision}): the reference says {self.ref.decision(call).describe()}"
                )
            else:
                outcome = "the bot refused it" if opened else "no form opened"
                self.say(f"{user} tries to edit {call.key} with {changes}: {outcome}")

        def reload(self, change: str) -> None:
            policy = amend(self.ref.policy, change)
            changed = self.ref.reload(policy)
            self.version += 1
            self.moved_at = self.steps + 1
            self.say(
                f"the policy is reloaded, {change} (rules changed: "
                f"{', '.join(changed) or 'none'}): {policy.describe()}"
            )
            bot.run(bot.reload(policy.text(self.version)))

        def ask_raise(self, step: AskRaise) -> None:
            ref = self.ref
            owners = sorted(ref.world.expand(ref.policy.owners))
            asker = {
                "the requester": step.requester,
                "an approver": (owners or [step.requester])[0],
                "a stranger": "UMALLORY",
            }.get(step.who, "UGUEST")
            may = may_ask_raise(ref.policy, asker, step.requester, ref.world)
            decided = decide_raise(ref.policy, asker, PUBLIC, ref.world)
            bot.run(ask_raise(bot, step.requester, asker))
            snapshot = bot.run(bot.snapshot())
            made = [
                pid
                for pid, row in sorted(snapshot.proposals.items())
                if pid not in self.before.proposals and row["tool_name"] == RAISE
            ]
            self.numbers += 1
            key = f"r{self.numbers}"
            story = (
                f"{step.requester}'s turn pauses at the budget; {asker} asks to raise it "
                f"(may ask: {may}; the reference says {decided.describe()})"
            )
            if not made:
                self.say(f"{story}: the bot proposed nothing")
                if may and decided.outcome != "deny":
                    self.findings.append(
                        Finding("a raise that may be asked was not", f"{key}: {story}")
                    )
                return
            row = snapshot.proposals[made[0]]
            call = Call(
                key, RAISE, asker, PUBLIC, None, key, frozenset(), dict(row["arguments"]),
                proposal_id=made[0],
            )  # fmt: skip
            ref.calls[key] = call
            self.born[key] = self.steps
            ref.card_made(call)
            self.say(f"{story}: the bot made raise {key} (proposal {made[0]})")
            if not may or decided.outcome == "deny":
                self.findings.append(Finding("a raise proposed that may not be", f"{key}: {story}"))

        def approve_raise(self, step: ApproveRaise) -> None:
            waiting = [
                c
                for c in self.ref.calls.values()
                if c.tool == RAISE
                and self.before.proposals.get(c.proposal_id or -1, {}).get("state") == "proposed"
            ]
            if not waiting:
                self.say("(no raise waits for a decision)")
                return
            call = waiting[-1 - step.back % len(waiting)]
            user = resolve(step.who, call, self.ref)
            decided = self.ref.decision(call)
            rule_ = decided.rule
            if (
                decided.outcome == "ask"
                and not decided.fail_closed
                and rule_ is not None
                and rule_.approvals_required == 1
                and self.ref.vote_refusal(user, call, decided) is None
                and not self.toggled
                and self.moved_at <= self.born.get(call.key, 0)
            ):
                self.expect.append((call.key, f"{user} owns the budget and the quorum is 1"))
            self.click(call, user, "approve", False)

        def toggle(self, user: str, where: str) -> None:
            world = self.ref.world
            people = world.groups[where] if where == GROUP else world.members[where]
            verb = "leaves" if user in people else "joins"
            people.symmetric_difference_update({user})
            self.moved_at = self.steps + 1
            self.toggled = True
            self.say(f"{user} {verb} {where}")
            bot.apply(world)

    return OneDoor
