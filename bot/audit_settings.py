"""The audit chain's settings: part of `Settings`, and on their own what `countersign audit …`
reads. The audit commands only read (and checkpoint) the database, and Slack's copy of the
checkpoints when `AUDIT_CHECKPOINT_CHANNEL` is set, so they run without any model setting and
without `SLACK_BOT_TOKEN` unless that channel is to be read or posted to.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, HttpUrl, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from bot.durations import parse_duration
from bot.settings_help import SettingsError, describe

DEFAULT_DATABASE_URL = "sqlite:///countersign.db"


def database_url_valid(v: str) -> str:
    scheme = v.split("://", 1)[0].split("+", 1)[0].lower() if "://" in v else ""
    if scheme not in {"sqlite", "postgres", "postgresql"}:
        raise ValueError("must be a sqlite:/// or postgresql:// URL")
    try:
        make_url(v)
    except (ValueError, ArgumentError):  # its words could quote the password: not repeated
        raise ValueError(
            "cannot be read as a URL (a port that is not a number? characters such as @ : / "
            "in the password must be %-encoded)"
        ) from None
    return v


def log_level_valid(v: str) -> str:
    if v.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
    return v.upper()


def url_password(url: str) -> str | None:
    password = make_url(url).password if "://" in url else None
    return str(password) if password else None


class AuditSettings(BaseSettings):
    # The audit chain: rows keyed and checkpoints signed with this key (HMAC-SHA256; unset:
    # plain hashes, unsigned checkpoints), checkpointed how often (a duration: 30s, 15m, 1h,
    # 1d) and posted to this channel (unset: not posted).
    audit_signing_key: SecretStr | None = None
    audit_checkpoint_every: Annotated[float, Field(ge=1, le=90 * 86400), NoDecode] = 3600.0
    audit_checkpoint_channel: str | None = None

    @field_validator("audit_signing_key")
    @classmethod
    def _blank_is_unset(cls, v: SecretStr | None) -> SecretStr | None:
        return v if v is not None and v.get_secret_value() else None

    @field_validator("audit_checkpoint_every", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return parse_duration(v).total_seconds() if isinstance(v, str) else v

    @property
    def audit_key(self) -> str | None:
        """AUDIT_SIGNING_KEY's value, if set."""
        key = self.audit_signing_key
        return key.get_secret_value() if key is not None else None


class AuditCommandSettings(AuditSettings):
    """What `countersign audit verify|checkpoint|export` reads: the database, the audit
    settings, and Slack's only for the checkpoint channel."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    database_url: str = DEFAULT_DATABASE_URL
    slack_bot_token: SecretStr | None = None
    slack_api_url: HttpUrl = HttpUrl("https://slack.com/api/")
    log_format: Literal["text", "json"] = "text"
    log_level: str = Field(default="INFO", validation_alias=AliasChoices("LOG_LEVEL"))

    @field_validator("database_url")
    @classmethod
    def _database_scheme(cls, v: str) -> str:
        return database_url_valid(v)

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, v: str) -> str:
        return log_level_valid(v)

    @field_validator("slack_bot_token")
    @classmethod
    def _blank_token(cls, v: SecretStr | None) -> SecretStr | None:
        return v if v is not None and v.get_secret_value() else None

    def secret_values(self) -> list[str]:
        """Every configured secret, so logs can redact them by value."""
        values = [s.get_secret_value() for s in (self.audit_signing_key, self.slack_bot_token) if s]
        password = url_password(self.database_url)
        return values + ([password] if password else [])


def load_audit_settings(**overrides: Any) -> AuditCommandSettings:
    """The audit commands' settings, or `SettingsError` listing every problem."""
    try:
        return AuditCommandSettings(**overrides)
    except ValidationError as exc:
        raise SettingsError([describe(dict(e)) for e in exc.errors()]) from None
    except PydanticSettingsError as exc:
        raise SettingsError([str(exc)]) from None
