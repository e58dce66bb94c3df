"""Modals and App Home tabs: `views.open` (with the trigger id of a person's click),
`views.push`, `views.update` and `views.publish`. Each person has a stack of open modals."""

from __future__ import annotations

import json
from typing import Any

from sandbox.workspace import Workspace

Args = dict[str, Any]


def loads(value: Any) -> Any:
    """A JSON argument as Slack takes it: a string of JSON (form posts) or the value itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


class Views:
    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace
        self.triggers: dict[str, str] = {}  # trigger id -> the person whose click made it

    # -- views ---------------------------------------------------------------------------------
    def _view_of(self, args: Args) -> dict[str, Any] | None:
        view = loads(args.get("view"))
        return view if isinstance(view, dict) else None

    def open(self, args: Args) -> dict[str, Any]:
        user = self.triggers.get(str(args.get("trigger_id") or ""))
        view = self._view_of(args)
        if user is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        if view is None:
            return {"ok": False, "error": "invalid_arguments"}
        shown = {**view, "id": self.ws.next_id("V")}
        self.ws.views[user] = [shown]
        self.ws.announce({"type": "views", "user": user, "views": self.ws.views[user]})
        return {"ok": True, "view": shown}

    def push(self, args: Args) -> dict[str, Any]:
        user = self.triggers.get(str(args.get("trigger_id") or ""))
        view = self._view_of(args)
        if user is None or view is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        shown = {**view, "id": self.ws.next_id("V")}
        self.ws.views[user].append(shown)
        self.ws.announce({"type": "views", "user": user, "views": self.ws.views[user]})
        return {"ok": True, "view": shown}

    def update(self, args: Args) -> dict[str, Any]:
        view = self._view_of(args)
        for user, stack in self.ws.views.items():
            for n, shown in enumerate(stack):
                if view is not None and shown["id"] == args.get("view_id"):
                    stack[n] = {**view, "id": shown["id"]}
                    self.ws.announce({"type": "views", "user": user, "views": stack})
                    return {"ok": True, "view": stack[n]}
        return {"ok": False, "error": "not_found"}

    def publish(self, args: Args) -> dict[str, Any]:
        user, view = str(args.get("user_id") or ""), self._view_of(args)
        if user not in self.ws.people or view is None:
            return {"ok": False, "error": "invalid_arguments"}
        self.ws.homes[user] = view
        self.ws.announce({"type": "home", "user": user, "view": view})
        return {"ok": True, "view": view}
