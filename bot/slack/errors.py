"""Reading Slack API failures safely (a proxy's HTML error page has no `error` field)."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError


def slack_error(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    if isinstance(data, dict) and data.get("error"):
        return str(data["error"])
    return f"http_{getattr(exc.response, 'status_code', 'error')}"
