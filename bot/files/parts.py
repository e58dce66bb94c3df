"""Images as image parts of a model request, and `VISION`.

A stored file message (`Message.file_id`) of an image is text that names it; when the model
takes images, `ImagesInPrompt.attach` turns that message's content into a text part and an
image part (`data:` URL, base64), after the prompt is rendered, so the text part is whatever
the renderer made of it. When it does not (`VISION=off`, or `auto` after the model refused
one), the text says the image was not shown. `VISION=auto`: a 400 from the model about image
parts (`bot.llm.ImagesRefused`) marks that model as not taking images (for the life of the
process), and the request is made again without them; the reply starts with a note saying
which images were not read.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from openai.types.chat import ChatCompletionMessageParam
from sqlalchemy import select

from bot.db.models import Message, SharedFile
from bot.db.session import Database
from bot.llm import LLM, ImagesRefused, StreamEvent, TextDelta

MAX_IMAGES = 8  # the newest images of a prompt are sent; older ones are only named
OFF = "images are turned off here (VISION=off)"
REFUSED = "this model does not take images"


class Vision:
    """`VISION` and what the process learnt: models that refused an image part."""

    def __init__(self, mode: str = "auto") -> None:
        self.mode = mode
        self.refusers: set[str] = set()

    def takes_images(self, model: str) -> bool:
        if self.mode == "off":
            return False
        return self.mode == "on" or model not in self.refusers

    def why_not(self, model: str) -> str:
        return OFF if self.mode == "off" else REFUSED


class ImageParts:
    def __init__(self, db: Database, vision: Vision, cost: Callable[[int | None, int | None], int]):
        self.db = db
        self.vision = vision
        self.cost_of = cost

    async def load(self, stored: Sequence[Message], model: str) -> ImagesInPrompt:
        """The image files among `stored` (only the newest `MAX_IMAGES` are loaded)."""
        ids = [m.file_id for m in stored if m.file_id is not None]
        rows: dict[int, SharedFile] = {}
        if ids:
            async with self.db.transaction() as session:
                found = await session.scalars(
                    select(SharedFile).where(
                        SharedFile.id.in_(set(ids)), SharedFile.kind == "image"
                    )
                )
                rows = {row.id: row for row in found}
        newest = [i for i in reversed(ids) if i in rows][:MAX_IMAGES]
        return ImagesInPrompt(
            {i: rows[i] for i in newest}, self.vision.takes_images(model), self, model
        )

    async def stream(
        self,
        llm: LLM,
        messages: list[ChatCompletionMessageParam],
        tools: list[dict[str, Any]] | None,
    ) -> AsyncIterator[StreamEvent]:
        """`llm.stream`, made again without image parts if the model refuses them (`auto`)."""
        said = False
        try:
            async for event in llm.stream(messages, tools):
                said = True
                yield event
            return
        except ImagesRefused:
            if said or self.vision.mode != "auto":
                raise
        self.vision.refusers.add(llm.model)
        names, plain = without_images(messages)
        shown = ", ".join(names) or "the image"
        yield TextDelta(f"_({shown} was not read: {REFUSED}.)_\n\n")
        async for event in llm.stream(plain, tools):
            yield event


class ImagesInPrompt:
    def __init__(
        self, rows: dict[int, SharedFile], send: bool, parts: ImageParts, model: str
    ) -> None:
        self.rows = rows
        self.send = send
        self.parts = parts
        self.model = model

    def cost(self, message: Message) -> int:
        """Tokens an image part adds to `message` (0: none is sent)."""
        row = self.rows.get(message.file_id) if message.file_id is not None else None
        if row is None or not self.send:
            return 0
        return self.parts.cost_of(row.width, row.height)

    def attach(self, rendered: Sequence[Any], stored: Sequence[Message]) -> list[Any]:
        """`rendered` (aligned with `stored`) with each image message's part added, or a line
        saying why the image is not shown."""
        out: list[Any] = []
        for message, source in zip(rendered, stored, strict=True):
            row = self.rows.get(source.file_id) if source.file_id is not None else None
            if row is None or row.data is None or message.get("role") != "user":
                out.append(message)
                continue
            text = str(message.get("content") or "")
            if not self.send:
                why = self.parts.vision.why_not(self.model)
                out.append({**message, "content": f"{text}\n(The image was not shown: {why}.)"})
                continue
            url = f"data:{row.mimetype};base64,{base64.b64encode(row.data).decode()}"
            content = [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": url}},
            ]
            out.append({**message, "content": content})
        return out


def without_images(
    messages: Sequence[ChatCompletionMessageParam],
) -> tuple[list[str], list[ChatCompletionMessageParam]]:
    """The names of the images in `messages`, and the messages with each image part replaced
    by a line saying it was not shown."""
    names: list[str] = []
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(
            isinstance(p, dict) and p.get("type") == "image_url" for p in content
        ):
            out.append(message)
            continue
        texts = [str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p]
        names.extend(_names(texts))
        text = "\n".join(texts) + f"\n(The image was not shown: {REFUSED}.)"
        out.append({**message, "content": text})  # type: ignore[arg-type]
    return names, out


def _names(texts: Sequence[str]) -> list[str]:
    """Image names, from the text `bot.conversation.shared_files` stores for an image
    (`<name>: an image (…)`), wherever a renderer put it."""
    return [t.split(": an image", 1)[0].rsplit("\n", 1)[-1] for t in texts if ": an image" in t]
