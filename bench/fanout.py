"""DM fan-out benchmark: a card routed to a 50-person user group by direct message.

    uv run python -m bench.fanout                 # 50 approvers, 2 proposals
    uv run python -m bench.fanout --members 50 --proposals 3

The fake Slack enforces Slack's limits for the methods a fan-out spends, per workspace and
sliding minute unless said: `conversations.open` 50 (Tier 3), `usergroups.users.list` 20
(Tier 2), `chat.update` 50 (Tier 3), `chat.postMessage` 5 per 5 s per channel (about one a
second per channel, with a short burst), and answers 429 with `Retry-After` beyond them.

Each proposal: a mention makes the model call create_task under a rule with `route: dm` and
`approvers: [S0BIG]` (the group's members); we time the proposal -> its last DM copy posted,
then one approver's click -> half and all of the copies showing the outcome, and count the
calls and 429 answers. SQLite database.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bot.slack import cards
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import FakeSlack, Limit, documented_floors
from tests.fakes.slack_limits import MethodLimits
from tests.harness import make_settings, start_bot, stop_bot
from tests.test_approvals_flow import CREATE, call

POLICY = """\
version: 1
default: ask
rules:
  - name: tasks
    tools: [create_task]
    outcome: ask
    approvers: [S0BIG]
    route: dm
"""


def slack_limits() -> dict[str, MethodLimits]:
    return {
        **documented_floors(),
        "conversations.open": Limit(50, 60.0),
        "usergroups.users.list": Limit(20, 60.0),
        "chat.postMessage": Limit(5, 5.0, per_channel=True),
    }


async def run(members: int, proposals: int) -> None:
    slack, model = FakeSlack(limits=slack_limits()).start(), FakeOpenAI().start()
    people = [f"U{i:03d}" for i in range(members)]
    slack.user_groups["S0BIG"] = people
    dms = [f"D{p.lstrip('U')}" for p in people]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.yaml"
        policy.write_text(POLICY)
        settings = make_settings(
            slack, model, f"sqlite:///{Path(tmp) / 'f.db'}", policy_file=policy,
            sweep_interval_seconds=1.0,
        )  # fmt: skip
        bot = await start_bot(settings)
        try:
            for n in range(proposals):
                before = len(slack.calls)
                model.script(
                    Script(tool_calls=[call("create_task", {**CREATE, "title": f"fan {n}"})]),
                    Script(text="noted"),
                )
                asked = time.monotonic()
                await bot.mention(f"C{n}", "track it", slack, user="UALICE")
                while sum(len(slack.cards(d)) > n for d in dms) < members:
                    if time.monotonic() - asked > 120:
                        raise AssertionError("not every approver got the card")
                    await asyncio.sleep(0.01)
                posted = max(slack.cards(d)[n].ts for d in dms)
                last_post = max(t for t, _ in slack.timeline[posted])
                clicked = time.monotonic()
                await bot.click(slack.cards(dms[0])[n], cards.APPROVE, people[0], dms[0])
                while not all("Done" in str(slack.cards(d)[n].blocks) for d in dms):
                    if time.monotonic() - clicked > 180:
                        raise AssertionError("copies did not follow the decision")
                    await asyncio.sleep(0.05)
                followed = time.monotonic()
                edited = {
                    str(c.args.get("ts")): c.at for c in slack.calls if c.method == "chat.update"
                }  # a copy's last edit is the one showing the outcome
                shown = sorted(edited[slack.cards(d)[n].ts] for d in dms)
                half = shown[(len(shown) - 1) // 2] - clicked  # the median copy
                await bot.idle()
                calls = slack.calls[before:]
                rows.append(
                    (
                        n + 1,
                        last_post - asked,
                        half,
                        followed - clicked,
                        sum(c.method == "conversations.open" for c in calls),
                        sum(c.method == "chat.postMessage" for c in calls),
                        sum(c.method == "chat.update" for c in calls),
                        sum(c.status == 429 for c in calls),
                    )
                )
        finally:
            await stop_bot(bot)
    slack.stop()
    model.stop()
    print(f"\n== a card routed by DM to a {members}-person user group (SQLite, fakes)")
    print(
        "  proposal  mention->last DM  click->half copies  click->all copies  conv.open"
        "  postMessage  update  429s"
    )
    for n, fan, half, follow, opened, posts, updates, limited in rows:
        print(
            f"  {n:8d}  {fan:14.2f} s  {half:15.2f} s  {follow:15.2f} s  {opened:9d}"
            f"  {posts:11d}  {updates:6d}  {limited:4d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--proposals", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(run(args.members, args.proposals))


if __name__ == "__main__":
    main()
