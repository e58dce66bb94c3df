"""Linear's GraphQL API over `httpx2` (the HTTP client the bot already uses for the model and
MCP). Queries are named documents in `documents/*.graphql`, loaded once; a request sends its
document (with the fragments it spreads) and `operationName`, never text built at run time.

Linear answers errors as GraphQL `errors` with `extensions.code`; a rate limit (`RATELIMITED`,
or HTTP 429) is waited out only if it resets within `RATE_LIMIT_WAIT_SECONDS` (an asyncio sleep:
other conversations go on), otherwise the call fails at once saying when it lifts.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import httpx2

from bot.tools.registry import ToolError

RATE_LIMIT_WAIT_SECONDS = 20.0
_HERE = Path(__file__).parent / "documents"
_FRAGMENT = re.compile(r"^fragment (\w+) on \w+ \{.*?^\}", re.MULTILINE | re.DOTALL)


def _load() -> dict[str, str]:
    fragments = {
        m.group(1): m.group(0)
        for m in _FRAGMENT.finditer((_HERE / "fragments.graphql").read_text())
    }
    documents = {}
    for path in sorted(_HERE.glob("*.graphql")):
        if path.stem == "fragments":
            continue
        text = path.read_text().strip()
        used = [body for name, body in fragments.items() if f"...{name}" in text]
        documents[path.stem] = "\n\n".join([text, *used])
    return documents


DOCUMENTS = _load()


class LinearError(ToolError):
    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class LinearClient:
    def __init__(self, api_key: str, api_url: str, timeout: float = 20.0) -> None:
        self.url = api_url
        self._http = httpx2.AsyncClient(
            headers={"Authorization": api_key, "Content-Type": "application/json"},
            timeout=timeout,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def run(self, operation: str, doing: str, **variables: Any) -> dict[str, Any]:
        """Run the named document; its `data`, or a `LinearError` in words."""
        document = DOCUMENTS[operation]
        payload = {"query": document, "operationName": operation, "variables": variables}
        for attempt in range(2):
            try:
                response = await self._http.post(self.url, json=payload)
            except httpx2.TimeoutException:
                raise LinearError(f"Linear did not answer in time while {doing}") from None
            except httpx2.TransportError as exc:
                raise LinearError(
                    f"Linear could not be reached while {doing} ({type(exc).__name__})"
                ) from None
            wait = _rate_limit_wait(response)
            if wait is not None:
                if attempt == 0 and wait <= RATE_LIMIT_WAIT_SECONDS:
                    await asyncio.sleep(wait)
                    continue
                minutes = max(1, round(wait / 60))
                raise LinearError(
                    f"Linear's rate limit stopped {doing}; it lifts in about {minutes} "
                    "minute(s). Nothing was changed.",
                    "RATELIMITED",
                )
            return _data(response, doing)
        raise LinearError(f"Linear kept rate-limiting {doing}", "RATELIMITED")


def _codes(body: Any) -> list[str]:
    errors = body.get("errors") if isinstance(body, dict) else None
    return [
        str((e.get("extensions") or {}).get("code") or "")
        for e in errors or []
        if isinstance(e, dict)
    ]


def _rate_limit_wait(response: httpx2.Response) -> float | None:
    """Seconds until the limit resets, if this answer is a rate limit."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != 429 and "RATELIMITED" not in _codes(body):
        return None
    reset = response.headers.get("x-ratelimit-requests-reset")
    if reset and reset.isdigit():  # epoch milliseconds
        return max(0.0, int(reset) / 1000 - time.time())
    retry = response.headers.get("retry-after")
    return float(retry) if retry and retry.replace(".", "", 1).isdigit() else 60.0


def _data(response: httpx2.Response, doing: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise LinearError(
            f"Linear answered {response.status_code} without JSON while {doing}"
        ) from None
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        first = errors[0] if isinstance(errors[0], dict) else {}
        extensions = first.get("extensions") or {}
        code = str(extensions.get("code") or extensions.get("type") or "")
        said = str(extensions.get("userPresentableMessage") or first.get("message") or "error")
        if code == "AUTHENTICATION_ERROR" or response.status_code == 401:
            raise LinearError("Linear rejected LINEAR_API_KEY; ask the operator.", code)
        if code == "FORBIDDEN":
            raise LinearError(f"Linear refused {doing}: {said[:300]}", code)
        raise LinearError(f"Linear refused {doing}: {said[:300]}", code or None)
    if response.status_code >= 400 or not isinstance(body, dict):
        raise LinearError(f"Linear answered {response.status_code} while {doing}")
    data: dict[str, Any] = body.get("data") or {}
    return data
