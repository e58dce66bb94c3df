"""`countersign policy check|test|replay`: lint the policy file, run its fixtures (for CI),
and replay recorded decisions under a policy to see what it would change."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.policy.engine import Facts, decide
from bot.policy.lint import warnings
from bot.policy.model import PolicyError
from bot.policy.source import read_file
from bot.spend.raise_action import RAISE_PACK, RAISE_TOOL
from bot.tools.catalog import ToolRegistry, UnknownPack


def add_parser(commands: Any) -> None:
    policy = commands.add_parser("policy", help="check, test and replay the policy file")
    sub = policy.add_subparsers(dest="policy_command", required=True)
    check = sub.add_parser("check", help="validate the policy file (exit 1 if invalid)")
    check.add_argument("file", nargs="?", help="default: POLICY_FILE, else ./policy.yaml")
    check.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    test = sub.add_parser("test", help="run fixtures: proposal -> expected outcome")
    test.add_argument("fixtures", help="YAML list of {tool, args, ..., expect}")
    test.add_argument("--policy", help="default: POLICY_FILE, else ./policy.yaml")
    replay = sub.add_parser("replay", help="replay recorded decisions under a policy")
    replay.add_argument("--since", default="30d", help="how far back: 30d, 12h (default 30d)")
    replay.add_argument("--policy", help="default: POLICY_FILE, else ./policy.yaml")


def policy_path(given: str | None) -> Path:
    return Path(given or os.environ.get("POLICY_FILE") or "policy.yaml")


def run(args: argparse.Namespace, database_url: str | None = None) -> int:
    if args.policy_command == "check":
        return check(policy_path(args.file), args.strict)
    if args.policy_command == "test":
        return run_fixtures(policy_path(args.policy), Path(args.fixtures))
    from bot.policy.replay import replay

    assert database_url is not None  # replay reads the settings' database
    return replay(policy_path(args.policy), args.since, database_url)


def check(path: Path, strict: bool = False) -> int:
    """Exit 1 if the file is invalid (or, with `strict`, has warnings), else 0."""
    try:
        policy, version = read_file(path)
    except PolicyError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 1
    shadow = sum(r.shadow for r in policy.rules)
    print(
        f"{path}: valid, version {version}, {len(policy.rules)} rule(s) "
        f"({shadow} shadow), default {policy.default}"
    )
    known = _registry()
    # The budgets' raise is the bot's own action (never a pack's): rules may name it.
    tools = None if known is None else [(t.name, t.pack) for t in known] + [RAISE_ACTION]
    found = warnings(policy, optional_fields(known), tools, not_loaded_here)
    for warning in found:
        print(f"{path}: warning: {warning}")
    return 1 if found and strict else 0


class Fixture(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    tool: str
    pack: str = ""
    args: dict[str, Any] = Field(default_factory=dict)
    channel: str = "C0"
    requester: str = "U0"
    groups: list[str] = Field(default_factory=list)
    calls_in_thread: int = 0
    calls_today: int = 0
    expect: str
    rule: str | None = None  # the rule that should decide (optional)


def run_fixtures(path: Path, fixtures: Path) -> int:
    """Exit 0 when every fixture gets its expected outcome, 1 if one does not, 2 if the
    policy or the fixtures are invalid."""
    try:
        policy, version = read_file(path)
    except PolicyError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2
    try:
        raw = yaml.safe_load(fixtures.read_text(encoding="utf-8"))
        cases = [Fixture.model_validate(c) for c in raw or []]
    except (OSError, yaml.YAMLError, ValidationError, TypeError) as exc:
        print(f"{fixtures}: invalid fixtures: {exc}", file=sys.stderr)
        return 2
    failed = 0
    known = _registry()
    for number, case in enumerate(cases, 1):
        pack, args = with_defaults(known, case.tool, case.pack, case.args)
        tool = known.get(case.tool) if known is not None else None
        facts = Facts(
            case.tool,
            pack,
            args,
            case.channel,
            case.requester,
            tuple(case.groups),
            case.calls_in_thread,
            case.calls_today,
            read_only=tool is not None and not tool.requires_approval,
        )
        got = decide(policy, version, facts)
        ok = got.outcome == case.expect and (case.rule is None or got.rule == case.rule)
        label = case.name or f"fixture {number}"
        if ok:
            print(f"ok    {label}: {got.outcome} ({got.rule or 'default'})")
        else:
            failed += 1
            wanted = case.expect + (f" by {case.rule}" if case.rule else "")
            print(f"FAIL  {label}: expected {wanted}, got {got.outcome} by {got.rule or 'default'}")
    print(f"{len(cases) - failed} passed, {failed} failed (policy version {version})")
    return 1 if failed else 0


DEFAULT_PACKS = "bot.tools.packs.tasks,bot.tools.packs.slack"


RAISE_ACTION = (RAISE_TOOL, RAISE_PACK)


def _registry() -> ToolRegistry | None:
    """The tools of `TOOL_PACKS` (as the bot loads them), to give fixtures their packs and
    schema defaults; None if they cannot be loaded here."""
    modules = [m.strip() for m in os.environ.get("TOOL_PACKS", DEFAULT_PACKS).split(",")]
    try:
        return ToolRegistry.from_packs([m for m in modules if m])
    except (UnknownPack, ValueError) as exc:
        print(f"warning: tool packs not loaded ({exc}): no packs or defaults", file=sys.stderr)
        return None


def not_loaded_here(pattern: str) -> bool:
    """A tool name `policy check` cannot know: an integration's (`github_…`, `linear_…`) or an
    MCP server's (`SERVER__TOOL`, or any bare name while `MCP_SERVERS` is set: a server's
    pack)."""
    head = pattern.split("_", 1)[0]
    if head in ("github", "linear") or "__" in pattern:
        return True
    return bool(os.environ.get("MCP_SERVERS")) and "_" not in pattern


def optional_fields(known: ToolRegistry | None) -> dict[tuple[str, str], list[str]]:
    """Each known tool's arguments a condition may find missing or null once the tool's
    defaults are applied: optional, with no default or a null one."""
    if known is None:
        return {}
    found: dict[tuple[str, str], list[str]] = {}
    for tool in known:
        if tool.input_schema is not None:
            required = set(tool.input_schema.get("required") or ())
            properties = tool.input_schema.get("properties") or {}
            found[(tool.name, tool.pack)] = [
                f
                for f, spec in properties.items()
                if f not in required and (not isinstance(spec, dict) or spec.get("default") is None)
            ]
        else:
            found[(tool.name, tool.pack)] = [
                f
                for f, info in tool.arguments.model_fields.items()
                if not info.is_required() and info.get_default(call_default_factory=True) is None
            ]
    return found


def with_defaults(
    known: ToolRegistry | None, name: str, pack: str, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The tool's pack (unless given) and `args` with the schema's defaults applied, as the
    bot decides on validated arguments."""
    tool = known.get(name) if known is not None else None
    if tool is None or known is None:
        return pack, args
    return pack or tool.pack, known.with_defaults(name, args)
