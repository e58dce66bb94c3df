"""Reading Slack API failures safely; kept in `bot.errors` so that every layer can use it."""

from bot.errors import slack_error

__all__ = ["slack_error"]
