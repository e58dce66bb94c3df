"""A fake GitHub REST API on 127.0.0.1: the subset the `github` pack uses, with GitHub's error
shapes (`{"message", "documentation_url", "status"}`, 422 `errors`) and its rate-limit headers
on every answer. Every request is recorded; tests change the data between card and click,
switch on a primary or secondary rate limit, or lose the answer to a create after it was made.

As GitHub does: labels and accounts have ids (a renamed label keeps its id), an issue update or
create naming a label that does not exist makes a new one, a pull request has a base branch
that can be retargeted, and lists are paged (`per_page` at most 100, `page`, `since` on
`updated_at`, a `Link` header with `rel="next"` while more follow).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.fakes.server import ThreadedServer

TOKEN = "ghp_fake_token_000000000000000000000000"
LOGIN = "countersign-bot"
DOCS = "https://docs.github.com/rest"


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)  # when it arrived


_ids = itertools.count(1001)


def _label(name: str) -> dict[str, Any]:
    return {"id": next(_ids), "name": name, "color": "ededed"}


def stamp(at: float | None = None) -> str:
    """GitHub's timestamp format (ISO 8601, UTC, seconds)."""
    return datetime.fromtimestamp(time.time() if at is None else at, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


@dataclass
class Repo:
    labels: list[dict[str, Any]] = field(
        default_factory=lambda: [_label(n) for n in ("bug", "ui", "p1", "docs")]
    )
    assignees: list[str] = field(default_factory=lambda: ["dana", "lee", LOGIN])
    milestones: list[dict[str, Any]] = field(
        default_factory=lambda: [{"number": 1, "title": "v1.0", "state": "open"}]
    )
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class FakeGitHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Seen] = []
        self.rate_limited: tuple[str, int] | None = None  # ("primary"|"secondary", seconds)
        self.limited_times = 0  # answer this many requests with the rate limit, then recover
        self.lose_answer_to: str | None = None  # a POST to a path ending so: done, answer lost
        self.hold_create_answer = 0.0  # make the issue, then wait this long before answering
        self.delay = 0.0
        self.user_ids: dict[str, int] = {LOGIN: 1}
        self._server = ThreadedServer(self._build())

    def start(self) -> FakeGitHub:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def api_url(self) -> str:
        return self._server.url

    def writes(self) -> list[Seen]:
        return [r for r in self.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]

    # -- data -------------------------------------------------------------------------------
    def repo(self, full: str) -> Repo:
        return self.repos.setdefault(full, Repo())

    def user(self, login: str) -> dict[str, Any]:
        return {"login": login, "id": self.user_ids.setdefault(login, next(_ids))}

    def label(self, full: str, name: str) -> dict[str, Any]:
        """The repository's label of that name (any case); GitHub makes one if none exists."""
        repo = self.repo(full)
        found = next((lb for lb in repo.labels if lb["name"].lower() == name.lower()), None)
        if found is None:
            found = _label(name)
            repo.labels.append(found)
        return found

    def add_comments(
        self,
        full: str,
        number: int,
        bodies: list[str],
        login: str = "dana",
        association: str = "MEMBER",
    ) -> None:
        """Comments by someone else, as if posted now (`association`: GitHub's
        `author_association`, e.g. NONE for an outside contributor)."""
        repo = self.repo(full)
        issue = repo.issues[number]
        for body in bodies:
            cid = next(_ids)
            repo.comments.setdefault(number, []).append(
                {
                    "id": cid,
                    "body": body,
                    "user": self.user(login),
                    "author_association": association,
                    "created_at": stamp(),
                    "updated_at": stamp(),
                    "html_url": f"{issue['html_url']}#issuecomment-{cid}",
                }
            )
        issue["comments"] = len(repo.comments[number])

    def add_issue(self, full: str, number: int, title: str, **extra: Any) -> dict[str, Any]:
        repo = self.repo(full)
        issue = {
            "number": number,
            "title": title,
            "state": "open",
            "body": "",
            "user": {"login": "dana"},
            "author_association": "MEMBER",
            "labels": [],
            "assignees": [],
            "milestone": None,
            "comments": 0,
            "created_at": stamp(),
            "updated_at": stamp(),
            "html_url": f"https://github.com/{full}/issues/{number}",
            "repository_url": f"https://api.github.com/repos/{full}",
        }
        for key, value in extra.items():
            if key == "labels":
                value = [dict(self.label(full, n)) for n in value]
            if key == "assignees":
                value = [self.user(n) for n in value]
            issue[key] = value
        repo.issues[number] = issue
        return issue

    def add_pull(self, full: str, number: int, title: str, head: str) -> dict[str, Any]:
        issue = self.add_issue(full, number, title)
        issue["pull_request"] = {"url": f"https://api.github.com/repos/{full}/pulls/{number}"}
        issue["html_url"] = f"https://github.com/{full}/pull/{number}"
        pull = {
            "number": number,
            "title": title,
            "state": "open",
            "merged": False,
            "mergeable": True,
            "draft": False,
            "head": {"sha": head, "ref": "feature"},
            "base": {"ref": "main", "sha": "ba5e0000ba5e0000", "repo": {"full_name": full}},
            "requested_reviewers": [],
        }
        self.repo(full).pulls[number] = pull
        return pull

    def labels_of(self, full: str, number: int) -> list[str]:
        return [label["name"] for label in self.repo(full).issues[number]["labels"]]

    # -- HTTP -------------------------------------------------------------------------------
    def _build(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        r = "/repos/{owner}/{name}"
        app.router.add_get("/user", self._user)
        app.router.add_get("/users/{login}", self._user_by_login)
        app.router.add_get("/search/issues", self._search)
        app.router.add_get(r + "/issues", self._list_issues)
        app.router.add_post(r + "/issues", self._create_issue)
        app.router.add_get(r + "/issues/{number}", self._get_issue)
        app.router.add_patch(r + "/issues/{number}", self._update_issue)
        app.router.add_get(r + "/issues/{number}/comments", self._comments)
        app.router.add_post(r + "/issues/{number}/comments", self._comment)
        app.router.add_get(r + "/labels", self._labels)
        app.router.add_get(r + "/assignees", self._assignees)
        app.router.add_get(r + "/assignees/{login}", self._assignable)
        app.router.add_get(r + "/milestones", self._milestones)
        app.router.add_get(r + "/pulls/{number}", self._pull)
        app.router.add_post(r + "/pulls/{number}/requested_reviewers", self._reviewers)
        app.router.add_put(r + "/pulls/{number}/merge", self._merge)
        app.router.add_get(r + "/commits/{ref}/check-runs", self._check_runs)
        return app

    @staticmethod
    def _error(status: int, message: str, **extra: Any) -> web.Response:
        body = {"message": message, "documentation_url": DOCS, "status": str(status), **extra}
        return web.json_response(body, status=status, headers=_limits(4999))

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        self.requests.append(Seen(request.method, request.path, dict(request.query), body))
        if self.delay:
            await asyncio.sleep(self.delay)
        if (
            request.headers.get("Authorization") != f"token {TOKEN}"
            and request.headers.get("Authorization") != f"Bearer {TOKEN}"
        ):
            return self._error(401, "Bad credentials")
        if self.rate_limited and self.limited_times > 0:
            self.limited_times -= 1
            kind, seconds = self.rate_limited
            if kind == "secondary":
                return web.json_response(
                    {
                        "message": "You have exceeded a secondary rate limit. Please wait a few "
                        "minutes before you try again.",
                        "documentation_url": DOCS,
                        "status": "403",
                    },
                    status=403,
                    headers={**_limits(4000), "Retry-After": str(seconds)},
                )
            return web.json_response(
                {
                    "message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": DOCS,
                    "status": "403",
                },
                status=403,
                headers=_limits(0, reset=int(time.time()) + seconds),
            )
        try:
            response: web.StreamResponse = await handler(request)
        except KeyError:
            return self._error(404, "Not Found")
        lost = self.lose_answer_to
        if lost and request.method == "POST" and request.path.endswith(lost):
            self.lose_answer_to = None
            assert request.transport is not None
            request.transport.close()  # done, but the answer never arrives
            return web.Response()
        response.headers.update(_limits(4999))
        return response

    def _target(self, request: web.Request) -> tuple[str, Repo]:
        full = f"{request.match_info['owner']}/{request.match_info['name']}"
        if full not in self.repos:
            raise KeyError(full)
        return full, self.repos[full]

    async def _user(self, request: web.Request) -> web.Response:
        return web.json_response({"login": LOGIN, "id": 1})

    async def _user_by_login(self, request: web.Request) -> web.Response:
        login = request.match_info["login"]
        known = {login for repo in self.repos.values() for login in repo.assignees}
        if login not in known | set(self.user_ids):
            return self._error(404, "Not Found")
        return web.json_response(self.user(login))

    async def _search(self, request: web.Request) -> web.Response:
        q = request.query.get("q", "")
        words = [w for w in q.split() if ":" not in w]
        items = [
            i
            for full, repo in self.repos.items()
            if f"repo:{full}" in q or "repo:" not in q
            for i in repo.issues.values()
            if all(w.lower() in (i["title"] + " " + (i["body"] or "")).lower() for w in words)
        ]
        return web.json_response(
            {"total_count": len(items), "incomplete_results": False, "items": items}
        )

    async def _list_issues(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        creator = request.query.get("creator")
        found = [i for i in repo.issues.values() if not creator or i["user"]["login"] == creator]
        found.sort(key=lambda i: i["number"], reverse=request.query.get("direction") == "desc")
        return _paged(request, _since(request, found))

    async def _create_issue(self, request: web.Request) -> web.StreamResponse:
        full, repo = self._target(request)
        data = await request.json()
        if not data.get("title"):
            return self._error(
                422,
                "Validation Failed",
                errors=[{"resource": "Issue", "code": "missing_field", "field": "title"}],
            )
        number = max([0, *repo.issues]) + 1
        issue = self.add_issue(
            full,
            number,
            data["title"],
            body=data.get("body") or "",
            labels=data.get("labels") or [],
            assignees=data.get("assignees") or [],
            user={"login": LOGIN},
        )
        if data.get("milestone") is not None:
            issue["milestone"] = next(
                (m for m in repo.milestones if m["number"] == data["milestone"]), None
            )
        if self.hold_create_answer:
            await asyncio.sleep(self.hold_create_answer)
        return web.json_response(issue, status=201)

    async def _get_issue(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        return web.json_response(repo.issues[int(request.match_info["number"])])

    async def _update_issue(self, request: web.Request) -> web.Response:
        full, repo = self._target(request)
        issue = repo.issues[int(request.match_info["number"])]
        data = await request.json()
        for key in ("title", "body", "state"):
            if key in data:
                issue[key] = data[key]
        if "labels" in data:
            issue["labels"] = [dict(self.label(full, n)) for n in data["labels"]]
        if "assignees" in data:
            issue["assignees"] = [self.user(n) for n in data["assignees"]]
        issue["updated_at"] = stamp()
        if "milestone" in data:
            issue["milestone"] = next(
                (m for m in repo.milestones if m["number"] == data["milestone"]), None
            )
        return web.json_response(issue)

    async def _comments(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        found = repo.comments.get(int(request.match_info["number"]), [])
        return _paged(request, _since(request, found))

    async def _comment(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        number = int(request.match_info["number"])
        issue = repo.issues[number]
        cid = next(_ids)
        comment = {
            "id": cid,
            "body": (await request.json())["body"],
            "user": {"login": LOGIN, "id": 1},
            "author_association": "MEMBER",
            "created_at": stamp(),
            "updated_at": stamp(),
            "html_url": f"{issue['html_url']}#issuecomment-{cid}",
        }
        repo.comments.setdefault(number, []).append(comment)
        issue["comments"] = len(repo.comments[number])
        return web.json_response(comment, status=201)

    async def _labels(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        return _paged(request, repo.labels)

    async def _assignees(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        return _paged(request, [self.user(n) for n in repo.assignees])

    async def _assignable(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        if request.match_info["login"] not in repo.assignees:
            return self._error(404, "Not Found")
        return web.Response(status=204)

    async def _milestones(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        return web.json_response(repo.milestones)

    async def _pull(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        return web.json_response(repo.pulls[int(request.match_info["number"])])

    async def _reviewers(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        pull = repo.pulls[int(request.match_info["number"])]
        for login in (await request.json()).get("reviewers", []):
            if login not in [r["login"] for r in pull["requested_reviewers"]]:
                pull["requested_reviewers"].append({"login": login})
        return web.json_response(pull, status=201)

    async def _merge(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        number = int(request.match_info["number"])
        pull = repo.pulls[number]
        data = await request.json()
        if data.get("sha") and data["sha"] != pull["head"]["sha"]:
            return self._error(409, "Head branch was modified. Review and try the merge again.")
        if pull["merged"]:
            return self._error(405, "Pull Request is not mergeable")
        pull.update(merged=True, state="closed")
        repo.issues[number]["state"] = "closed"
        return web.json_response({"sha": "m3rg3d", "merged": True, "message": "merged"})

    async def _check_runs(self, request: web.Request) -> web.Response:
        _, repo = self._target(request)
        runs = repo.checks.get(request.match_info["ref"], [])
        return web.json_response({"total_count": len(runs), "check_runs": runs})


def _since(request: web.Request, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GitHub's `since`: only what was updated at or after it (ISO 8601)."""
    raw = request.query.get("since")
    if not raw:
        return items
    at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return [
        i
        for i in items
        if datetime.fromisoformat(str(i.get("updated_at")).replace("Z", "+00:00")) >= at
    ]


def _paged(request: web.Request, items: list[dict[str, Any]]) -> web.Response:
    """One page as GitHub serves it: `per_page` (default 30, at most 100) and `page`, with a
    `Link` header naming the next and last pages while more follow."""
    per_page = min(100, int(request.query.get("per_page", 30)))
    page = max(1, int(request.query.get("page", 1)))
    last = max(1, -(-len(items) // per_page))
    headers = {}
    if page < last:
        url = request.url

        def link(n: int, rel: str) -> str:
            return f'<{url.update_query(page=str(n), per_page=str(per_page))}>; rel="{rel}"'

        headers["Link"] = f"{link(page + 1, 'next')}, {link(last, 'last')}"
    return web.json_response(items[(page - 1) * per_page : page * per_page], headers=headers)


def _limits(remaining: int, reset: int | None = None) -> dict[str, str]:
    return {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-used": str(5000 - remaining),
        "x-ratelimit-reset": str(reset or int(time.time()) + 3600),
        "x-ratelimit-resource": "core",
    }
