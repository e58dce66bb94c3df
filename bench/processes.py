"""Helpers of the load benchmark: bot processes, their /metrics and their memory."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import aiohttp


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
