"""Logging that never prints a secret, whatever a library puts in its messages or tracebacks.

Redaction happens on the finished line, after the formatter has added the traceback, so a token
inside an exception's text or a local variable's repr is caught too. Two nets: the exact values
of this process's configured secrets, and the shapes of secrets (Slack tokens of every kind,
`sk-` keys, bearer headers, passwords inside URLs, `token=`-like query parameters).

Configured secrets count from 4 characters. One of 8 or more is replaced wherever it appears; a
shorter one only where it stands on its own (not inside a longer run of letters and digits), so
a 4-character PIN hides in `pin=4711` or `"4711"` without blanking every word that contains it.
Shorter values are not redacted at all: they would blank half of every line.

HTTP clients (httpx, httpcore, the `mcp` SDK) log each request's URL at INFO, and a URL may carry
a token: they log at WARNING and above only.

`LOG_FORMAT=json` writes one JSON object per line; lines written inside `log_context(...)`
carry the conversation and proposal ids they concern.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.web.async_client import AsyncWebClient

_SHAPES = re.compile(
    r"\b(?:xox[a-z]-[A-Za-z0-9-]+|xoxe\.xox[a-z]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+"
    r"|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|lin_api_[A-Za-z0-9]{20,})"
)
_BEARER = re.compile(
    r"(?i)(\bbearer\s+|(?:token|authorization|api[_-]?key|password|secret|signature)"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',&]{6,})"
)
SHORTEST_SECRET = 4
ANYWHERE = 8  # secrets this long are replaced even inside longer words
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "mcp", "hpack", "uvicorn.access")
# Lines that say nothing to whoever starts the bot (alembic lists its plugins on every start).
NOISE = ("alembic.runtime.plugins",)
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]+:)([^@/\s]+)(@)")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "countersign_log_context", default=None
)


@contextmanager
def log_context(**ids: Any) -> Iterator[None]:
    """Lines logged inside carry these ids (e.g. conversation_id, proposal_id) in JSON logs."""
    token = _context.set({**(_context.get() or {}), **ids})
    try:
        yield
    finally:
        _context.reset(token)


class Redactor:
    def __init__(self, secrets: Sequence[str] = ()) -> None:
        self.secrets = sorted(
            {s for s in secrets if s and len(s) >= ANYWHERE}, key=len, reverse=True
        )
        short = sorted(
            {s for s in secrets if s and SHORTEST_SECRET <= len(s) < ANYWHERE},
            key=len,
            reverse=True,
        )
        self._short = (
            re.compile(
                r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, short)) + r")(?![A-Za-z0-9])"
            )
            if short
            else None
        )

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        if self._short is not None:
            text = self._short.sub("[redacted]", text)
        text = _SHAPES.sub(lambda m: m.group(0)[:5] + "[redacted]", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)}[redacted]", text)
        return _URL_PASSWORD.sub(r"\1[redacted]\3", text)


class RedactingFormatter(logging.Formatter):
    def __init__(self, redact: Redactor, json_lines: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.redact = redact
        self.json_lines = json_lines

    def format(self, record: logging.LogRecord) -> str:
        if not self.json_lines:
            return self.redact(super().format(record))
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **(getattr(record, "ids", None) or {}),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return self.redact(json.dumps(entry, ensure_ascii=False, default=str))


class RedactingFilter(logging.Filter):
    """Redacts a record's message in place and stamps it with the current log context; for
    handlers this module did not set up (the formatter above also redacts whole lines)."""

    def __init__(self, redact: Redactor | None = None) -> None:
        super().__init__()
        self.redact = redact or Redactor()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        record.ids = _context.get() or {}
        return True


def configure(level: str, secrets: Sequence[str] = (), json_lines: bool = False) -> None:
    redact = Redactor(secrets)
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter(redact, json_lines))
    handler.addFilter(RedactingFilter(redact))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in (*QUIET_LOGGERS, *NOISE):  # INFO lines with request URLs, or with nothing
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


class _BoltsOwnTokenNote(logging.Filter):
    """Bolt fills a missing `token` from `SLACK_BOT_TOKEN` in the environment and then warns
    that this token "will be unused" because `client` was given (slack_bolt/app/async_app.py,
    `AsyncApp.__init__`): a warning about its own default, on every start. The client carries
    that very token, so the note says nothing; only that exact line is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def bolt_logger(slack: AsyncWebClient) -> logging.Logger:
    """Bolt's logger, without Bolt's note about its own token default when that token is
    the client's (a different token in the environment would still be reported)."""
    logger = logging.getLogger("slack_bolt")
    if os.environ.get("SLACK_BOT_TOKEN") in (None, slack.token):
        logger.addFilter(_BOLTS_OWN_TOKEN_NOTE)
    else:
        logger.removeFilter(_BOLTS_OWN_TOKEN_NOTE)
    return logger


_BOLTS_OWN_TOKEN_NOTE = _BoltsOwnTokenNote()
