"""Logging that never prints a token, whatever a library puts in its messages."""

from __future__ import annotations

import logging
import re

_SECRET = re.compile(r"\b(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|sk-[A-Za-z0-9_-]{8,})")


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _SECRET.sub(lambda m: m.group(0)[:5] + "[redacted]", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def configure(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
