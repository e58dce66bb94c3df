"""One reply message streamed with Slack's native methods (`chat.startStream`, `appendStream`,
`stopStream`), in standard Markdown.

Why not slack_sdk's `AsyncChatStream`: it flushes when its buffer reaches a size, while our
appends go out when the workspace's scheduler grants them (the reply refreshed longest ago
first), and it cannot start a stream before the first text arrives. The methods themselves are
slack_sdk's.

Text rules this module keeps:
* model text is escaped (`&`, `<`, `>`) so `<!channel>` or `<@U…>` never pings anyone;
* Slack drops the leading whitespace of an appended piece, so a piece never ends where the
  next would begin with whitespace: an unfinished reply is sent up to the start of its last
  word, and the rest goes with the next append or the final one;
* one message carries at most `max_chars` (markdown is limited to 12,000 characters per
  call); a longer reply continues in ordinary messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.models.messages.chunk import TaskUpdateChunk

from bot.errors import slack_error
from bot.metrics import SLACK_EDITS
from bot.poster import NOTHING_PRIVATE, Outlet
from bot.slack.render import escape

# Errors after which this stream takes no more appends: the message is then finished with
# `chat.update` (Slack ends streams after about five minutes, and on Stop).
STREAM_GONE = frozenset(
    {
        "message_not_in_streaming_state",
        "streaming_state_conflict",
        "stopped_by_user",
        "message_not_found",
    }
)
NATIVE_MAX_CHARS = 11_000


class StreamGone(Exception):
    """The stream no longer takes text; finish the message by `chat.update`."""


def word_boundary(text: str, start: int) -> int:
    """The largest cut in `text[start:]` after which the rest starts with a character already
    known not to be whitespace: the start of the last word (the word itself may still grow),
    or `start` if there is no such cut."""
    end = len(text)
    while end > start and text[end - 1].isspace():
        end -= 1
    while end > start and not text[end - 1].isspace():
        end -= 1
    return end


def source_index(source: str, sent: str) -> int:
    """How much of `source` the escaped text `sent` (a prefix of `escape(source)` that ends
    between characters) carries."""
    length = 0
    for index, char in enumerate(source):
        if length >= len(sent):
            return index
        length += len(escape(char))
    return len(source)


def native_cut(source: str, max_chars: int) -> int:
    """How much of `source` one native message carries: all of it if it fits escaped, else up
    to a line or word break (never inside an escape)."""
    if len(escape(source)) <= max_chars:
        return len(source)
    cut = fits = 0
    length = 0
    for index, char in enumerate(source):
        length += len(escape(char))
        if length > max_chars:
            break
        fits = index + 1
        if char.isspace() and index + 1 < len(source) and not source[index + 1].isspace():
            cut = index + 1
    return cut or fits


def _gone(exc: SlackApiError) -> bool:
    return slack_error(exc) in STREAM_GONE


@dataclass
class NativeMessage:
    outlet: Outlet  # the reply's destination (`bot.poster`): channel, thread, the check
    ts: str
    sent: str = ""  # the markdown Slack has, exactly
    stopped: bool = False
    ended: str | None = None  # Slack ended the stream (e.g. a person pressed Stop)
    tasks: dict[str, TaskUpdateChunk] = field(default_factory=dict)  # not yet sent

    @classmethod
    async def start(cls, outlet: Outlet, recipient_user: str, recipient_team: str) -> NativeMessage:
        """A stream with no text yet (it carries nothing until its first append)."""
        response = await outlet.start_stream(
            recipient_user, recipient_team, carries=NOTHING_PRIVATE
        )
        return cls(outlet, str(response["ts"]))

    @property
    def channel(self) -> str:
        return self.outlet.channel

    def task(self, task_id: str, title: str, status: str, details: str | None = None) -> None:
        """Queue a task update for the next append (a later state replaces an unsent one)."""
        self.tasks[task_id] = TaskUpdateChunk(
            id=task_id, title=title[:250], status=status, details=details
        )

    def next_piece(self, target: str, final: bool) -> str:
        """What of `target` to send now (all of it once final)."""
        if not target.startswith(self.sent):
            raise ValueError("the reply's text changed behind what was sent")
        if final:
            return target[len(self.sent) :]
        cut = word_boundary(target, len(self.sent))
        return target[len(self.sent) : cut]

    @property
    def has_news(self) -> bool:
        return bool(self.tasks)

    async def append(self, target: str, final: bool, carries: str) -> bool:
        """Send the next piece of `target` (of audience `carries`) and the queued task
        updates; False if there was nothing to send."""
        piece = self.next_piece(target, final)
        chunks: list[TaskUpdateChunk] = list(self.tasks.values())
        if not piece and not chunks:
            return False
        try:
            await self.outlet.append_stream(
                self.ts, piece or None, list(chunks) or None, carries=carries
            )
        except SlackApiError as exc:
            if _gone(exc):
                raise StreamGone(slack_error(exc)) from exc
            raise
        SLACK_EDITS.labels(kind="append").inc()
        self.sent += piece
        for task_id, chunk in list(self.tasks.items()):
            if any(chunk is c for c in chunks):
                del self.tasks[task_id]
        return True

    async def stop(
        self, blocks: list[dict[str, Any]] | None = None, target: str = "", *, carries: str
    ) -> None:
        """Close the stream; with `target` (of audience `carries`), the same call carries
        whatever of it is not sent yet (and the queued task updates), so a final never needs
        an append first."""
        piece = self.next_piece(target, True) if target else ""
        chunks: list[TaskUpdateChunk] = list(self.tasks.values())
        try:
            await self.outlet.stop_stream(
                self.ts,
                carries=carries,
                markdown_text=piece or None,
                chunks=list(chunks) or None,
                blocks=blocks,
            )
        except SlackApiError as exc:
            if _gone(exc):
                raise StreamGone(slack_error(exc)) from exc
            raise
        self.sent += piece
        self.tasks.clear()
        self.stopped = True
