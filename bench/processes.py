"""Helpers of the load benchmark: bot processes, their /metrics and their memory."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from tests.fakes import openai as fake_openai
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import BOT_TOKEN, FakeSlack
from tests.harness import SIGNING_SECRET, clean_env


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


METRICS_TOKEN = "bench-operator-token"  # noqa: S105 - a local benchmark's own token


async def start_processes(
    count: int, env: dict[str, str], workdir: Path
) -> list[tuple[subprocess.Popen[str], int]]:
    started = []
    for _ in range(count):
        port = free_port()
        log = open(workdir / f"bot-{port}.log", "w")  # noqa: SIM115 - lives as long as the process
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env={**env, "METRICS_TOKEN": METRICS_TOKEN},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append((process, port))
    async with aiohttp.ClientSession() as session:
        for process, port in started:
            deadline = time.monotonic() + 60
            while True:
                try:
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"bot on port {port} did not start")
                await asyncio.sleep(0.2)
    return started


def bot_env(
    slack: FakeSlack, model: FakeOpenAI, database_url: str, redis_url: str | None
) -> dict[str, str]:
    """A `countersign serve` process's settings against the fakes (HTTP mode, signed events);
    with `redis_url` the replicas share budgets, locks and stop signals through Redis."""
    return clean_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.api_url,
        OPENAI_API_KEY=fake_openai.API_KEY,
        OPENAI_BASE_URL=model.base_url,
        LLM_MODEL=fake_openai.MODEL,
        DATABASE_URL=database_url,
        PROPOSAL_REMINDER_MINUTES="0",
        LOG_LEVEL="WARNING",
        **({"REDIS_URL": redis_url} if redis_url else {}),
    )


def stop_processes(
    processes: list[tuple[subprocess.Popen[str], int]], workdir: Path
) -> tuple[list[float], list[str]]:
    """Stop the bots (SIGTERM, then kill after 90 s); return each one's peak RSS (MB) and the
    ERROR lines of their logs. BENCH_KEEP_LOGS=DIR keeps the logs there."""
    rss = []
    for process, _ in processes:
        rss.append(peak_rss_mb(process.pid))
        process.send_signal(signal.SIGTERM)
    for process, _ in processes:
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
    logs = sorted(workdir.glob("bot-*.log"))
    keep = os.environ.get("BENCH_KEEP_LOGS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for log in logs:
            (Path(keep) / log.name).write_text(log.read_text())
    errors = [line for log in logs for line in log.read_text().splitlines() if " ERROR " in line]
    return rss, errors


async def scrape(ports: list[int]) -> list[str]:
    """Each bot's /metrics text."""
    texts = []
    async with aiohttp.ClientSession() as session:
        for port in ports:
            async with session.get(
                f"http://127.0.0.1:{port}/metrics",
                headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
            ) as response:
                texts.append(await response.text())
    return texts


def bucket_quantile(texts: list[str], name: str, q: float) -> float:
    """Upper bound (ms) of the histogram bucket holding quantile `q`, summed over processes and
    labels: the server's own view, without the load generator's share of the CPU."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets: dict[float, float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name != name:
                continue
            for sample in family.samples:
                if sample.name == f"{name}_bucket":
                    le = float(sample.labels["le"])
                    buckets[le] = buckets.get(le, 0.0) + sample.value
    if not buckets or not buckets[float("inf")]:
        return float("nan")
    total = buckets[float("inf")]
    for le in sorted(buckets):
        if buckets[le] >= q * total:
            return le * 1000
    return float("inf")


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")
