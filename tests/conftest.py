"""Fixtures: recording fakes of Slack and of the model, databases, and the running bot."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from alembic import command
from hypothesis import settings
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import create_engine

from bot.app import Countersign
from bot.db.migrate import alembic_config, upgrade_to_head
from bot.db.session import Database
from bot.server import run_socket_mode
from bot.slack.budgets import Limits, WorkspaceBudgets
from bot.slack.web_client import web_client
from tests.fakes.openai import FakeOpenAI, Script
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, wait_until
from tests.harness import RunningBot, make_settings, start_bot, stop_bot
from tests.pg import (
    create_database,
    drop_database,
    drop_pool,
    pooled_database,
    temporary_database,
)
from tests.spend_front import alices_budget, spend_running

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

# No property test depends on the machine being quiet: Hypothesis's per-example deadline (200 ms)
# failed a history-window example that took 316 ms with the suite on two busy cores.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
# `--hypothesis-profile=nightly`: ten times the examples of every property test that takes the
# profile's count, and the model-based one-door test's 600 sequences (docs/testing.md).
settings.register_profile("nightly", parent=settings.get_profile("suite"), max_examples=1000)


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
        "GITHUB_TOKEN",
        "GITHUB_API_URL",
        "GITHUB_REPOS",
        "LINEAR_API_KEY",
        "LINEAR_API_URL",
        "MCP_SERVERS",
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


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file the migrations brought to head once per test process: a bot starting on a
    copy finds nothing to do (migrating an empty file takes most of a bot's start-up, ~0.7 s,
    and some 160 tests start one). Migrations themselves are tested on empty and on old
    databases through `database_url` and the `migrate` command, which never use this copy."""
    path = tmp_path_factory.mktemp("template") / "countersign.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "head")
    engine.dispose()
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    shutil.copyfile(migrated_sqlite, tmp_path / "countersign.db")
    return f"sqlite:///{tmp_path / 'countersign.db'}"


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str]:
    """A PostgreSQL database the migrations brought to head once per test process, copied
    (CREATE DATABASE … TEMPLATE) by `migrated_database_url`; dropped at the end."""

    name = f"cs_template_{uuid.uuid4().hex[:12]}"

    async def make() -> None:
        db = Database.from_url(await create_database(name))
        try:
            await upgrade_to_head(db)
        finally:
            await db.dispose()  # a template takes no connections

    # Its own loop in a thread of its own: asked for from inside a test's running loop.
    with ThreadPoolExecutor(1) as thread:
        try:
            thread.submit(asyncio.run, make()).result()
        except RuntimeError as exc:
            pytest.fail(str(exc))
        yield name
        thread.submit(asyncio.run, drop_pool(name)).result()
        thread.submit(asyncio.run, drop_database(name)).result()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def migrated_database_url(
    request: pytest.FixtureRequest, sqlite_url: str
) -> AsyncIterator[str]:
    """SQLite and PostgreSQL already at head: for tests of what runs on the schema, not of
    the migrations (those use `database_url`, which starts empty)."""
    if request.param == "sqlite":
        yield sqlite_url
        return
    template = request.getfixturevalue("migrated_postgres")
    async with pooled_database(template) as url:
        yield url


@pytest.fixture
async def migrated_postgres_url(migrated_postgres: str) -> AsyncIterator[str]:
    """PostgreSQL already at head (a copy of the template): for tests of what runs on the
    schema, replicas included; migrating an empty database costs each some seconds."""
    async with pooled_database(migrated_postgres) as url:
        yield url


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    try:
        async with temporary_database() as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Each persistence test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'countersign.db'}"
        return
    try:
        async with temporary_database() as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture
async def bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url))
    yield running
    await stop_bot(running)


@pytest.fixture
async def native_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[RunningBot]:
    """A bot with Slack's native surfaces on (STREAMING=auto), on SQLite."""
    running = await start_bot(make_settings(fake_slack, fake_model, sqlite_url, streaming="auto"))
    yield running
    await stop_bot(running)


@pytest.fixture
async def socket_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str
) -> AsyncIterator[asyncio.Task[None]]:
    """The bot in Socket Mode against the fake's WebSocket; the model's default answer tries to
    ping the channel, so a junk event that started a reply would show."""
    fake_model.default = Script(text="<!channel> hi")
    countersign = Countersign.build(
        make_settings(fake_slack, fake_model, sqlite_url, slack_app_token=APP_TOKEN)
    )
    stop = asyncio.Event()
    runner = asyncio.create_task(run_socket_mode(countersign, stop))
    await wait_until(fake_slack.socket_connected.is_set, timeout=15)
    yield runner
    stop.set()
    await asyncio.wait_for(runner, 30)


# The Slack side's budgets and a budgeted client over loopback (tests of the budgets).
@pytest.fixture
async def budgets() -> AsyncIterator[WorkspaceBudgets]:
    found = WorkspaceBudgets(Limits())
    yield found
    await found.stop()


@pytest.fixture
async def client(fake_slack: FakeSlack, budgets: WorkspaceBudgets) -> AsyncIterator[AsyncWebClient]:
    found = web_client(BOT_TOKEN, fake_slack.api_url, budgets)
    yield found
    assert found.session is not None
    await found.session.close()


# A bot with Alice's small budget (tests of the pause and its card); a module may give its own
# `policy_path`.
@pytest.fixture
def policy_path(tmp_path: Path) -> Path:
    return alices_budget(tmp_path)


@pytest.fixture
async def spend_bot(
    fake_slack: FakeSlack, fake_model: FakeOpenAI, sqlite_url: str, policy_path: Path
) -> AsyncIterator[RunningBot]:
    async with spend_running(fake_slack, fake_model, sqlite_url, policy_path) as bot:
        yield bot
