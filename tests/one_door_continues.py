"""The one-door test's "Continue on a cheaper model" (bot/slack/budget_clicks.py): a path to
writes of its own. A turn continued on a budget's cheaper model asks for its write; and another
turn of the same thread, waiting on its proposal while that turn paused and went on, goes on
as its own once its proposal is settled (f4a1ee3: it went on as the continued turn's person,
whose name its next write then carried, past four-eyes).

The pause is made by the bot's own pause flow: a reload gives the pauser a budget of their
own with no token left, which names a cheaper model, for the length of the step (then the
policy is as the reference has it again); the click is a `block_actions` payload on the card
the pause posted. Each write a turn asks for after this step is a call the reference knows
before it is proposed (`Observer.planned`), with the requester whose turn asks for it; the
checks adopt it when its proposal appears and hold the bot to that requester.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import yaml
from sqlalchemy import func, select

from bot.db.models import BudgetPause
from bot.slack.budget_card import CONTINUE_CHEAPER
from tests.fakes.openai import Script
from tests.fakes.slack import TEAM_ID
from tests.one_door_fakes import write_call
from tests.one_door_findings import Finding
from tests.one_door_policy import RAISE
from tests.one_door_reference import Call, Reference
from tests.one_door_steps import Continue, resolve
from tests.one_door_world import EXEC, EXEC_MARK

if TYPE_CHECKING:
    from tests.one_door_bot import OneDoorBot, Snapshot

CHEAP = "cheap-model"  # the paused budget's fallback_model
PAUSERS = ("UDANA", "UCAROL", "UALICE")


class Adopting(Protocol):
    """What of the checks (tests/one_door_checks.py) `adopt` uses."""

    ref: Reference
    planned: dict[str, Call]  # calls a turn will ask for, by key: not proposed yet
    born: dict[str, int]
    steps: int

    def note(self, line: str) -> None: ...


class Host(Adopting, Protocol):
    """What of the machine (tests/one_door_machine.py) the step uses."""

    bot: OneDoorBot
    before: Snapshot
    version: int
    numbers: int
    findings: list[Finding]

    def say(self, line: str) -> None: ...


def pausing_policy(text: str, pauser: str) -> str:
    """The policy file `text` with a day budget of `pauser`'s own, used up (no token left),
    naming a cheaper model: their next turn pauses at it, and its card offers to continue."""
    data: dict[str, Any] = yaml.safe_load(text)
    owners = data["budgets"][0]["owners"]
    data["budgets"].append(
        {
            "name": f"own-{pauser.lower()}",
            "scope": {"user": pauser},
            "window": "day",
            "tokens": 0,
            "owners": owners,
            "fallback_model": CHEAP,
        }
    )
    return yaml.safe_dump(data, sort_keys=False)


async def paused(bot: OneDoorBot, requester: str, since: int) -> BudgetPause | None:
    """`requester`'s newest pause, of those after pause `since`."""
    async with bot.bot.countersign.db.reading() as session:
        found = await session.scalar(
            select(BudgetPause)
            .where(BudgetPause.requester == requester, BudgetPause.id > since)
            .order_by(BudgetPause.id.desc())
            .limit(1)
        )
    return found


async def last_pause(bot: OneDoorBot) -> int:
    async with bot.bot.countersign.db.reading() as session:
        found = await session.scalar(select(func.max(BudgetPause.id)))
    return int(found or 0)


async def click_continue(bot: OneDoorBot, pause: BudgetPause, user: str) -> None:
    """`user` clicks "Continue on a cheaper model" on the pause's card (where it was posted)."""
    ts = pause.card_ts or "1.0"
    trigger = f"trigger-{user}-continue-{pause.id}"
    bot.triggers[trigger] = user
    await bot.bot._interact(
        {
            "type": "block_actions",
            "user": {"id": user, "team_id": TEAM_ID},
            "trigger_id": trigger,
            "container": {"type": "message", "message_ts": ts, "channel_id": pause.channel_id},
            "channel": {"id": pause.channel_id},
            "message": {"ts": ts, "thread_ts": pause.thread_ts, "text": "Budget reached"},
            "actions": [
                {"type": "button", "action_id": CONTINUE_CHEAPER, "block_id": "b",
                 "value": str(pause.id), "action_ts": "1.0"}
            ],
        }
    )  # fmt: skip
    await bot.settle()


def plan_follow_up(host: Host, waiting: Call) -> None:
    """`waiting`'s turn, once its proposal is settled and it resumes, asks for one more task
    (once): in its thread, for its requester."""
    host.numbers += 1
    key = f"p{host.numbers}"
    host.bot.model.follow_ups[waiting.key] = Script(
        tool_calls=[write_call(key, "create_task", {"title": key})], argument_fragment_size=4096
    )
    host.planned[key] = Call(
        key, "create_task", waiting.requester, waiting.channel, waiting.thread, waiting.turn,
        frozenset({waiting.channel}), {"title": key},
    )  # fmt: skip


def continue_cheaper(host: Host, step: Continue) -> None:
    ref, bot = host.ref, host.bot
    waiting = [
        c
        for c in ref.calls.values()
        if c.tool != RAISE
        and not c.is_dm
        and host.before.proposals.get(c.proposal_id or -1, {}).get("state") == "proposed"
    ]
    if not waiting:
        host.say("(no proposal waits in a thread for another person's turn to pause in)")
        return
    call = waiting[-1 - step.back % len(waiting)]
    others = [p for p in PAUSERS if p != call.requester]
    pauser = step.pauser if step.pauser in others else others[0]
    if call.channel == EXEC and pauser not in ref.world.members[EXEC]:
        host.say(f"({pauser} may not speak in #exec, where {call.key} waits)")
        return
    planned = set(bot.model.follow_ups)
    for other in waiting:  # every turn waiting in that thread: it asks again once resumed
        if (other.channel, other.thread) == (call.channel, call.thread) and (
            other.key not in planned
        ):
            plan_follow_up(host, other)
    host.version += 1
    bot.run(bot.reload(pausing_policy(ref.policy.text(host.version), pauser)))
    try:
        pause_and_continue(host, step, call, pauser)
    finally:
        host.version += 1  # the pauser's own budget goes again
        bot.run(bot.reload(ref.policy.text(host.version)))


def pause_and_continue(host: Host, step: Continue, call: Call, pauser: str) -> None:
    """In `call`'s thread `pauser` asks (for a write, or in words), their turn pauses, and
    someone clicks Continue."""
    ref, bot = host.ref, host.bot
    since = bot.run(last_pause(bot))
    host.numbers += 1
    key = f"p{host.numbers}"
    marks = f" {EXEC_MARK}" if call.channel == EXEC else ""
    sent = {"title": f"{key}{marks}"}
    if step.writes:
        ts = bot.run(
            bot.ask(key, pauser, call.channel, call.thread, "create_task", sent, False,
                    f"please{marks}")
        )  # fmt: skip
        args = {"title": sent["title"], "description": "", "assignee": None, "due_date": None,
                "priority": "normal"}  # fmt: skip
        host.planned[key] = Call(
            key, "create_task", pauser, call.channel, call.thread, ts,
            frozenset({call.channel}), args,
        )  # fmt: skip
    else:
        bot.model.plan(key, Script(text="an answer"))
        bot.run(bot.ask_only(key, pauser, call.channel, call.thread, f"a question{marks}"))
    asked = f"asks for {key}" if step.writes else "asks a question"
    story = (
        f"in {call.key}'s thread ({call.requester}'s, waiting), {pauser} {asked} and their "
        "turn pauses at a budget of theirs"
    )
    pause = bot.run(paused(bot, pauser, since))
    if pause is None or pause.state != "paused":
        host.say(f"{story}: the bot did not pause it")
        host.findings.append(Finding("a turn past its budget did not pause", story))
        return
    user = {
        "the pauser": pauser,
        "the waiting requester": call.requester,
    }.get(step.who) or resolve(step.who, call, ref)
    host.say(f"{story}; {user} clicks 'Continue on a cheaper model' on its card")
    bot.run(click_continue(bot, pause, user))
    after = bot.run(paused(bot, pauser, since))
    state = after.state if after is not None else None
    host.note(
        {"paused": "(the bot refused it: the turn stays paused)",
         "resumed": f"(the turn goes on, on {CHEAP})"}.get(str(state), f"(the pause is {state})")
    )  # fmt: skip
    if user != pauser and state != "paused":
        host.findings.append(
            Finding("a pause continued by another person than its requester", story)
        )
    if state == "paused":  # it stays paused: its question is not asked again (nor its write)
        bot.model.plans.pop(key, None)
        host.planned.pop(key, None)
    if user == pauser and state != "resumed":
        host.findings.append(Finding("the requester's Continue did not resume", story))


def adopt(host: Adopting, snapshot: Snapshot) -> list[Finding]:
    """The planned calls whose proposals appeared: known to the reference from now on, as
    asked for by the requester whose turn asked for them (the bot must say the same)."""
    found = []
    for proposal_id, row in sorted(snapshot.proposals.items()):
        title = row["arguments"].get("title") if isinstance(row["arguments"], dict) else None
        key = str(title).split(" ")[0] if title else ""
        call = host.planned.pop(key, None)
        if call is None:
            continue
        call.proposal_id = proposal_id
        call.args = dict(row["arguments"])
        host.ref.calls[key] = call
        host.born[key] = host.steps
        host.ref.card_made(call)
        host.note(
            f"{call.requester}'s turn asks for {key} in its thread: the reference says "
            f"{host.ref.decision(call).describe()}; the bot made proposal {proposal_id} as "
            f"{row['requester']}'s"
        )
        if row["requester"] != call.requester:
            found.append(
                Finding(
                    "a turn's write filed as another person's",
                    f"{key}, asked for by {call.requester}'s turn, was filed as "
                    f"{row['requester']}'s",
                )
            )
    return found
