"""The thread so far, read from Slack when the bot is first mentioned inside an existing thread.

Bounded: at most `limit` earlier messages (the newest ones) are kept, and paging stops once
that many are read. Only this bot's own messages become assistant messages; other apps' and
bots' messages are context from someone else, never the assistant's own words.

Every message but the bot's own keeps its source (`bot.conversation.authors`): who wrote it, of
what kind, and its permalink; a prompt delimits it as data unless it is its requester's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from asyncio import Task
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession

from bot.audience import place
from bot.conversation.authors import authors_of
from bot.conversation.incoming import Incoming
from bot.conversation.shared_files import FileMessage, TurnFiles, slack_files
from bot.db import repositories as repo
from bot.db.histories import History, Wanted, load_histories
from bot.db.models import Conversation, Role
from bot.db.session import Database
from bot.db.turn_writes import ADD_USER_MESSAGE, UserMessage
from bot.errors import slack_error
from bot.provenance import Source
from bot.slack.method_limits import TIER_1_PAGE
from bot.text import unescape

log = logging.getLogger(__name__)

MAX_PAGES = 10


async def earlier_thread_messages(
    slack: AsyncWebClient,
    incoming: Incoming,
    bot_user_id: str | None,
    bot_id: str | None,
    limit: int,
    history_tier: int = 3,
) -> list[dict[str, Any]]:
    """The thread's messages before `incoming` (at most `limit`, the newest), read from Slack
    when the bot joins a thread it was not in. At Tier 1 (`SLACK_HISTORY_TIER=1`: one read a
    minute, 15 messages a page) one page: the thread's start, the parent first."""
    found: list[dict[str, Any]] = []
    pages, page_size = (1, TIER_1_PAGE) if history_tier == 1 else (MAX_PAGES, 200)
    authors = authors_of(slack)
    thread = incoming.thread_ts or incoming.ts
    if limit <= 0:
        return found
    cursor: str | None = None
    try:
        for _ in range(pages):
            page = await slack.conversations_replies(
                channel=incoming.channel_id,
                ts=incoming.thread_ts or incoming.ts,
                limit=min(page_size, max(limit + 1, 20)),
                cursor=cursor,
            )
            for m in page.get("messages") or []:
                if float(m.get("ts", "0")) >= float(incoming.ts):
                    continue
                text = unescape(str(m.get("text") or ""))
                files = slack_files(m)
                if not text.strip() and not files:
                    continue
                ours = (bot_user_id is not None and m.get("user") == bot_user_id) or (
                    bot_id is not None and m.get("bot_id") == bot_id
                )
                other_app = not ours and bool(m.get("bot_id"))
                ts, user = str(m.get("ts") or ""), m.get("user")
                source: Source | None = None
                if other_app:
                    name = (m.get("bot_profile") or {}).get("name") or m.get("username") or "an app"
                    text = f"[message from another app, {name}]: {text}"
                    said = str((m.get("bot_profile") or {}).get("name") or m.get("username") or "")
                    source = await authors.of_app(said, incoming.channel_id, ts, thread)
                elif not ours and isinstance(user, str) and user:
                    source = await authors.of_person(user, incoming.channel_id, ts, thread)
                found.append(
                    {
                        "role": Role.ASSISTANT if ours else Role.USER,
                        "content": text,
                        "slack_ts": m.get("ts"),
                        "slack_user": None if ours or other_app else m.get("user"),
                        "source": source,
                        "files": files,
                    }
                )
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor or len(found) >= limit * 4:
                break
    except SlackApiError as exc:
        log.warning("could not read the earlier thread: %s", slack_error(exc))
    return found[-limit:]


async def source_of_incoming(slack: AsyncWebClient, incoming: Incoming) -> Source:
    """Who wrote the new message, as its source (`bot.conversation.authors`)."""
    return await authors_of(slack).of_person(
        incoming.user_id, incoming.channel_id, incoming.ts, incoming.thread_ts
    )


@contextlib.asynccontextmanager
async def finding_author(slack: AsyncWebClient, incoming: Incoming) -> AsyncIterator[Task[Source]]:
    """Who wrote the message (`source_of_incoming`: a person's kind may be a Slack read,
    users.info, then cached), asked in the background while the block runs: a turn starts it
    as soon as the message is its own, beside the opening of its conversation, not after it.
    Cancelled if the block leaves without it (and its failure, if it failed unread,
    retrieved: it is the turn's only if the turn awaits it)."""
    task = asyncio.get_running_loop().create_task(
        source_of_incoming(slack, incoming), name="author"
    )
    try:
        yield task
    finally:
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()


async def store_with_files(
    db: Database,
    files: TurnFiles,
    slack: AsyncWebClient,
    conversation: Conversation,
    incoming: Incoming,
    earlier: Sequence[dict[str, Any]] = (),
    history: int = 0,
    author: Awaitable[Source] | None = None,
) -> History | None:
    """`store_user_message`, after reading the files the message (its event lists them) and
    `earlier` shared, with the new message's source (who wrote it); `author`: that, asked
    for already (`finding_author`)."""
    source = await (author if author is not None else source_of_incoming(slack, incoming))
    shared = [(str(m.get("slack_ts")), m.get("files") or []) for m in earlier]
    shared.append(
        (incoming.ts, slack_files({"files": list(incoming.files), "user": incoming.user_id}))
    )
    where = place(incoming.channel_id, incoming.user_id, incoming.is_dm)
    read = await files.read(incoming.team_id, [(t, f) for t, f in shared if f], where)
    return await store_user_message(db, conversation, incoming, earlier, read, source, history)


async def store_user_message(
    db: Database,
    conversation: Conversation,
    incoming: Incoming,
    earlier: Sequence[dict[str, Any]] = (),
    files: Mapping[str, Sequence[FileMessage]] | None = None,
    source: Source | None = None,
    history: int = 0,
) -> History | None:
    """The thread's earlier messages (when just joined) and the new one, in one transaction;
    each of the audience of the place it was said in, with its source (who wrote it), each
    after the files it shared (keyed by its Slack ts), so the newest message stays the
    request. `history` > 0: the conversation's history as it then stands (at most so many
    messages after its summary), read in that transaction; else None."""
    where = place(incoming.channel_id, incoming.user_id, incoming.is_dm)
    files = files or {}
    said = source.dumps() if source is not None else None
    if not earlier and not files.get(incoming.ts):  # the usual case: with other turns' messages
        message = UserMessage(
            conversation.id, incoming.text, incoming.ts, incoming.user_id, where, said, history
        )
        return await db.group.add(ADD_USER_MESSAGE, message)

    async def store(session: AsyncSession) -> History | None:
        for message in earlier:
            fields = {k: v for k, v in message.items() if k not in ("files", "source")}
            await _store_files(session, conversation, files.get(str(fields.get("slack_ts"))), where)
            added = await repo.add_message(session, conversation, **fields)
            added.audience = where
            if isinstance(message.get("source"), Source):
                added.source = message["source"].dumps()
        await _store_files(session, conversation, files.get(incoming.ts), where)
        await repo.add_message(
            session,
            conversation,
            Role.USER,
            incoming.text,
            slack_ts=incoming.ts,
            slack_user=incoming.user_id,
            audience=where,
            source=said,
        )
        if history <= 0:
            return None
        return (await load_histories(session, [Wanted(conversation.id, history)]))[0]

    return await db.group.run(store)  # with other turns' messages, in one transaction


async def _store_files(
    session: Any, conversation: Conversation, files: Sequence[FileMessage] | None, where: str
) -> None:
    for file in files or ():
        stored = await repo.add_message(
            session, conversation, Role.USER, file.content, slack_user=file.sharer
        )
        stored.audience, stored.source, stored.file_id = where, file.source, file.file_id
