"""The commands that need only the database (and the audit settings): `countersign migrate`,
`audit export|verify|checkpoint` and `policy replay`. No Slack or model setting is read, so an
operator can run them with `DATABASE_URL` alone."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TextIO

from bot.audit_settings import AuditCommandSettings
from bot.settings_help import SettingsError


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


def run_database_command(args: argparse.Namespace) -> int:
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
        return finish(_migrate(settings))
    if args.command == "policy":
        from bot.policy.cli import run as run_policy

        failed = finish(_database_reached(settings.database_url))
        return failed or run_policy(args, settings.database_url)
    if args.audit_command in ("verify", "checkpoint"):
        return finish(_audit_chain(settings, args.audit_command))
    if args.output == "-":
        return finish(_audit_export(settings, args.format, args.records, sys.stdout))
    with open(args.output, "w", encoding="utf-8", newline="") as out:
        return finish(_audit_export(settings, args.format, args.records, out))


async def _database_reached(url: str) -> int:
    from bot.db.session import Database
    from bot.startup import reach_database

    db = Database.from_url(url)
    try:
        await reach_database(db)
    finally:
        await db.dispose()
    return 0


def finish(command: Coroutine[Any, Any, int]) -> int:
    """Run a command; a start that cannot go on is one line on stderr and exit code 1."""
    from bot.startup import StartupError

    try:
        return asyncio.run(command)
    except StartupError as exc:
        print(f"countersign: {exc}", file=sys.stderr)
        return 1
