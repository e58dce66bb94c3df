"""The `countersign` command: run | serve | try | migrate | doctor | purge | audit | policy."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from bot.config import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from bot.audit_settings import AuditCommandSettings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="countersign", description="A human-in-the-loop AI assistant for Slack."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="start the bot (Socket Mode if SLACK_APP_TOKEN is set)")
    serve = commands.add_parser("serve", help="start the bot in HTTP mode")
    serve.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a server binds all by default
    serve.add_argument("--port", type=int, default=3000)
    trial = commands.add_parser(
        "try", help="try it without Slack: a local Slack-like sandbox and page (SANDBOX_PORT)"
    )
    trial.add_argument("--port", type=int, default=None, help="default: SANDBOX_PORT or 3000")
    trial.add_argument(
        "--keep", action="store_true", help="keep the bot's database when the sandbox stops"
    )
    commands.add_parser("migrate", help="bring the database schema up to date")
    commands.add_parser("doctor", help="check configuration, database, Slack and the model")
    purge = commands.add_parser("purge", help="delete conversations older than the retention")
    purge.add_argument(
        "--older-than-days", type=int, default=None, help="override RETENTION_DAYS for this run"
    )
    audit = commands.add_parser("audit", help="the audit trail of approval-gated actions")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    export = audit_commands.add_parser("export", help="write the audit trail as CSV or JSONL")
    export.add_argument("--format", choices=["csv", "jsonl"], default="csv")
    export.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")
    export.add_argument(
        "--records",
        choices=["actions", "feedback"],
        default="actions",
        help="the actions' audit trail (default) or the feedback given on answers",
    )
    audit_commands.add_parser(
        "verify", help="recompute the audit chain and check it against the checkpoints"
    )
    audit_commands.add_parser("checkpoint", help="write (and post) an audit checkpoint now")

    from bot.policy.cli import add_parser as add_policy

    add_policy(commands)
    return parser


async def _run(settings: Settings, command: str, host: str, port: int) -> int:
    from bot.app import Countersign
    from bot.server import run_socket_mode, serve_http

    countersign = Countersign.build(settings)
    if command == "run" and settings.socket_mode:
        await run_socket_mode(countersign)
    else:
        await serve_http(countersign, host, port)
    return 0


async def _migrate(settings: AuditCommandSettings) -> int:
    from bot.db.migrate import upgrade_to_head
    from bot.db.session import Database
    from bot.startup import reach_database

    db = Database.from_url(settings.database_url)
    try:
        await reach_database(db)
        await upgrade_to_head(db)
    finally:
        await db.dispose()
    print(f"database is up to date ({db.engine.url.render_as_string(hide_password=True)})")
    return 0


async def _audit_export(settings: AuditCommandSettings, fmt: str, records: str, out: TextIO) -> int:
    from bot.db.migrate import upgrade_to_head
    from bot.db.session import Database
    from bot.records.audit_export import export
    from bot.startup import reach_database

    db = Database.from_url(settings.database_url)
    try:
        await reach_database(db)
        await upgrade_to_head(db)
        count = await export(db, out, fmt, records)
    finally:
        await db.dispose()
    what = "feedback record(s)" if records == "feedback" else "proposal(s)"
    print(f"exported {count} {what}", file=sys.stderr)
    return 0


async def _audit_chain(settings: AuditCommandSettings, command: str) -> int:
    from bot.db.migrate import upgrade_to_head
    from bot.db.session import Database
    from bot.records.audit_checkpoints import write_checkpoints
    from bot.records.audit_verify import render, verify
    from bot.slack.audit_checkpoints import posted_checkpoints, poster
    from bot.startup import reach_database

    key, channel = settings.audit_key, settings.audit_checkpoint_channel
    db = Database.from_url(settings.database_url, audit_key=key)
    slack = None
    if channel and settings.slack_bot_token is not None:
        from slack_sdk.web.async_client import AsyncWebClient

        slack = AsyncWebClient(
            token=settings.slack_bot_token.get_secret_value(), base_url=str(settings.slack_api_url)
        )
    unread = f"AUDIT_CHECKPOINT_CHANNEL is set, but SLACK_BOT_TOKEN is not: {channel} is not"
    try:
        await reach_database(db)
        await upgrade_to_head(db)
        if command == "checkpoint":
            done = await write_checkpoints(db, key)
            for checkpoint in done.written:
                if slack is not None and channel:
                    await poster(slack, channel)(checkpoint)
                print(
                    f"checkpoint of workspace {checkpoint.team_id}: {checkpoint.rows} rows, "
                    f"head {checkpoint.head_hash}, "
                    + ("signed" if checkpoint.signature else "unsigned (no AUDIT_SIGNING_KEY)")
                    + (f", posted to {channel}" if slack is not None else "")
                )
            for problem in done.refused:
                print(f"REFUSED: the chain does not verify, nothing signed: {problem.line()}")
            if not done.written and not done.refused:
                print("no audit rows yet: nothing to checkpoint")
            if done.written and channel and slack is None:
                print(f"warning: {unread} posted to")
            return 1 if done.refused else 0
        posted = []
        if slack is not None and channel:
            try:
                posted = await posted_checkpoints(slack, channel)
            except Exception as exc:  # any failure to read is reported as such
                print(f"FAILED: could not read the checkpoints posted to {channel}: {exc}")
                return 1
        report = await verify(db, key, posted)
        if channel and slack is None:
            report.warnings.insert(0, f"{unread} read: only the stored checkpoints are checked")
        for line in render(report):
            print(line)
        return 0 if report.ok else 1
    finally:
        await db.dispose()


def _database_command(args: argparse.Namespace) -> int:
    """`countersign audit …`, `policy replay` and `migrate`: the database (and the audit
    settings) only, no Slack or model settings needed."""
    from bot.audit_settings import load_audit_settings
    from bot.logs import configure

    try:
        settings = load_audit_settings()
    except SettingsError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    configure(settings.log_level, settings.secret_values(), settings.log_format == "json")
    if args.command == "migrate":
        return _finish(_migrate(settings))
    if args.command == "policy":
        from bot.policy.cli import run as run_policy

        failed = _finish(_database_reached(settings.database_url))
        return failed or run_policy(args, settings.database_url)
    if args.audit_command in ("verify", "checkpoint"):
        return _finish(_audit_chain(settings, args.audit_command))
    if args.output == "-":
        return _finish(_audit_export(settings, args.format, args.records, sys.stdout))
    with open(args.output, "w", encoding="utf-8", newline="") as out:
        return _finish(_audit_export(settings, args.format, args.records, out))


async def _database_reached(url: str) -> int:
    from bot.db.session import Database
    from bot.startup import reach_database

    db = Database.from_url(url)
    try:
        await reach_database(db)
    finally:
        await db.dispose()
    return 0


def _finish(command: Coroutine[Any, Any, int]) -> int:
    """Run a command; a start that cannot go on is one line on stderr and exit code 1."""
    from bot.startup import StartupError

    try:
        return asyncio.run(command)
    except StartupError as exc:
        print(f"countersign: {exc}", file=sys.stderr)
        return 1


async def _purge(settings: Settings, days: int | None) -> int:
    from datetime import timedelta

    from bot.db.migrate import upgrade_to_head
    from bot.db.session import Database
    from bot.records.retention import purge
    from bot.startup import reach_database

    keep = settings.retention_days if days is None else days
    if keep <= 0:
        print("retention is off (RETENTION_DAYS=0): nothing to purge")
        return 0
    db = Database.from_url(settings.database_url, audit_key=settings.audit_key)
    try:
        await reach_database(db)
        await upgrade_to_head(db)
        removed = await purge(db, timedelta(days=keep))
    finally:
        await db.dispose()
    print(
        f"removed {removed.conversations} conversation(s) idle for more than {keep} days; "
        f"{removed.proposals_redacted} executed action(s) kept with their content redacted; "
        f"{removed.delivery_keys} old delivery key(s)"
    )
    return 0


async def _doctor(settings: Settings) -> int:
    from bot.doctor import run_checks

    checks = await run_checks(settings)
    for check in checks:
        print(check.line())
    failed = [c for c in checks if not c.ok]
    print("all checks passed" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


def _try(port: int | None, keep: bool) -> int:
    """The sandbox is its own package, run as its own program in place of this one: the bot
    never imports it (to the bot it is just another Slack, which starts the bot in turn)."""
    import os

    if port is not None:
        os.environ["SANDBOX_PORT"] = str(port)
    sys.stdout.flush()
    keeping = ["--keep"] if keep else []
    os.execv(sys.executable, [sys.executable, "-m", "sandbox", *keeping])  # noqa: S606
    return 0  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "try":
        return _try(args.port, args.keep)
    if args.command == "policy" and args.policy_command != "replay":  # no settings needed
        from bot.policy.cli import run as run_policy

        return run_policy(args)
    if args.command in ("audit", "migrate", "policy"):
        return _database_command(args)  # only `policy replay` reaches here
    try:
        settings = load_settings()
        if args.command == "serve":
            settings.require_http_mode()
        if args.command == "run" and not settings.socket_mode:
            settings.require_http_mode()
    except SettingsError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    from bot.logs import configure

    configure(settings.log_level, settings.secret_values(), settings.log_format == "json")
    if args.command == "doctor":
        return asyncio.run(_doctor(settings))
    if args.command == "purge":
        return _finish(_purge(settings, args.older_than_days))
    host = getattr(args, "host", "0.0.0.0")  # noqa: S104
    port = getattr(args, "port", 3000)
    return _finish(_run(settings, args.command, host, port))


if __name__ == "__main__":
    sys.exit(main())
