"""World 2: the same bot and services under a policy file with every kind of rule the findings
of issue 25 were found in: denies (one whose condition reads a field a call may leave out, one
over text the model writes), an allow rule, an ask rule offering grants of every scope, a
quorum of two with four-eyes, `route: dm`, an escalation ladder ending in allow, and a DM's own
rule. The file is rewritten in some attacks (a reload between grant and use, or between card
and click) and put back after each.

People: Alice asks; Bob and Alice approve in #general; Carol and Dan are #exec's quorum; Erin
is named by the reloads. #exec is private to Alice, Carol and Dan (Bob and Erin may not read
it)."""

from __future__ import annotations

from pathlib import Path

from bench.hostile_sight import Secret
from bench.hostile_world import World, add_private_channel, start_world
from bot.db.models import Task
from tests.fakes.slack import TEAM_ID

PUBLIC, EXEC, DM = "CGENERAL", "CEXEC", "DALICE"
ALICE, BOB, CAROL, DAN, ERIN = "UALICE", "UBOB", "UCAROL", "UDAN", "UERIN"
EVERYONE = [ALICE, BOB, CAROL, DAN, ERIN]
LADDER_END = 4.0  # seconds: the comments ladder's allow step
SWEEP_SECONDS = 0.3
SEED_TASK = 1  # a task on the board from the start, for updates

POLICY = """\
version: 1
default: ask
rules:
  - name: no-payroll-on-the-board
    tools: [create_task, update_task]
    when: 'args.title.contains("payroll") || args.description.contains("payroll")'
    outcome: deny
    reason: payroll stays off the shared board
  - name: no-payroll-in-notes
    tools: [notes__add_note]
    when: 'args.body.contains("payroll")'
    outcome: deny
    reason: payroll stays out of the notebook
  - name: no-payroll-on-github
    tools: [github_comment, github_create_issue]
    when: 'args.body.contains("payroll")'
    outcome: deny
    reason: payroll stays off GitHub
  - name: no-urgent-tasks
    tools: [create_task, update_task]
    when: 'args.priority == "urgent"'
    outcome: deny
    reason: urgent work goes through the on-call rota
  - name: exec-tasks
    tools: [create_task, update_task]
    channels: [CEXEC]
    outcome: ask
    approvers: [UCAROL, UDAN]
    approvals_required: 2
    four_eyes: true
    grants: [once, thread, channel, me]
  - name: low-priority-tasks
    tools: [create_task]
    channels: [CGENERAL]
    when: 'args.priority == "low"'
    outcome: allow
  - name: general-tasks
    tools: [create_task, update_task, notes__add_note]
    channels: [CGENERAL]
    outcome: ask
    approvers: [UALICE, UBOB]
    grants: [once, thread, channel, me]
    grant_expiry: 1h
  - name: dm-tasks
    tools: [create_task]
    channels: [DALICE]
    outcome: ask
    grants: [once, thread, channel, me]
  - name: issues-by-dm
    tools: [github_create_issue]
    outcome: ask
    approvers: [UBOB]
    route: dm
  - name: comments-ladder
    tools: [github_comment]
    outcome: ask
    approvers: [UBOB]
    escalate:
      - after: 2s
        to: [UCAROL]
      - after: 4s
        outcome: allow
"""

GENERAL_RULE = """\
    approvers: [UALICE, UBOB]
    grants: [once, thread, channel, me]
    grant_expiry: 1h
"""


def reloaded(old: str, new: str) -> str:
    """The policy with one passage replaced (and a new version number)."""
    assert old in POLICY, old
    return POLICY.replace(old, new).replace("version: 1", "version: 2", 1)


# The reloads the attacks make.
GENERAL_FOUR_EYES = reloaded(
    GENERAL_RULE, GENERAL_RULE.replace("[UALICE, UBOB]", "[UBOB, UERIN]") + "    four_eyes: true\n"
)
GENERAL_QUORUM = reloaded(GENERAL_RULE, GENERAL_RULE + "    approvals_required: 2\n")
ISSUES_TO_ERIN = reloaded(
    "    approvers: [UBOB]\n    route: dm", "    approvers: [UERIN]\n    route: dm"
)
DM_FOUR_EYES = reloaded(
    "    channels: [DALICE]\n    outcome: ask\n",
    "    channels: [DALICE]\n    outcome: ask\n    approvers: [UBOB]\n    four_eyes: true\n",
)


async def build_policy_world(tmp: Path, database_url: str) -> World:
    path = tmp / "policy.yaml"
    path.write_text(POLICY)
    world = await start_world(
        tmp, database_url, policy_file=path, sweep_interval_seconds=SWEEP_SECONDS
    )
    world.policy_path = path
    slack = world.slack
    slack.channel_info[PUBLIC] = {"id": PUBLIC, "name": "general", "is_private": False}
    slack.members[PUBLIC] = [*EVERYONE, "UBOT"]
    slack.channel_info[DM] = {"id": DM, "is_im": True, "user": ALICE}
    slack.members[DM] = [ALICE, "UBOT"]
    secret: Secret = add_private_channel(world, EXEC, "exec", [ALICE, CAROL, DAN])
    assert secret.readers == frozenset({ALICE, CAROL, DAN})
    world.github.add_issue("acme/api", 7, "Login loops", labels=["bug"])
    async with world.bot.countersign.db.transaction() as session:
        task = Task(team_id=TEAM_ID, title="Quarterly planning", created_by=ALICE)
        session.add(task)
        await session.flush()
        assert task.id == SEED_TASK
    return world


def exec_secret(world: World) -> str:
    return world.secrets[0].text


async def restore(world: World) -> None:
    """Put the first policy back in force (an attack may have reloaded another)."""
    await reload(world, POLICY)


async def reload(world: World, text: str) -> None:
    """Rewrite POLICY_FILE and have the bot read it now (its watcher would within 2 s)."""
    assert world.policy_path is not None
    source = world.bot.countersign.policy
    assert source is not None
    if world.policy_path.read_text() == text:
        return
    world.policy_path.write_text(text)
    source.refresh()
    assert source.current.policy.version == (2 if text != POLICY else 1), "reload refused"
