"""Pieces of the composition root (`bot.app`) made from settings alone: each a few lines of
choices (is it configured, which secret signs it) that `Countersign.build` need not spell out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.executor import Executor
from bot.approvals.policy import GroupMembers
from bot.approvals.service import ApprovalsService
from bot.approvals.sweeper import Sweeper
from bot.config import Settings
from bot.conversation.live_replies import LiveReplies
from bot.conversation.resume import ResumeWorker
from bot.conversation.titles import Titles
from bot.db.models import Proposal
from bot.db.session import Database
from bot.links import LinkSigner
from bot.llm import LLM, make_client
from bot.membership import reach_of
from bot.policy.one_door import OneDoor, tool_nature
from bot.policy.reconsider import reconsider
from bot.policy.source import PolicySource
from bot.records.audit_checkpoints import CheckpointJob
from bot.records.retention import Retention
from bot.slack.agent_threads import AgentThreads
from bot.slack.audit_checkpoints import poster as checkpoint_poster
from bot.slack.budgets import Limits, WorkspaceBudgets
from bot.slack.card_publisher import CardPublisher
from bot.slack.card_rerouting import announce_reroute
from bot.slack.dm_welcome import DmWelcome
from bot.slack.web_client import web_client
from bot.tasks import TaskGroup
from bot.tools.catalog import ToolRegistry
from bot.tools.context import ToolContext
from bot.welcome_text import welcome_text

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


def slack_of(settings: Settings, redis: Redis | None) -> tuple[WorkspaceBudgets, AsyncWebClient]:
    """The workspace's budgets (one scheduler, shared by the replicas through Redis) and the
    one Web API client whose every call goes through them."""
    budgets = WorkspaceBudgets(
        Limits(
            edits_per_minute=settings.slack_edit_budget_per_minute,
            appends_per_minute=settings.slack_append_budget_per_minute,
            starts_per_minute=settings.slack_stream_starts_per_minute,
            calls_scale=settings.slack_call_budget_scale,
            history_tier=settings.slack_history_tier,
        ),
        redis,
        workspace_key=settings.slack_bot_token.get_secret_value(),
    )
    token = settings.slack_bot_token.get_secret_value()
    return budgets, web_client(token, str(settings.slack_api_url), budgets)


def model_of(settings: Settings) -> LLM:
    """The model client, every request bounded by `REPLY_TOKENS` and `MODEL_DEADLINE_SECONDS`."""
    return LLM(
        make_client(settings),
        settings.llm_model,
        settings.reply_tokens,
        settings.model_deadline_seconds,
    )


def link_signer(settings: Settings) -> LinkSigner | None:
    """Signed, expiring links to the pages this bot serves; none without `PUBLIC_BASE_URL`."""
    if not settings.public_base_url:
        return None
    secret = settings.slack_signing_secret or settings.slack_bot_token
    return LinkSigner.from_secret(
        str(settings.public_base_url), secret.get_secret_value(), settings.link_ttl_hours * 3600
    )


def policy_source(settings: Settings, registry: ToolRegistry) -> PolicySource:
    """The policy in force, loaded now: the settings checked the file already, so a file gone
    or broken since fails here, before the bot takes any event."""
    watched, required = settings.policy_watched
    source = PolicySource(
        watched,
        settings.approval_policies,
        lambda name: tool.pack if (tool := registry.get(name)) else "",
        required=required,
    )
    source.load()
    return source


def checkpoint_job(settings: Settings, db: Database, slack: AsyncWebClient) -> CheckpointJob:
    """The sweeper's audit checkpoint job: signed with `AUDIT_SIGNING_KEY` if set, posted to
    `AUDIT_CHECKPOINT_CHANNEL` if set."""
    channel = settings.audit_checkpoint_channel
    return CheckpointJob(
        db,
        settings.audit_key,
        settings.audit_checkpoint_every,
        checkpoint_poster(slack, channel) if channel else None,
    )


def one_door(
    policy: PolicySource,
    groups: GroupMembers,
    slack: AsyncWebClient,
    db: Database,
    registry: ToolRegistry,
    approvals: ApprovalsService,
) -> OneDoor:
    """The one door (`bot.policy.one_door`), given to the approvals service too (escalation
    steps and the start of execution ask it)."""
    door = OneDoor(
        policy,
        groups,
        reach_of(slack),
        db,
        registry.with_defaults,
        lambda name: tool_nature(registry.get(name)),
    )
    approvals.pack_of = lambda name: tool.pack if (tool := registry.get(name)) else ""
    approvals.door = door
    return door


def reconsidering(
    door: OneDoor, approvals: ApprovalsService, cards: CardPublisher, kick: Callable[[], None]
) -> Callable[[], Coroutine[Any, Any, object]]:
    """What a new policy version does to what waits (`bot.policy.reconsider`): a closed
    proposal's card shows it and its turn resumes; a rerouted one is announced."""

    async def closed(proposal: Proposal) -> None:
        cards.refresh(proposal.id)
        kick()

    async def rerouted(proposal: Proposal) -> None:
        await announce_reroute(cards, proposal)

    async def run() -> object:
        return await reconsider(door, approvals, rerouted, closed)

    return run


def dm_welcome(
    settings: Settings,
    db: Database,
    slack: AsyncWebClient,
    threads: AgentThreads,
    registry: ToolRegistry,
    policy: PolicySource,
    tasks: TaskGroup,
) -> DmWelcome:
    """The DM's first-open welcome, said from the tools offered and the policy in force."""
    followups = settings.thread_followups
    return DmWelcome(
        db,
        slack,
        threads,
        lambda user: welcome_text(user, registry.offered(), policy.current.policy, followups),
        tasks,
    )


def titles(
    settings: Settings, db: Database, llm: LLM, threads: AgentThreads, tasks: TaskGroup
) -> Titles:
    """Conversation titles: `TITLE_MODEL` (default the chat model; `off`: first words)."""
    model = None if settings.title_model == "off" else settings.title_model
    made = Titles(
        db,
        None
        if model is None
        else LLM(llm.client, model or settings.llm_model, llm.max_tokens, llm.deadline),
        settings.title_timeout_seconds,
        tasks,
    )
    made.threads = threads
    return made


def tool_contexts(
    db: Database, slack: AsyncWebClient, links: LinkSigner | None
) -> Callable[[Proposal], ToolContext]:
    """What an approved proposal's tool runs with: its workspace, channel, requester, key,
    pinned target and audience."""

    def context(proposal: Proposal) -> ToolContext:
        return ToolContext(
            db=db,
            slack=slack,
            team_id=proposal.team_id,
            channel_id=proposal.channel_id,
            requester=proposal.requester,
            idempotency_key=proposal.idempotency_key,
            pin=proposal.pin,
            links=links,
            audience=proposal.audience,
        )

    return context


def sweeper_of(
    settings: Settings,
    db: Database,
    slack: AsyncWebClient,
    approvals: ApprovalsService,
    cards: CardPublisher,
    executor: Executor,
    tasks: TaskGroup,
    resumer: ResumeWorker,
    live_replies: LiveReplies,
    budgets: WorkspaceBudgets | None = None,
) -> Sweeper:
    """The sweeper, with its recurring jobs: resume settled turns, finish replies a crash cut
    off, and retention."""

    async def resume_settled() -> None:
        resumer.kick()

    async def finish_cut_off_replies() -> None:
        finished = await live_replies.recover(slack, budgets)
        if finished:
            log.warning("finished %d reply(ies) cut off by a crash", finished)

    reminder = settings.proposal_reminder_minutes
    return Sweeper(
        approvals,
        cards,
        executor,
        tasks,
        settings.sweep_interval_seconds,
        timedelta(minutes=reminder) if reminder else None,
        jobs=[resume_settled, finish_cut_off_replies, Retention(db, settings.retention_days)],
    )
