"""Files in the model's memory: an image part costs tokens against the prompt budget (OpenAI's
rule), older files are summarised like any context (an image by name, never its bytes), and a
file is kept no longer than the messages that showed it."""

from __future__ import annotations

from sqlalchemy import select

from bot.conversation.memory import Budget, Memory
from bot.conversation.tokens import TokenCounter, image_tokens
from bot.db import repositories as repo
from bot.db.models import Conversation, Role, SharedFile
from bot.db.session import Database
from bot.files.parts import Vision
from bot.records.retention import forget_user
from tests.fakes.openai import FakeOpenAI
from tests.files_samples import png
from tests.test_llm_stream import llm_for

BUDGET = Budget(total=3_000, reply=500, tool_result=300, summary=200)
PICTURE = png(800, 600)


async def _thread(db: Database) -> tuple[Conversation, int]:
    """An image shared by Bob, then talk that fits the budget only without the image part."""
    async with db.transaction() as session:
        conversation, _ = await repo.get_or_create_conversation(session, "T", "C1", "1.0", "UBOB")
        row = SharedFile(
            team_id="T",
            slack_file_id="F1",
            sha256="0" * 64,
            name="shot.png",
            kind="image",
            mimetype="image/png",
            size=len(PICTURE),
            width=800,
            height=600,
            data=PICTURE,
            audience="C:C1",
        )
        session.add(row)
        await session.flush()
        image = await repo.add_message(
            session,
            conversation,
            Role.USER,
            "shot.png: an image (PNG, 800×600, 1 KB).",
            slack_user="UBOB",
        )
        image.file_id, image.audience, image.source = (
            row.id,
            "C:C1",
            '{"kind": "file", "name": "shot.png"}',
        )
        for n in range(8):
            role = Role.USER if n % 2 == 0 else Role.ASSISTANT
            said = await repo.add_message(
                session, conversation, role, f"turn {n}: " + "words " * 200, slack_user="UBOB"
            )
            said.audience = "C:C1"
        return conversation, row.id


async def test_an_image_costs_its_tokens_and_is_summarised_by_name(
    sqlite_url: str, fake_model: FakeOpenAI
) -> None:
    assert image_tokens(800, 600) == 765
    db = Database.from_url(sqlite_url)
    llm = llm_for(fake_model)
    conversation, file_id = await _thread(db)
    counter = TokenCounter("gpt-4o-mini")

    # Without image parts the whole thread fits: nothing summarised, the image only named.
    off = await Memory(db, llm, counter, BUDGET, Vision("off")).prompt_for(
        conversation.id, "system", None, 200
    )
    assert fake_model.summaries == []
    assert any("shot.png: an image" in str(m.get("content")) for m in off.messages)

    # With them, the image's 765 tokens do not fit beside the talk: older messages, the image
    # among them, are summarised, by name.
    on = await Memory(db, llm, counter, BUDGET, Vision("auto")).prompt_for(
        conversation.id, "system", None, 200
    )
    (transcript,) = fake_model.summaries
    assert "shot.png: an image" in transcript
    assert "base64" not in transcript
    assert "SUMMARY#1" in str(on.messages[1]["content"])

    # Bob forgets his messages: the file he shared goes with them.
    await forget_user(db, "T", "UBOB")
    async with db.transaction() as session:
        assert await session.get(SharedFile, file_id) is None
        assert (await session.scalars(select(SharedFile))).all() == []
    await db.dispose()
