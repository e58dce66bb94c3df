"""Fixtures: recording fakes of Slack and of the model, databases, and the running bot."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.harness import RunningBot, make_settings, start_bot, stop_bot

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def _no_real_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk only to loopback: no Slack, no OpenAI, whatever the environment says."""
    for name in (
        "OPENAI_BASE_URL",
        "SLACK_API_URL",
        "OPENAI_API_KEY",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "DATABASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        if (
            isinstance(address, tuple)
            and address
            and address[0] not in ("127.0.0.1", "::1", "localhost")
        ):
            raise RuntimeError(f"test tried to reach {address!r}: only loopback is allowed")
        real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_model() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'countersign.db'}"


async def _create_postgres_database() -> str:
    name = f"cs_test_{uuid.uuid4().hex[:12]}"
    url = make_url(POSTGRES_URL)
    try:
        conn = await asyncpg.connect(
            host=url.host, port=url.port or 5432, user=url.username, database=url.database
        )
    except OSError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc}); start it, e.g. "
            "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
        )
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return url.set(database=name).render_as_string(hide_password=False)


async def _drop_postgres_database(database_url: str) -> None:
    url = make_url(POSTGRES_URL)
    name = make_url(database_url).database
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    database_url = await _create_postgres_database()
    yield database_url
    await _drop_postgres_database(database_url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Each persistence test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'countersign.db'}"
        return
    database_url = await _create_postgres_database()
    yield database_url
    await _drop_postgres_database(database_url)


@pytest.fixture
async def bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    yield running
    await stop_bot(running)
