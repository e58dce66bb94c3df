"""The `countersign` command: run | serve | try | migrate | doctor | purge | audit | policy."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from bot.config import Settings, SettingsError, load_settings
from bot.database_commands import finish, run_database_command


def port_number(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535, for argparse."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1 to 65535 (0: any free one)")
    return port


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="countersign", description="A human-in-the-loop AI assistant for Slack."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="start the bot (Socket Mode if SLACK_APP_TOKEN is set)")
    serve = commands.add_parser("serve", help="start the bot in HTTP mode")
    serve.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a server binds all by default
    serve.add_argument("--port", type=port_number, default=3000)
    trial = commands.add_parser(
        "try", help="try it without Slack: a local Slack-like sandbox and page (SANDBOX_PORT)"
    )
    trial.add_argument(
        "--port", type=port_number, default=None, help="default: SANDBOX_PORT or 3000"
    )
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
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the bot listens for it: stop, without a traceback
        print("countersign: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "try":
        return _try(args.port, args.keep)
    if args.command == "policy" and args.policy_command != "replay":  # no settings needed
        from bot.policy.cli import run as run_policy

        return run_policy(args)
    if args.command in ("audit", "migrate", "policy"):
        return run_database_command(args)  # only `policy replay` reaches here
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
        return finish(_purge(settings, args.older_than_days))
    host = getattr(args, "host", "0.0.0.0")  # noqa: S104
    port = getattr(args, "port", 3000)
    return finish(_run(settings, args.command, host, port))


if __name__ == "__main__":
    sys.exit(main())
