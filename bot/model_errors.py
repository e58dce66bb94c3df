"""What a model server's failures mean, in words a teammate understands, and the refusals the
bot answers by asking again differently (image parts; `max_tokens` on a model that wants
`max_completion_tokens`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import httpx2
import openai


class LLMError(Exception):
    """The model could not produce a complete reply; `user_message` is safe to show."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class ImagesRefused(LLMError):
    """The model's server refused a request because of its image parts (a model that does not
    take images): `bot.files.parts` then asks again without them."""


# What OpenAI-compatible servers say when a model does not take an image part: OpenAI
# ("Invalid content type. image_url is only supported by certain models."), vLLM ("… is not a
# multimodal model"), others ("does not support image input", "vision").
_ABOUT_IMAGES = re.compile(r"image|multimodal|vision|content type|modalit", re.IGNORECASE)


def refuses_images(exc: BaseException, messages: Iterable[Any]) -> bool:
    if not isinstance(exc, openai.BadRequestError) or not _has_images(messages):
        return False
    return bool(_ABOUT_IMAGES.search(f"{exc.message} {exc.body}"))


def _has_images(messages: Iterable[Any]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
        for m in messages
    )


def wants_completion_tokens(exc: BaseException) -> bool:
    """OpenAI's 400 for `max_tokens` sent to a model that takes only `max_completion_tokens`
    (its reasoning models, GPT-5 and later, on OpenAI and Azure): "Unsupported parameter:
    'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead." """
    if not isinstance(exc, openai.BadRequestError):
        return False
    return "max_completion_tokens" in f"{exc.message} {exc.body}"


def explain(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "the model did not answer in time"
    if isinstance(exc, openai.RateLimitError):
        return "the model service is rate limiting us (429); try again in a minute"
    if isinstance(exc, openai.AuthenticationError):
        return "the model service rejected our API key (check OPENAI_API_KEY)"
    if isinstance(exc, openai.NotFoundError):
        return "the model service does not know this model (check LLM_MODEL)"
    if isinstance(exc, openai.BadRequestError) and "max_tokens" in f"{exc.message} {exc.body}":
        return "the model service refused the reply's length limit (check REPLY_TOKENS)"
    if isinstance(exc, openai.APIStatusError):
        return f"the model service returned an error ({exc.status_code})"
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
        return "the connection to the model service broke off"
    return "the model service sent something I could not read"
