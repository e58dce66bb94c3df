"""Settings: read once from the environment (and `.env`) into one typed object.

Every problem is reported at once, naming the variable and what it should hold; the CLI turns a
`SettingsError` into that message and exit code 2, with no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    HttpUrl,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError
from sqlalchemy.engine import make_url

from bot.audit_settings import (
    DEFAULT_DATABASE_URL,
    AuditSettings,
    database_url_valid,
    log_level_valid,
)
from bot.policy_settings import PolicySettings
from bot.settings_help import HINTS, SettingsError, describe
from bot.spend.settings import SpendSettings
from bot.suggested_prompts import DEFAULT_PROMPTS, SuggestedPrompt
from bot.thread_settings import ThreadSettings
from bot.tools.integration_settings import IntegrationSettings

__all__ = [
    "DEFAULT_PROMPTS",
    "DEFAULT_SYSTEM_PROMPT",
    "Settings",
    "SettingsError",
    "SuggestedPrompt",
    "load_settings",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are Countersign, a helpful assistant working inside Slack. Answer concisely and use "
    "Markdown where it helps. Several teammates may speak in one thread; each user message "
    "carries the speaker's Slack user id in its `name`."
)


def _default_database_url() -> str:
    return DEFAULT_DATABASE_URL


class Settings(
    IntegrationSettings, AuditSettings, PolicySettings, ThreadSettings, SpendSettings, BaseSettings
):
    """All configuration of one Countersign process."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    slack_bot_token: SecretStr
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_api_url: HttpUrl = HttpUrl("https://slack.com/api/")

    openai_api_key: SecretStr
    openai_base_url: HttpUrl | None = None
    llm_model: str = "gpt-4o-mini"
    llm_timeout_seconds: Annotated[float, Field(ge=1, le=600)] = 60.0
    llm_max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    # The longest one model request may take, from sending it to its last token (the read
    # time-out above only bounds each silence); a reply cut by it ends with a note saying so.
    model_deadline_seconds: Annotated[float, Field(ge=1, le=3600)] = 300.0
    # Names each conversation from its first request: a model ("" = LLM_MODEL), or "off" for
    # its first words only. A title call never delays or fails a reply; past the timeout the
    # first words stay.
    title_model: str = ""
    title_timeout_seconds: Annotated[float, Field(gt=0, le=60)] = 5.0

    database_url: str = Field(default_factory=_default_database_url)
    database_pool_size: Annotated[int, Field(ge=2, le=200)] = 10
    redis_url: str | None = None

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    system_prompt_file: Path | None = None
    history_window_messages: Annotated[int, Field(ge=2, le=10_000)] = 200
    token_budget: Annotated[int, Field(ge=1_000, le=2_000_000)] = 16_000
    reply_tokens: Annotated[int, Field(ge=100, le=200_000)] = 2_000
    tool_result_tokens: Annotated[int, Field(ge=100, le=200_000)] = 2_000
    summary_tokens: Annotated[int, Field(ge=100, le=20_000)] = 600

    streaming: Literal["auto", "native", "edit"] = "auto"
    # Images shared in a thread go to the model as image parts: `auto` until the model refuses
    # one (then not, with a note), `on` always, `off` never (the model is told one was shared).
    vision: Literal["auto", "on", "off"] = "auto"
    slack_edit_budget_per_minute: Annotated[int, Field(ge=1, le=600)] = 50
    # Where each method's learned budget starts: Slack's documented floors (Tier 4 appends
    # "100+", Tier 2 starts and stops "20+", chat.update ~50). The bot learns from there: a
    # 429 lowers the method's rate, calls that succeed at the limit raise it slowly.
    slack_append_budget_per_minute: Annotated[int, Field(ge=10, le=6000)] = 100
    slack_append_min_interval_seconds: Annotated[float, Field(ge=0.1, le=60)] = 0.5
    slack_stream_starts_per_minute: Annotated[int, Field(ge=1, le=600)] = 20
    # Every other method's budget is Slack's documented floor (bot/slack/method_limits.py)
    # times this: for a workspace known to allow more (and for fakes that limit nothing).
    slack_call_budget_scale: Annotated[float, Field(ge=1, le=100)] = 1.0
    # Slack's tier for reading a conversation (conversations.replies / .history): 3 (50 a
    # minute); 1 (once a minute, 15 messages a page) for a commercially distributed
    # non-Marketplace app created after 2025-05-29.
    slack_history_tier: Literal[1, 3] = 3
    slack_edit_min_interval_seconds: Annotated[float, Field(ge=0.1, le=60)] = 1.0
    slack_message_max_chars: Annotated[int, Field(ge=500, le=3900)] = 3500
    # Shown when a person opens the bot's DM (JSON list of {"title", "message"}, at most 4;
    # [] shows none).
    suggested_prompts: Annotated[list[SuggestedPrompt], Field(max_length=4), NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_PROMPTS)
    )

    tool_packs: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["bot.tools.packs.tasks", "bot.tools.packs.slack"]
    )
    # APPROVAL_POLICIES and POLICY_FILE are PolicySettings'.
    proposal_expiry_minutes: Annotated[float, Field(ge=1, le=10080)] = 15.0
    proposal_reminder_minutes: Annotated[float, Field(ge=0, le=10080)] = 3.0
    max_tool_rounds: Annotated[int, Field(ge=1, le=50)] = 8
    max_tool_calls_per_round: Annotated[int, Field(ge=1, le=128)] = 8
    thread_import_messages: Annotated[int, Field(ge=0, le=1000)] = 50
    tool_timeout_seconds: Annotated[float, Field(ge=1, le=600)] = 60.0
    public_base_url: HttpUrl | None = None
    link_ttl_hours: Annotated[float, Field(gt=0, le=24 * 90)] = 168.0
    sweep_interval_seconds: Annotated[float, Field(ge=0.05, le=300)] = 15.0
    lease_seconds: Annotated[float, Field(ge=0.5, le=3600)] = 30.0
    retention_days: Annotated[int, Field(ge=0, le=36_500)] = 90
    # The audit chain's settings (AUDIT_SIGNING_KEY and the checkpoints') are AuditSettings'.

    shutdown_grace_seconds: Annotated[float, Field(ge=0, le=600)] = 20.0
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    metrics_host: str = "127.0.0.1"
    metrics_token: SecretStr | None = None
    log_format: Literal["text", "json"] = "text"
    log_level: str = Field(default="INFO", validation_alias=AliasChoices("LOG_LEVEL"))

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token_shape(cls, v: SecretStr) -> SecretStr:
        if not v.get_secret_value().startswith("xoxb-"):
            raise ValueError("must start with xoxb-")
        return v

    @field_validator("slack_app_token")
    @classmethod
    def _app_token_shape(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value():
            return None
        if v is not None and not v.get_secret_value().startswith("xapp-"):
            raise ValueError("must start with xapp-")
        return v

    @field_validator("database_url")
    @classmethod
    def _database_scheme(cls, v: str) -> str:
        return database_url_valid(v)

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, v: str | None) -> str | None:
        if v and not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis:// URL")
        return v or None

    @field_validator("tool_packs", mode="before")
    @classmethod
    def _packs(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @field_validator("tool_packs")
    @classmethod
    def _packs_load(cls, v: list[str]) -> list[str]:
        from bot.tools.catalog import ToolRegistry, UnknownPack

        try:
            ToolRegistry.from_packs(v)
        except (UnknownPack, ValueError) as exc:
            raise ValueError(str(exc)) from None
        return v

    @field_validator("suggested_prompts", mode="before")
    @classmethod
    def _prompts_json(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return json.loads(v) if v.strip() else []
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
        return v

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, v: str) -> str:
        return log_level_valid(v)

    @model_validator(mode="after")
    def _prompt_file(self) -> Settings:
        if self.system_prompt_file is not None:
            try:
                self.system_prompt = self.system_prompt_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(
                    f"SYSTEM_PROMPT_FILE: cannot read {self.system_prompt_file} ({exc.strerror})"
                ) from exc
        return self

    def secret_values(self) -> list[str]:
        """Every configured secret, so logs can redact them by value."""
        secrets = [
            self.slack_bot_token,
            self.slack_app_token,
            self.slack_signing_secret,
            self.audit_signing_key,
        ]
        values = [s.get_secret_value() for s in [*secrets, self.openai_api_key] if s]
        for url in (self.database_url, self.redis_url or ""):
            password = make_url(url).password if "://" in url else None
            if password:
                values.append(str(password))
        return values + self.integration_secrets()

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    def require_http_mode(self) -> None:
        """HTTP mode verifies every request's signature, so it needs the signing secret."""
        if self.slack_signing_secret is None:
            raise SettingsError(
                [f"SLACK_SIGNING_SECRET is missing: set it to {HINTS['SLACK_SIGNING_SECRET']}."]
            )


def load_settings(**overrides: Any) -> Settings:
    """Build the settings or raise `SettingsError` listing every problem."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError([describe(dict(e)) for e in exc.errors()]) from None
    except PydanticSettingsError as exc:  # a value the settings sources could not even read
        raise SettingsError([str(exc)]) from None
