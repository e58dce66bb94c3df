"""The Bolt app every listener is registered on, configured once: Slack's signature checked
with the signing secret (HTTP mode; Socket Mode needs none), Bolt's log through the bot's, and
every request's `client` under the workspace's budgets (`BudgetedClients`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import SecretStr
from slack_bolt.async_app import AsyncApp
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.logs import bolt_logger
from bot.slack.web_client import BudgetedWebClient


class BudgetedClients(AsyncMiddleware):
    """Bolt makes a plain `AsyncWebClient` for each request (the `client` a listener is given,
    and the one its `say` is made from): this puts a `BudgetedWebClient` under the app
    client's budgets in its place, so a listener's calls take their slots like the bot's own.

    Given to Bolt as its public `before_authorize` hook, it runs before the authorization
    middleware (whose `auth.test` is then the budgeted client's, asked once per process) and
    before any listener; `say` is made from `context.client` when a listener first asks for it,
    so it is made from this one. Only Slack's signature check comes earlier, and it makes no
    call."""

    def __init__(self, client: BudgetedWebClient) -> None:
        self.client = client

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],  # Bolt passes it by this name
    ) -> BoltResponse | None:
        req.context["client"] = self.client.for_team(req.context.team_id)
        return await next()


def bolt_app(slack: AsyncWebClient, signing_secret: SecretStr | None) -> AsyncApp:
    return AsyncApp(
        # Named: without a name Bolt takes its caller's file name from `inspect.stack()`, which
        # reads the source of every frame on the stack (150 ms of a bot process's start here,
        # and 13 ms or more for each bot a test starts).
        name="countersign",
        client=slack,
        signing_secret=signing_secret.get_secret_value() if signing_secret else "",
        logger=bolt_logger(slack),
        before_authorize=BudgetedClients(slack) if isinstance(slack, BudgetedWebClient) else None,
        # Every listener acknowledges and hands its work to a tracked task (or, for modal
        # submissions, validates inline because the answer carries the errors), so the
        # request is answered when the listener returns, without Bolt's 10 ms ack polling.
        process_before_response=True,
    )
