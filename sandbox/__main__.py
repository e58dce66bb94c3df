"""`python -m sandbox` (what `countersign try` runs): the sandbox's server and page, and the
unchanged bot against it. `SANDBOX_PORT` (default 3000; 0 picks a free one), `SANDBOX_HOST`
(default 127.0.0.1); `--no-bot` serves the sandbox alone (to run a bot against it by hand)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sandbox.launcher import has_model_settings, start_bot
from sandbox.server import build, serve


async def run(host: str, port: int, with_bot: bool) -> int:
    sandbox = build()
    runner, port = await serve(sandbox, host, port)
    base = f"http://{host}:{port}"
    model = "your OPENAI_* settings" if has_model_settings(dict(os.environ)) else "the demo model"
    print(f"Countersign sandbox: {base}  (model: {model}; Ctrl-C stops)", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    code = 0
    with tempfile.TemporaryDirectory(prefix="countersign-sandbox-") as data:
        bot = await start_bot(base, Path(data)) if with_bot else None
        waits: list[asyncio.Task[object]] = [asyncio.create_task(_wait(stop))]
        if bot is not None:
            asyncio.create_task(_announce(sandbox.hub.connected, base))  # noqa: RUF006
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
    return code


async def _announce(connected: asyncio.Event, base: str) -> None:
    await connected.wait()
    print(f"The bot is connected: open {base} and pick who you are acting as.", flush=True)


async def _wait(event: asyncio.Event) -> object:
    return await event.wait()


async def _exit(process: asyncio.subprocess.Process) -> object:
    return await process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("SANDBOX_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("SANDBOX_PORT", "3000")))
    parser.add_argument("--no-bot", action="store_true", help="serve the sandbox alone")
    args = parser.parse_args(argv)
    return asyncio.run(run(args.host, args.port, not args.no_bot))


if __name__ == "__main__":
    sys.exit(main())
