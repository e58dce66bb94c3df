"""A fake of Linear's GraphQL API on 127.0.0.1: the operations the `linear` pack sends, found by
`operationName` (the document must define that operation), answered in Linear's shapes, with
its error shape (`errors[].extensions.code`, `userPresentableMessage`) and rate-limit headers.
Every request is recorded; tests change data between card and click, rename a state, switch on
a rate limit, or lose the answer to a create after it was made."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.server import ThreadedServer

API_KEY = "lin_api_fake_0000000000000000000000000000"


@dataclass
class Seen:
    operation: str
    variables: dict[str, Any]
    at: float = field(default_factory=time.monotonic)  # when it arrived


def _id() -> str:
    return str(uuid.uuid4())


class FakeLinear:
    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.rate_limited_for: float | None = None  # seconds until the limit resets
        self.limited_times = 0
        self.lose_answer_of: str | None = None  # do this operation, then drop the answer
        eng = {"id": _id(), "key": "ENG", "name": "Engineering"}
        ops = {"id": _id(), "key": "OPS", "name": "Operations"}
        self.teams = [eng, ops]
        self.states = {
            t["id"]: [
                {"id": _id(), "name": n, "type": k, "position": i}
                for i, (n, k) in enumerate(
                    [("Todo", "unstarted"), ("In Progress", "started"), ("Done", "completed")]
                )
            ]
            for t in self.teams
        }
        self.labels: list[dict[str, Any]] = [
            {"id": _id(), "name": "Bug", "team": {"id": eng["id"], "key": "ENG"}},
            {"id": _id(), "name": "Customer", "team": None},
        ]
        self.users = [
            {"id": _id(), "name": "Dana Smith", "displayName": "dana", "email": "dana@x.co"},
            {"id": _id(), "name": "Alex Kim", "displayName": "alexk", "email": "alex.k@x.co"},
            {"id": _id(), "name": "Alex Lee", "displayName": "alexl", "email": "alex.l@x.co"},
        ]
        self.projects = [{"id": _id(), "name": "Checkout revamp"}]
        self.issues: dict[str, dict[str, Any]] = {}
        self.comments: dict[str, dict[str, Any]] = {}
        self._server = ThreadedServer(self._build())

    def start(self) -> FakeLinear:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def api_url(self) -> str:
        return f"{self._server.url}/graphql"

    def mutations(self) -> list[Seen]:
        return [
            r
            for r in self.requests
            if r.operation in ("CreateIssue", "UpdateIssue", "CreateComment")
        ]

    def state(self, team_key: str, name: str) -> dict[str, Any]:
        team = next(t for t in self.teams if t["key"] == team_key)
        return next(s for s in self.states[team["id"]] if s["name"] == name)

    def add_issue(self, team_key: str, title: str, **extra: Any) -> dict[str, Any]:
        team = next(t for t in self.teams if t["key"] == team_key)
        number = 1 + sum(1 for i in self.issues.values() if i["team"]["id"] == team["id"])
        identifier = f"{team_key}-{number}"
        issue = {
            "id": extra.pop("id", None) or _id(),
            "identifier": identifier,
            "title": title,
            "description": "",
            "priority": 0,
            "priorityLabel": "No priority",
            "url": f"https://linear.app/acme/issue/{identifier}",
            "updatedAt": "2026-11-23T10:00:00.000Z",
            "team": team,
            "state": self.states[team["id"]][0],
            "assignee": None,
            "labels": {"nodes": []},
            "project": None,
            "cycle": {"id": _id(), "number": 12, "name": "Cycle 12"},
            "comments": {"nodes": []},
            **extra,
        }
        self.issues[issue["id"]] = issue
        return issue

    def find(self, ref: str) -> dict[str, Any] | None:
        return self.issues.get(ref) or next(
            (i for i in self.issues.values() if i["identifier"] == ref), None
        )

    # -- HTTP -------------------------------------------------------------------------------
    def _build(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/graphql", self._graphql)
        return app

    @staticmethod
    def _errors(message: str, code: str, headers: dict[str, str] | None = None) -> web.Response:
        body = {
            "errors": [
                {
                    "message": message,
                    "extensions": {
                        "code": code,
                        "type": code.lower(),
                        "userPresentableMessage": message,
                    },
                }
            ],
            "data": None,
        }
        return web.json_response(body, status=400, headers=headers)

    async def _graphql(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        operation = str(body.get("operationName"))
        variables = body.get("variables") or {}
        self.requests.append(Seen(operation, variables))
        if request.headers.get("Authorization") != API_KEY:
            return self._errors(
                "Authentication required, not authenticated", "AUTHENTICATION_ERROR"
            )
        document = str(body.get("query"))
        if f"query {operation}" not in document and f"mutation {operation}" not in document:
            return self._errors(
                f'Unknown operation named "{operation}".', "GRAPHQL_VALIDATION_FAILED"
            )
        if self.rate_limited_for is not None and self.limited_times > 0:
            self.limited_times -= 1
            reset = int((time.time() + self.rate_limited_for) * 1000)
            return self._errors(
                "Rate limit exceeded",
                "RATELIMITED",
                {
                    "X-RateLimit-Requests-Limit": "1500",
                    "X-RateLimit-Requests-Remaining": "0",
                    "X-RateLimit-Requests-Reset": str(reset),
                },
            )
        handler = getattr(self, f"_op_{operation}", None)
        if handler is None:
            return self._errors(f"Cannot query operation {operation}", "GRAPHQL_VALIDATION_FAILED")
        result = handler(variables)
        if isinstance(result, web.StreamResponse):
            return result
        if operation == self.lose_answer_of:
            self.lose_answer_of = None
            assert request.transport is not None
            request.transport.close()  # made, but the answer never arrives
            return web.Response()
        return web.json_response(
            {"data": result},
            headers={
                "X-RateLimit-Requests-Remaining": "1499",
                "X-RateLimit-Requests-Limit": "1500",
            },
        )

    def _not_found(self, kind: str) -> web.Response:
        return self._errors(
            f"Entity not found: {kind} - Could not find referenced {kind}.", "INVALID_INPUT"
        )

    def _op_Viewer(self, v: dict[str, Any]) -> Any:
        return {"viewer": {"id": self.users[0]["id"], "name": "Countersign", "email": "bot@x.co"}}

    def _op_Teams(self, v: dict[str, Any]) -> Any:
        return {"teams": {"nodes": self.teams}}

    def _op_WorkflowStates(self, v: dict[str, Any]) -> Any:
        return {"workflowStates": {"nodes": self.states.get(v["teamId"], [])}}

    def _op_Labels(self, v: dict[str, Any]) -> Any:
        return {"issueLabels": {"nodes": self.labels}}

    def _op_Members(self, v: dict[str, Any]) -> Any:
        return {"users": {"nodes": [u | {"active": True} for u in self.users]}}

    def _op_Projects(self, v: dict[str, Any]) -> Any:
        return {"projects": {"nodes": self.projects}}

    def _op_SearchIssues(self, v: dict[str, Any]) -> Any:
        term = str(v["term"]).lower()
        found = [i for i in self.issues.values() if term in i["title"].lower()]
        return {"searchIssues": {"nodes": found[: int(v["first"])]}}

    def _op_GetIssue(self, v: dict[str, Any]) -> Any:
        issue = self.find(v["id"])
        return self._not_found("Issue") if issue is None else {"issue": issue}

    def _op_GetComment(self, v: dict[str, Any]) -> Any:
        comment = self.comments.get(v["id"])
        return self._not_found("Comment") if comment is None else {"comment": comment}

    def _apply(self, issue: dict[str, Any], data: dict[str, Any]) -> None:
        team = issue["team"]
        for key in ("title", "description", "priority"):
            if key in data:
                issue[key] = data[key]
        if "stateId" in data:
            issue["state"] = next(s for s in self.states[team["id"]] if s["id"] == data["stateId"])
        if "assigneeId" in data:
            issue["assignee"] = next(u for u in self.users if u["id"] == data["assigneeId"])
        if "labelIds" in data:
            issue["labels"] = {"nodes": [lb for lb in self.labels if lb["id"] in data["labelIds"]]}
        if "projectId" in data:
            issue["project"] = next(p for p in self.projects if p["id"] == data["projectId"])

    def _op_CreateIssue(self, v: dict[str, Any]) -> Any:
        data = v["input"]
        if data.get("id") and data["id"] in self.issues:
            return self._errors("Entity with this id already exists", "INVALID_INPUT")
        team = next((t for t in self.teams if t["id"] == data.get("teamId")), None)
        if team is None:
            return self._not_found("Team")
        issue = self.add_issue(team["key"], data["title"], id=data.get("id"))
        self._apply(issue, data)
        return {"issueCreate": {"success": True, "issue": issue}}

    def _op_UpdateIssue(self, v: dict[str, Any]) -> Any:
        issue = self.find(v["id"])
        if issue is None:
            return self._not_found("Issue")
        self._apply(issue, v["input"])
        return {"issueUpdate": {"success": True, "issue": issue}}

    def _op_CreateComment(self, v: dict[str, Any]) -> Any:
        data = v["input"]
        issue = self.find(data["issueId"])
        if issue is None:
            return self._not_found("Issue")
        comment = {"id": data.get("id") or _id(), "body": data["body"], "url": issue["url"]}
        self.comments[comment["id"]] = comment
        issue["comments"]["nodes"].append(comment | {"user": {"name": "Countersign"}})
        return {"commentCreate": {"success": True, "comment": comment}}
