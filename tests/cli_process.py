"""`countersign ARGS` in a process of its own, started from a warm interpreter.

Every CLI test used to exec `python -m bot` afresh; importing the bot (its SDKs' hundreds of
pydantic models) took 2-4 s of each of ~40 runs. Here a fork server imports the bot once and
every command runs in a fork of it: its own process, environment, working directory, standard
output and exit code, as a user's would be, only without the imports. What depends on the
interpreter starting (the `countersign` script, `python -m bot`) is tested with real execs
elsewhere (`run_cli(..., exec_python=True)`, the process tests of tests/test_runtime.py, the
pip-install check).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path

# What the commands import lazily, imported once by the fork server.
PRELOAD = ["bot.__main__", "bot.app", "bot.doctor", "bot.policy.cli", "openai"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def _command(args: Sequence[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked process: become the command's process, run it, exit with its code."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), "utf-8", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), "utf-8", line_buffering=True)
    from bot.__main__ import main

    code: int
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's errors and --help, as the interpreter would report
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_forked(
    args: Sequence[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as scratch:
        out, err = os.path.join(scratch, "out"), os.path.join(scratch, "err")
        process = _context.Process(target=_command, args=(list(args), env, str(cwd), out, err))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["countersign", *args], timeout)
        stdout = Path(out).read_text(encoding="utf-8") if Path(out).exists() else ""
        stderr = Path(err).read_text(encoding="utf-8") if Path(err).exists() else ""
    # As subprocess reports it: the exit code, or minus the signal that ended the process.
    return subprocess.CompletedProcess(["countersign", *args], process.exitcode, stdout, stderr)
