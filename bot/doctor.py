"""`countersign doctor`: check settings, database, Slack and the model, and say how to fix
whatever is wrong."""

from __future__ import annotations

import asyncio

import openai
from redis.asyncio import Redis
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import text

from bot.config import Settings
from bot.db.session import Database
from bot.doctor_checks import TIMEOUT_SECONDS, Check
from bot.doctor_integrations import integration_checks
from bot.doctor_spend import check_prices
from bot.llm import make_client
from bot.slack.scopes import gaps


async def check_database(settings: Settings) -> Check:
    db = Database.from_url(settings.database_url)
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS), db.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:  # report any driver error in words
        return Check(
            "database",
            False,
            f"cannot connect ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). "
            "Check DATABASE_URL and that the server is running.",
        )
    finally:
        await db.dispose()
    return Check("database", True, f"connected ({db.engine.url.get_backend_name()})")


async def check_slack(settings: Settings) -> list[Check]:
    client = AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=str(settings.slack_api_url),
        timeout=TIMEOUT_SECONDS,
    )
    try:
        response = await client.auth_test()
    except SlackApiError as exc:
        error = exc.response.get("error")
        fix = {
            "invalid_auth": "SLACK_BOT_TOKEN is not valid: copy the Bot User OAuth Token again.",
            "not_authed": "SLACK_BOT_TOKEN is empty.",
            "account_inactive": "the app was uninstalled: reinstall it to the workspace.",
            "token_revoked": "the token was revoked: reinstall the app and copy the new token.",
        }.get(str(error), "see https://api.slack.com/methods/auth.test for this error.")
        return [Check("slack", False, f"auth.test said {error}: {fix}")]
    except Exception as exc:  # network errors come in many types
        return [
            Check(
                "slack",
                False,
                f"cannot reach {settings.slack_api_url} ({type(exc).__name__}). "
                "Check SLACK_API_URL and the network.",
            )
        ]
    who = f"authenticated as {response.get('user')} in {response.get('team')}"
    return [Check("slack", True, who), check_scopes(response.headers.get("x-oauth-scopes"))]


def check_scopes(header: str | None) -> Check:
    """The installed token's scopes (Slack names them in every answer's `x-oauth-scopes`
    header) against what the bot's calls need (`bot.slack.scopes`): each missing one in words,
    with what it breaks."""
    if header is None:
        return Check(
            "slack scopes", True, "not checked: Slack's answer did not say the token's scopes"
        )
    granted = {s.strip() for s in header.split(",") if s.strip()}
    missing = gaps(granted)
    if not missing:
        return Check(
            "slack scopes", True, f"the token has every scope the bot needs ({len(granted)})"
        )
    lines = "; ".join(gap.sentence() for gap in missing)
    return Check(
        "slack scopes",
        False,
        f"the token lacks {lines}. Add the missing scopes under OAuth & Permissions > Bot Token "
        "Scopes (manifest.yml lists them all), then reinstall the app to the workspace.",
    )


async def check_llm(settings: Settings) -> Check:
    client = make_client(settings).with_options(max_retries=0, timeout=TIMEOUT_SECONDS)
    try:
        models = [m.id async for m in client.models.list()]
    except openai.AuthenticationError:
        return Check("llm", False, "the server rejected OPENAI_API_KEY.")
    except openai.APIConnectionError:
        return Check(
            "llm",
            False,
            f"cannot reach {client.base_url}. Check OPENAI_BASE_URL and that the server runs.",
        )
    except openai.APIStatusError as exc:
        return Check("llm", False, f"the server answered {exc.status_code} to GET /models.")
    finally:
        await client.close()
    if models and settings.llm_model not in models:
        shown = ", ".join(sorted(models)[:8])
        return Check(
            "llm",
            False,
            f"model {settings.llm_model!r} is not served here (available: {shown}). "
            "Set LLM_MODEL to one of them.",
        )
    return Check("llm", True, f"{client.base_url} serves {settings.llm_model}")


async def check_redis(settings: Settings) -> Check:
    if not settings.redis_url:
        return Check("redis", True, "not configured (fine for one replica)")
    client = Redis.from_url(settings.redis_url, socket_connect_timeout=5)
    try:
        await client.ping()
    except RedisError as exc:
        return Check(
            "redis", False, f"cannot reach REDIS_URL ({type(exc).__name__}). Is Redis running?"
        )
    finally:
        await client.aclose()
    return Check("redis", True, "reachable: replicas will share the edit budget and locks")


async def run_checks(settings: Settings) -> list[Check]:
    mode = "Socket Mode" if settings.socket_mode else "HTTP mode"
    config = Check("settings", True, f"loaded; the bot will run in {mode}")
    if not settings.socket_mode and settings.slack_signing_secret is None:
        config = Check(
            "settings",
            False,
            "neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP mode) is set.",
        )
    database, slack, llm, redis = await asyncio.gather(
        check_database(settings), check_slack(settings), check_llm(settings), check_redis(settings)
    )
    integrations = await integration_checks(settings)
    return [config, database, *slack, llm, redis, check_prices(settings), *integrations]
