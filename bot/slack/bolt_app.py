"""The Bolt app every listener is registered on, configured once: Slack's signature checked
with the signing secret (HTTP mode; Socket Mode needs none), Bolt's log through the bot's, and
every request's `client` under the workspace's budgets (`BudgetedApp`)."""

from __future__ import annotations

from pydantic import SecretStr
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.logs import bolt_logger
from bot.slack.web_client import BudgetedApp


def bolt_app(slack: AsyncWebClient, signing_secret: SecretStr | None) -> AsyncApp:
    return BudgetedApp(
        client=slack,
        signing_secret=signing_secret.get_secret_value() if signing_secret else "",
        logger=bolt_logger(slack),
        # Every listener acknowledges and hands its work to a tracked task (or, for modal
        # submissions, validates inline because the answer carries the errors), so the
        # request is answered when the listener returns, without Bolt's 10 ms ack polling.
        process_before_response=True,
    )
