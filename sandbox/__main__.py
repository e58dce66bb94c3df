"""`python -m sandbox` (what `countersign try` runs): the sandbox's server and page, and the
unchanged bot against it. `SANDBOX_PORT` (default 3000; 0 picks a free one), `SANDBOX_HOST`
(default 127.0.0.1); `--no-bot` serves the sandbox alone (to run a bot against it by hand);
`--keep` keeps the bot's database after the sandbox stops (its path is printed), where it is
otherwise deleted with the rest of the sandbox."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from aiohttp import web

from sandbox.demo_model import TOKEN_DELAY, word_delay
from sandbox.launcher import DATABASE, has_model_settings, start_bot
from sandbox.server import Sandbox, build, serve


class CannotListen(Exception):
    """The sandbox's port cannot be used; the message is one line for the person."""


async def listen(
    host: str, port: int, pace: float = TOKEN_DELAY
) -> tuple[Sandbox, web.AppRunner, int]:
    sandbox = build(pace=pace)
    try:
        runner, bound = await serve(sandbox, host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            problem = f"port {port} on {host} is already in use"
        else:
            problem = f"cannot listen on {host}:{port} ({exc.strerror or type(exc).__name__})"
        raise CannotListen(
            f"{problem}: stop what uses it, or choose another port with --port "
            "(or SANDBOX_PORT; 0 picks a free one)"
        ) from None
    return sandbox, runner, bound


async def run(
    host: str, port: int, with_bot: bool, keep: bool = False, pace: float = TOKEN_DELAY
) -> int:
    sandbox, runner, port = await listen(host, port, pace)
    base = sandbox.workspace.base
    sandbox.workspace.bot_started = with_bot
    model = "your OPENAI_* settings" if has_model_settings(dict(os.environ)) else "the demo model"
    print(f"Countersign sandbox: {sandbox.address()}  (model: {model}; Ctrl-C stops)", flush=True)
    if not with_bot:
        guard = sandbox.guard
        print(
            f"For a bot of your own: SLACK_API_URL={base}/api/ SLACK_BOT_TOKEN={guard.bot_token} "
            f"SLACK_APP_TOKEN={guard.app_token}; the demo model: OPENAI_BASE_URL="
            f"{base}/demo-model/v1 OPENAI_API_KEY={guard.model_key}",
            flush=True,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    code = 0
    with data_folder(keep) as data:
        if keep:
            print(f"The bot's database is kept after the sandbox stops: {data / DATABASE}")
        if with_bot:
            print("Starting the bot (the first start sets up its database)…", flush=True)
        tokens = (sandbox.guard.bot_token, sandbox.guard.app_token)
        bot = await start_bot(base, data, tokens) if with_bot else None
        waits: list[asyncio.Task[object]] = [asyncio.create_task(_wait(stop))]
        if bot is not None:
            asyncio.create_task(_announce(sandbox.hub.connected, sandbox.address()))  # noqa: RUF006
        if bot is not None:
            waits.append(asyncio.create_task(_exit(bot)))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in waits:
            task.cancel()
        if bot is not None:
            if bot.returncode is None:
                bot.terminate()
                try:
                    await asyncio.wait_for(bot.wait(), 15)
                except TimeoutError:
                    bot.kill()
                    await bot.wait()
            elif not stop.is_set():
                print(f"the bot stopped (exit code {bot.returncode})", file=sys.stderr)
                code = bot.returncode or 1
        await runner.cleanup()
    if keep:
        print(f"Kept the bot's database: {data / DATABASE}", flush=True)
    return code


@contextlib.contextmanager
def data_folder(keep: bool) -> Iterator[Path]:
    """The bot's folder for its database: deleted on exit unless `keep`."""
    if keep:
        yield Path(tempfile.mkdtemp(prefix="countersign-sandbox-"))
        return
    with tempfile.TemporaryDirectory(prefix="countersign-sandbox-") as data:
        yield Path(data)


async def _announce(connected: asyncio.Event, address: str) -> None:
    await connected.wait()
    print(f"The bot is connected: open {address} and pick who you are acting as.", flush=True)


async def _wait(event: asyncio.Event) -> object:
    return await event.wait()


async def _exit(process: asyncio.subprocess.Process) -> object:
    return await process.wait()


def port(text: str) -> int:
    """--port or SANDBOX_PORT (argparse converts a default given as text too)."""
    if not text.strip().isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port (SANDBOX_PORT or --port): use 1 to 65535, 0 for any free one"
        )
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("SANDBOX_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=port, default=os.environ.get("SANDBOX_PORT", "3000"))
    parser.add_argument("--no-bot", action="store_true", help="serve the sandbox alone")
    parser.add_argument(
        "--keep", action="store_true", help="keep the bot's database when the sandbox stops"
    )
    args = parser.parse_args(argv)
    try:
        pace = word_delay()
    except ValueError as exc:
        print(f"countersign sandbox: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args.host, args.port, not args.no_bot, args.keep, pace))
    except CannotListen as exc:
        print(f"countersign sandbox: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
