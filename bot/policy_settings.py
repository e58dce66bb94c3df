"""Which rules decide the bot's writes: `POLICY_FILE` (by default `policy.yaml` in the
working directory, when there is one) and the older `APPROVAL_POLICIES` JSON. Both are checked
when the settings are read, so a rule that cannot be read stops the start with the settings'
one clear message (naming the file's line, or the JSON's key) instead of failing a click later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode

DEFAULT_POLICY_FILE = Path("policy.yaml")


class PolicySettings(BaseSettings):
    approval_policies: Annotated[dict[str, Any], NoDecode] = Field(default_factory=dict)
    policy_file: Path | None = None  # default: policy.yaml in the working directory, if there

    @field_validator("approval_policies", mode="before")
    @classmethod
    def _policies_json(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return json.loads(v) if v.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
        return v

    @field_validator("approval_policies")
    @classmethod
    def _policies(cls, v: dict[str, Any]) -> dict[str, Any]:
        from bot.approvals.policy import Policies

        try:
            Policies.parse(v)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where}: {first['msg']}") from None
        return v

    @model_validator(mode="after")
    def _policy_file_valid(self) -> Self:
        """An invalid policy file stops the start, naming its line and what is wrong."""
        path = self.policy_path
        if path is not None:
            from bot.policy.model import PolicyError
            from bot.policy.source import read_file

            try:
                read_file(path)
            except PolicyError as exc:
                raise ValueError(f"POLICY_FILE: {path}: {exc}") from None
        return self

    @property
    def policy_path(self) -> Path | None:
        if self.policy_file is not None:
            return self.policy_file
        return DEFAULT_POLICY_FILE if DEFAULT_POLICY_FILE.is_file() else None

    @property
    def policy_watched(self) -> tuple[Path, bool]:
        """The file the bot watches, and whether it must exist: `POLICY_FILE` must; the
        default `policy.yaml` comes into force when it is created, without a restart."""
        if self.policy_file is not None:
            return self.policy_file, True
        return DEFAULT_POLICY_FILE.absolute(), False
