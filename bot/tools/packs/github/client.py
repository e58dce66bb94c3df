"""GitHub through `githubkit`: its typed REST endpoints, its rate-limit parsing (primary and
secondary limits, `Retry-After`, `x-ratelimit-reset`) and its retries, with three choices of our
own:

- a rate limit is waited out (an `anyio` sleep: other conversations go on) only if it lifts
  within `RATE_LIMIT_WAIT_SECONDS`; a longer one fails the call at once with when it lifts;
- no HTTP cache: a preview and the re-read before a write must see GitHub as it is now;
- one connection pool for the process (githubkit otherwise opens a client per request).

Answers are read as JSON (`response.json()`), not as githubkit's pydantic models, so a field
GitHub adds or leaves out never fails a read. Errors become plain sentences; the token never
appears in one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from githubkit import GitHub, TokenAuthStrategy
from githubkit.exception import (
    GitHubException,
    RateLimitExceeded,
    RequestFailed,
    RequestTimeout,
)
from githubkit.retry import RETRY_SERVER_ERROR
from githubkit.typing import RetryOption

from bot.tools.registry import ToolArgumentsError, ToolError

RATE_LIMIT_WAIT_SECONDS = 20.0

# GitHub's own rules: an account is letters, digits and hyphens (underscores on some
# Enterprise servers), at most 39, not starting with a hyphen; a repository is letters, digits,
# `.`, `-` and `_`, at most 100, never `.` or `..`. Anything else (`%2e`, `/`, `..`) would
# change the request's path, so it is refused before any request.
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,38}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


class _SharedTransport(httpx.AsyncBaseTransport):
    """githubkit closes its client after each request; the pool under it stays open."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport(retries=1)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Kept open: `close_pool` ends it when the bot stops."""

    async def close_pool(self) -> None:
        await self._inner.aclose()


def _retry(exc: GitHubException, count: int) -> RetryOption:
    if isinstance(exc, RateLimitExceeded):
        wait = exc.retry_after.total_seconds()
        if count < 1 and wait <= RATE_LIMIT_WAIT_SECONDS:
            return RetryOption(True, exc.retry_after)
        return RetryOption(False)
    return RETRY_SERVER_ERROR(exc, count)


class GitHubClient:
    def __init__(self, token: str, api_url: str, repos: list[str], timeout: float = 20.0):
        self._transport = _SharedTransport()
        self.github: GitHub[TokenAuthStrategy] = GitHub(
            TokenAuthStrategy(token),
            base_url=api_url.rstrip("/") + "/",
            timeout=timeout,
            http_cache=False,
            auto_retry=_retry,
            async_transport=self._transport,
            user_agent="countersign",
        )
        self.repos = [r.lower() for r in repos]
        self._login: str | None = None

    async def close(self) -> None:
        await self._transport.close_pool()

    @property
    def rest(self) -> Any:
        return self.github.rest

    def split(self, repo: str) -> tuple[str, str]:
        """`owner/name` inside `GITHUB_REPOS`, or a `ToolArgumentsError` naming what is allowed."""
        owner, slash, name = repo.strip().partition("/")
        if not slash or not owner or not name or "/" in name:
            raise ToolArgumentsError(f"repo: {repo!r} is not in the form owner/name")
        if not _OWNER.fullmatch(owner) or not _NAME.fullmatch(name) or name in (".", ".."):
            raise ToolArgumentsError(
                f"repo: {repo!r} is not a GitHub repository name (owner: letters, digits and "
                "hyphens; name: letters, digits, '.', '-' and '_', not '.' or '..')"
            )
        if self.repos and not any(fnmatch.fnmatchcase(repo.lower(), p) for p in self.repos):
            allowed = ", ".join(self.repos)
            raise ToolArgumentsError(
                f"repo: {repo!r} is not one of the repositories this assistant may use ({allowed})"
            )
        return owner, name

    def allowed(self, full_name: str) -> bool:
        return not self.repos or any(fnmatch.fnmatchcase(full_name.lower(), p) for p in self.repos)

    async def login(self) -> str:
        """The token's own login (whose issues a retried create looks through)."""
        if self._login is None:
            async with errors("reading the token's user"):
                response = await self.rest.users.async_get_authenticated()
            self._login = str(response.json()["login"])
        return self._login


def _when(delay: timedelta) -> str:
    at = datetime.now(UTC) + delay
    minutes = max(1, round(delay.total_seconds() / 60))
    return f"in about {minutes} minute(s) (at {at:%H:%M} UTC)"


def _message(failed: RequestFailed) -> str:
    try:
        body = failed.response.json()
    except Exception:  # not JSON: the status says enough
        body = {}
    message = str(body.get("message") or "") if isinstance(body, dict) else ""
    details = body.get("errors") if isinstance(body, dict) else None
    if isinstance(details, list):
        parts = [
            str(d.get("message") or f"{d.get('field', '')} {d.get('code', '')}".strip())
            if isinstance(d, dict)
            else str(d)
            for d in details[:5]
        ]
        message = f"{message}: {'; '.join(p for p in parts if p)}" if parts else message
    return message[:500]


@asynccontextmanager
async def errors(doing: str) -> AsyncIterator[None]:
    """GitHub's failures in words: what we were doing and what GitHub said."""
    try:
        yield
    except RateLimitExceeded as exc:
        raise ToolError(
            f"GitHub's rate limit stopped {doing}; it lifts {_when(exc.retry_after)}. "
            "Nothing was changed."
        ) from None
    except RequestFailed as exc:
        status = exc.response.status_code
        said = _message(exc)
        if status == 401:
            raise ToolError("GitHub rejected GITHUB_TOKEN (401); ask the operator.") from None
        if status == 404:
            raise ToolError(
                f"GitHub found nothing while {doing} (404): it does not exist or the token "
                "cannot see it."
            ) from None
        if status == 403:
            raise ToolError(
                f"GitHub refused {doing} (403: {said or 'forbidden'}); the token may lack "
                "the permission."
            ) from None
        raise ToolError(f"GitHub refused {doing} ({status}: {said or 'no message'})") from None
    except RequestTimeout:
        raise ToolError(f"GitHub did not answer in time while {doing}") from None
    except GitHubException as exc:
        raise ToolError(
            f"GitHub could not be reached while {doing} ({type(exc).__name__})"
        ) from None
