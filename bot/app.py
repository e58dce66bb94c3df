"""Composition root: settings -> database, Slack client, model client, Bolt app, services.

Nothing here runs at import time; `Countersign.build` makes every long-lived object once and
hands it to whoever needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot import listeners, spend_wiring
from bot.approvals.executor import Executor, lease_for
from bot.approvals.policy import GroupMembers, Policies
from bot.approvals.service import ApprovalsService
from bot.approvals.sweeper import Sweeper
from bot.config import Settings
from bot.conversation.live_replies import LiveReplies
from bot.conversation.resume import ResumeWorker
from bot.conversation.stop_signals import StopSignals
from bot.conversation.stopping import Authority, Stopper
from bot.conversation.tokens import TokenCounter
from bot.conversation.tool_round import ActionDesk
from bot.conversation.turn import Conversations
from bot.conversation.turn_settings import TurnSettings
from bot.coordination import redis_client
from bot.db.migrate import upgrade_to_head
from bot.db.session import Database
from bot.heartbeat import Heartbeat, freeze_start_up_objects
from bot.links import LinkSigner
from bot.llm import LLM
from bot.policy.source import PolicySource
from bot.slack import feedback
from bot.slack.agent_threads import AgentThreads
from bot.slack.bolt_app import bolt_app
from bot.slack.budgets import WorkspaceBudgets
from bot.slack.card_publisher import CardPublisher
from bot.slack.commands import Records
from bot.slack.edit_budget import EditBudget
from bot.slack.interactions import Interactions
from bot.slack.show_all import ShowAll
from bot.startup import reach_database
from bot.tasks import TaskGroup, new_worker_id
from bot.thread_locks import ThreadLocks
from bot.tools.catalog import ToolRegistry
from bot.tools.integrations import Integrations
from bot.wiring import (
    checkpoint_job,
    dm_welcome,
    link_signer,
    model_of,
    one_door,
    policy_source,
    reconsidering,
    slack_of,
    sweeper_of,
    titles,
    tool_contexts,
)

log = logging.getLogger(__name__)


@dataclass
class Countersign:
    settings: Settings
    db: Database
    slack: AsyncWebClient
    llm: LLM
    budget: EditBudget  # the workspace's chat.update budget (budgets.edits)
    tasks: TaskGroup
    conversations: Conversations
    bolt: AsyncApp
    approvals: ApprovalsService
    executor: Executor
    sweeper: Sweeper
    live_replies: LiveReplies
    redis: Redis | None = None
    links: LinkSigner | None = None
    records: Records | None = None
    heartbeat: Heartbeat = field(default_factory=Heartbeat)
    budgets: WorkspaceBudgets | None = None
    stopper: Stopper | None = None
    integrations: Integrations = field(default_factory=Integrations)
    policy: PolicySource | None = None
    reconsider: Callable[[], Awaitable[object]] | None = None  # after a new policy version
    _policy_watch: asyncio.Task[None] | None = None
    _reached: bool = False  # the database answered: the start got going

    @classmethod
    def build(cls, settings: Settings) -> Countersign:
        """Make every long-lived object; call it inside the running event loop."""
        redis = redis_client(settings.redis_url) if settings.redis_url else None
        budgets, slack = slack_of(settings, redis)
        budget = budgets.edits
        db = Database.from_url(
            settings.database_url, settings.database_pool_size, settings.audit_key
        )
        llm = model_of(settings)
        links = link_signer(settings)
        registry = ToolRegistry.from_packs(settings.tool_packs)
        # Tools may take half of what the reply leaves (the rule `doctor` checks), no more.
        registry.max_tool_tokens = (settings.token_budget - settings.reply_tokens) // 2
        integrations = Integrations.attach(registry, settings)
        policies = Policies.parse(settings.approval_policies)
        policy = policy_source(settings, registry)
        policies.rules_name_approvers = policy.names_approvers
        groups = GroupMembers(slack)
        approvals = ApprovalsService(
            db, lease_for(settings.tool_timeout_seconds, settings.lease_seconds)
        )
        tasks = TaskGroup()
        worker = new_worker_id()
        live_replies = LiveReplies(db, worker, settings.lease_seconds)
        cards = CardPublisher(slack, budget, approvals, registry, policies, tasks, groups)
        door = one_door(policy, groups, slack, db, registry, approvals)
        desk = ActionDesk(registry, policies, approvals, cards, door)
        conversations = Conversations(
            db,
            llm,
            slack,
            budget,
            TurnSettings.from_settings(settings, links),
            desk,
            ThreadLocks(redis),
            live_replies,
            budgets,
        )

        tool_context = tool_contexts(db, slack, links)
        resumer = ResumeWorker(db, conversations, tasks, worker, settings.lease_seconds)
        executor = Executor(
            approvals,
            registry,
            cards,
            tool_context,
            resumer.kick,
            worker,
            settings.tool_timeout_seconds,
            door,
        )

        def execute(proposal_id: int) -> None:
            tasks.spawn(executor.run(proposal_id), name=f"execute-{proposal_id}")

        desk.execute = execute
        sweeper = sweeper_of(
            settings, db, slack, approvals, cards, executor, tasks, resumer, live_replies, budgets
        )
        records = Records(db, slack, registry, policies, groups, tasks)
        records.door = door
        cards.on_change = records.proposal_changed
        threads = AgentThreads(slack, settings.suggested_prompts)
        welcome = dm_welcome(settings, db, slack, threads, registry, policy, tasks)
        records.on_messages_tab = welcome.messages_tab
        conversations.titles = titles(settings, db, llm, threads, tasks)
        spend_wiring.govern_spend(conversations, settings, db, policy, groups)
        sweeper.jobs.append(spend_wiring.stale_holds_job(conversations, settings))
        records.usage = spend_wiring.usage_views(conversations, settings, db, groups, registry)
        interactions = Interactions(
            approvals,
            registry,
            policies,
            groups,
            cards,
            executor,
            tasks,
            tool_context,
            resumer.kick,
            door,
        )
        bolt = bolt_app(slack, settings.slack_signing_secret)
        stopper = Stopper(
            conversations.running,
            approvals,
            Authority(policies, groups, interactions.policy_for, door, approvals.pack_of),
            cards,
            conversations.replies.set_active,
            StopSignals(settings.redis_url, worker) if settings.redis_url else None,
        )
        reconsider_now = reconsidering(door, approvals, cards, resumer.kick)
        policy.on_change = lambda: tasks.spawn(reconsider_now(), name="policy-reconsider")
        sweeper.jobs.append(stopper.recover)  # completes Stops a crash cut off
        sweeper.first.append(checkpoint_job(settings, db, slack))
        listeners.register(bolt, conversations, tasks, stopper, welcome)
        records.register(bolt)
        interactions.register(bolt)
        ShowAll(approvals, registry, records.access, cards, tasks).register(bolt)
        feedback.register(bolt, db, cards.tell, tasks, records.access)
        spend_wiring.pause_buttons(bolt, conversations.spending, cards, sweeper, resumer.kick)
        spend_wiring.budget_raises(
            settings, bolt, conversations.spending, door, approvals, cards, registry, tasks
        )
        listeners.acknowledge_the_rest(bolt)
        return cls(
            settings,
            db,
            slack,
            llm,
            budget,
            tasks,
            conversations,
            bolt,
            approvals,
            executor,
            sweeper,
            live_replies,
            redis,
            links,
            records,
            budgets=budgets,
            stopper=stopper,
            integrations=integrations,
            policy=policy,
            reconsider=reconsider_now,
        )

    async def start(self) -> None:
        """Run pending migrations before any event is handled; `StartupError` (one line for
        the person starting it) when the database cannot be reached. What only makes the
        first turn faster is `settle`, once events can come in."""
        await reach_database(self.db)
        self._reached = True
        # The tool servers come up (a stdio server is a process to start) while the schema
        # is checked; both are done before any event is handled.
        tools_up = asyncio.create_task(self.integrations.start(), name="integrations-start")
        try:
            log.info("bringing the database schema up to date (migrating)…")
            await upgrade_to_head(self.db)
        except BaseException:
            tools_up.cancel()
            with contextlib.suppress(BaseException):
                await tools_up
            raise
        await tools_up
        if self.policy is not None:
            self.policy.remap()  # tool servers' tools are known now
        await self.sweeper.recover()
        self.sweeper.start()
        if self.stopper is not None:
            self.stopper.start()
        self.heartbeat.start()
        if self.policy is not None and self.policy.path is not None:
            self._policy_watch = asyncio.create_task(self.policy.watch(), name="policy-watch")

    async def settle(self) -> None:
        """The warm-ups no event has to wait for, run once the bot is connected (or listens):
        the token encoding (a few tenths of a second, in a thread: a turn that needs it first
        waits for tiktoken's own lock, not for a second load), then the start-up objects are
        frozen out of the collector's way."""
        await asyncio.to_thread(TokenCounter(self.settings.llm_model).warm_up)
        freeze_start_up_objects()

    async def reload_policy(self) -> bool:
        """Read the policy file now (as the watch does every few seconds) and, if a new
        version is in force, let it meet what waits; True if it changed."""
        if self.policy is None or not await asyncio.to_thread(self.policy.refresh):
            return False
        if self.reconsider is not None:
            await self.reconsider()
        return True

    async def shutdown(self) -> None:
        """Let live replies finish (or finalise them with a note), then release resources."""
        if self._reached:  # not after a start that never got going
            log.info("shutting down: %d turn(s) in flight", self.tasks.running)
        await self.sweeper.stop()
        self.heartbeat.stop()
        if self._policy_watch is not None:
            self._policy_watch.cancel()
        stop_budgets = self.budgets.stop if self.budgets is not None else self.budget.stop
        await self.tasks.drain(self.settings.shutdown_grace_seconds, stop_budgets)
        await stop_budgets()
        await spend_wiring.close_spend(self.conversations)
        with contextlib.suppress(Exception):  # the texts shown last, for the next process
            await self.live_replies.flush()
        await self.live_replies.stop()
        await self.integrations.close()
        await self.llm.client.close()
        await self.db.dispose()
        if self.slack.session is not None:
            await self.slack.session.close()
        if self.stopper is not None:
            await self.stopper.close()
        if self.redis is not None:
            await self.redis.aclose()
