"""The policy in force: read from `POLICY_FILE` (and `APPROVAL_POLICIES`, mapped into the same
model), checked again every `POLL_SECONDS`. A changed file that is valid is in force at the
next check; an invalid one leaves the old version in force and logs the line and reason."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.policy.model import LEGACY_RULE, PolicyError, PolicyFile, Rule, load_text, version_of
from bot.spend.budget_model import Budget

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0  # a changed file is in force within this (the contract: 5 s)


def from_approval_policies(raw: dict[str, Any], pack_of: Callable[[str], str]) -> list[Rule]:
    """`APPROVAL_POLICIES` as ask rules: a tool's entry (over its pack's, over "*"), then a
    pack's entry (over "*"), then "*" for every tool, as the old per-tool lookup merged them."""
    star = raw.get("*", {})
    keys = [k for k in raw if k != "*"]
    tools = [k for k in keys if pack_of(k)]
    packs = [k for k in keys if k not in tools]
    rules = []
    for key in [*tools, *packs]:
        merged = {**star, **raw.get(pack_of(key), {}), **raw[key]}
        rules.append(_ask_rule(key, [key], merged))
    if star:
        rules.append(_ask_rule("*", ["*"], star))
    return rules


def _ask_rule(key: str, tools: list[str], entry: dict[str, Any]) -> Rule:
    minutes = entry.get("expires_after_minutes")
    return Rule(
        name=f"{LEGACY_RULE}{key}]",
        tools=tools,
        outcome="ask",
        approvers=list(entry.get("approvers", [])),
        approvals_required=int(entry.get("approvals_required", 1)),
        four_eyes=bool(entry.get("four_eyes", False)),
        timeout=f"{float(minutes) * 60:g}s" if minutes is not None else None,
    )


@dataclass(frozen=True)
class InForce:
    policy: PolicyFile
    version: str


def read_file(path: Path) -> tuple[PolicyFile, str]:
    """The file's policy and version; `PolicyError` (line, reason) if it is invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(None, f"cannot read {path} ({exc.strerror})") from None
    policy = load_text(text)
    return policy, version_of(text, policy.version)


class PolicySource:
    """Holds the policy in force and keeps it in step with its file."""

    def __init__(
        self,
        path: Path | None,
        approval_policies: dict[str, Any] | None = None,
        pack_of: Callable[[str], str] = lambda _name: "",
        *,
        required: bool = True,
    ) -> None:
        """`required=False`: the file may not exist (yet); until it does, `APPROVAL_POLICIES`
        and the default decide, and once it is created it is in force like an edit."""
        self.path = path
        self.required = required
        self._approval_policies = approval_policies or {}
        self._pack_of = pack_of
        self.legacy = from_approval_policies(self._approval_policies, pack_of)
        self._file: tuple[PolicyFile, str] | None = None
        self._unreadable = False
        self._seen: bytes | None = None
        self._mtime: float | None = None
        self.current = self._build(None, None)  # replaced by `load` when there is a file
        # Called (on the event loop) after `watch` put a new version in force.
        self.on_change: Callable[[], object] | None = None

    def budgets(self) -> tuple[list[Budget], str]:
        """The budgets in force and the file's time zone: what `bot.spend.ledger.Spend` reads
        at every call, so a reload applies to the next model call."""
        return self.current.policy.budgets, self.current.policy.timezone

    def names_approvers(self) -> bool:
        """Whether an ask rule names approvers (then others than the requester decide)."""
        return any(r.approvers for r in self.current.policy.rules if r.outcome == "ask")

    def _build(self, policy: PolicyFile | None, version: str | None) -> InForce:
        if policy is None:
            legacy = PolicyFile(version=1, default="ask", rules=self.legacy)
            text = legacy.model_dump_json()
            return InForce(legacy, f"env@{hashlib.sha256(text.encode()).hexdigest()[:12]}")
        if self.legacy:
            names = {r.name for r in policy.rules}
            extra = [r for r in self.legacy if r.name not in names]
            policy = policy.model_copy(update={"rules": [*policy.rules, *extra]})
        return InForce(policy, version or "")

    def load(self) -> InForce:
        """Read the file now; `PolicyError` if it is invalid (at start: refuse to run)."""
        if self.path is None or (not self.required and not self.path.exists()):
            return self.current
        data = self.path.read_bytes() if self.path.exists() else None
        policy, version = read_file(self.path)
        self._seen, self._mtime = data, self.path.stat().st_mtime
        self._file = (policy, version)
        self.current = self._build(policy, version)
        return self.current

    def remap(self) -> None:
        """Map `APPROVAL_POLICIES` again, once every tool is known (MCP servers' tools are
        registered at start, after the policy was first read)."""
        self.legacy = from_approval_policies(self._approval_policies, self._pack_of)
        self.current = self._build(*self._file) if self._file else self._build(None, None)

    def refresh(self) -> bool:
        """Check the file once; True if a new version is now in force."""
        if self.path is None:
            return False
        if not self.required and self._file is None and not self.path.exists():
            return False  # no file yet: nothing to say
        try:
            mtime = self.path.stat().st_mtime
            data = self.path.read_bytes()
        except OSError as exc:
            if not self._unreadable:  # once, not every poll
                log.error("policy file %s unreadable (%s): the old version stays", self.path, exc)
            self._unreadable = True
            return False
        self._unreadable = False
        if data == self._seen and mtime == self._mtime:
            return False
        if data == self._seen:
            self._mtime = mtime
            return False
        old = self.current.version
        try:
            self.load()
        except PolicyError as exc:
            self._seen, self._mtime = data, mtime  # logged once per edit
            log.error(
                "policy file %s is invalid, version %s stays in force: %s", self.path, old, exc
            )
            return False
        log.info("policy version %s in force (was %s)", self.current.version, old)
        return True

    async def watch(self, interval: float = POLL_SECONDS) -> None:
        """Poll the file until cancelled."""
        while True:
            await asyncio.sleep(interval)
            if await asyncio.to_thread(self.refresh) and self.on_change is not None:
                self.on_change()
