"""The Web API methods the bot calls, answered from the sandbox's workspace.

Arguments arrive as a form or as JSON, like Slack takes them; answers have Slack's shape,
`{"ok": true, ...}` or `{"ok": false, "error": ...}`. Tokens: any `xoxb-` for the bot's
methods, any `xapp-` for `apps.connections.open`."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from aiohttp import web

from sandbox import prompts, streams
from sandbox.guard import Guard
from sandbox.views import Views, loads
from sandbox.workspace import BOT_ID, BOT_USER_ID, TEAM_ID, Message, Workspace

Args = dict[str, Any]
Handler = Callable[[Args, web.Request], dict[str, Any]]


class WebApi:
    def __init__(self, workspace: Workspace, guard: Guard) -> None:
        self.ws, self.guard = workspace, guard
        self.views = Views(workspace)
        self.calls: dict[str, int] = {}
        self.handlers: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "chat.postMessage": self._post,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.postEphemeral": self._ephemeral,
            "chat.getPermalink": self._permalink,
            "chat.scheduleMessage": lambda a, r: {"ok": True, "scheduled_message_id": "Q1"},
            "chat.scheduledMessages.list": self._scheduled_list,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "conversations.info": self._info,
            "conversations.members": self._members,
            "conversations.open": self._open,
            "conversations.setTopic": self._set_topic,
            "files.info": self._file_info,
            "users.info": self._users_info,
            "users.lookupByEmail": self._lookup,
            "usergroups.users.list": lambda a, r: {"ok": False, "error": "no_such_subteam"},
            "views.open": lambda a, r: self.views.open(a),
            "views.push": lambda a, r: self.views.push(a),
            "views.update": lambda a, r: self.views.update(a),
            "views.publish": lambda a, r: self.views.publish(a),
            "chat.startStream": lambda a, r: streams.start(self.ws, a),
            "chat.appendStream": lambda a, r: streams.append(self.ws, a),
            "chat.stopStream": lambda a, r: streams.stop(self.ws, a),
            "agents.sessions.setStatus": lambda a, r: {"ok": True},
            "assistant.threads.setStatus": self._status,
            "assistant.threads.setSuggestedPrompts": lambda a, r: prompts.set_suggested(self.ws, a),
            "assistant.threads.setTitle": lambda a, r: {"ok": True},
            "reactions.add": lambda a, r: {"ok": True},
        }

    async def handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: Args = dict(request.query)
        if request.method == "POST":
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update({k: str(v) for k, v in (await request.post()).items()})
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        token = token or str(args.get("token", ""))
        wanted = self.guard.app_token if method == "apps.connections.open" else self.guard.bot_token
        self.calls[method] = self.calls.get(method, 0) + 1
        handler = self.handlers.get(method)
        if not hmac.compare_digest(token.encode(), wanted.encode()):
            body: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
        elif handler is None:
            body = {"ok": False, "error": "unknown_method"}
        else:
            body = handler(args, request)
        return web.json_response(body)

    # -- auth and connections -------------------------------------------------------------------
    def _auth_test(self, _args: Args, request: web.Request) -> dict[str, Any]:
        return {
            "ok": True,
            "url": f"http://{request.host}/",
            "team": "Sandbox",
            "user": "countersign",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
        }

    def _connections_open(self, _args: Args, request: web.Request) -> dict[str, Any]:
        ticket = self.guard.new_ticket()
        return {"ok": True, "url": f"ws://{request.host}/socket-mode?ticket={ticket}"}

    # -- messages ------------------------------------------------------------------------------
    def _channel_ok(self, args: Args) -> str | None:
        channel = str(args.get("channel") or "")
        return channel if channel in self.ws.channels else None

    def _post(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        blocks = loads(args.get("blocks"))
        metadata = loads(args.get("metadata"))
        text = str(args.get("text") or "")
        if len(text) > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        ts = self.ws.next_ts()
        message = Message(
            ts, text, BOT_USER_ID, str(args.get("thread_ts") or "") or None, blocks, metadata
        )
        self.ws.add(message, channel)
        return {"ok": True, "channel": channel, "ts": ts, "message": message.shown()}

    def _update(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        message = self.ws.find(channel or "", str(args.get("ts")))
        if channel is None or message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.streaming:
            return {"ok": False, "error": "streaming_state_conflict"}
        if "text" in args:
            message.text = str(args.get("text") or "")
        if "blocks" in args:
            message.blocks = loads(args.get("blocks")) or None
        self.ws.changed(channel, message)
        return {"ok": True, "channel": channel, "ts": message.ts, "text": message.text}

    def _delete(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        if channel is None or self.ws.find(channel, str(args.get("ts"))) is None:
            return {"ok": False, "error": "message_not_found"}
        self.ws.remove(channel, str(args.get("ts")))
        return {"ok": True, "channel": channel, "ts": args.get("ts")}

    def _ephemeral(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        user = str(args.get("user") or "")
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if user not in self.ws.channels[channel].members:
            return {"ok": False, "error": "user_not_in_channel"}
        ts = self.ws.next_ts()
        message = Message(
            ts,
            str(args.get("text") or ""),
            BOT_USER_ID,
            str(args.get("thread_ts") or "") or None,
            loads(args.get("blocks")),
            visible_to=user,
        )
        self.ws.add(message, channel)
        return {"ok": True, "message_ts": ts}

    def _permalink(self, args: Args, request: web.Request) -> dict[str, Any]:
        """As Slack links a reply: with its thread (`thread_ts`, `cid`), so it opens there."""
        channel, ts = str(args.get("channel")), str(args.get("message_ts"))
        link = f"http://{request.host}/archives/{channel}/p{ts.replace('.', '')}"
        found = self.ws.find(channel, ts)
        if found is not None and found.thread_ts and found.thread_ts != ts:
            link += f"?thread_ts={found.thread_ts}&cid={channel}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _scheduled_list(self, _args: Args, _request: web.Request) -> dict[str, Any]:
        return {"ok": True, "scheduled_messages": [], "response_metadata": {"next_cursor": ""}}

    def _status(self, args: Args, _request: web.Request) -> dict[str, Any]:
        key = f"{args.get('channel_id')}:{args.get('thread_ts')}"
        self.ws.statuses[key] = str(args.get("status") or "")
        self.ws.announce({"type": "status", "key": key, "status": self.ws.statuses[key]})
        return {"ok": True}

    # -- conversations -------------------------------------------------------------------------
    @staticmethod
    def _page(found: list[Message], args: Args) -> list[Message]:
        oldest, latest = float(args.get("oldest") or 0), float(args.get("latest") or 1e12)
        inclusive = str(args.get("inclusive")).lower() in ("1", "true")
        return [
            m
            for m in found
            if (oldest <= float(m.ts) <= latest)
            if inclusive or (float(m.ts) not in (oldest, latest))
        ]

    def _history(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        top = [
            m
            for m in self.ws.messages[channel]
            if m.visible_to is None and (m.thread_ts is None or m.thread_ts == m.ts)
        ]
        page = sorted(self._page(top, args), key=lambda m: float(m.ts), reverse=True)
        limit = min(int(args.get("limit") or 100), 999)
        return {
            "ok": True,
            "messages": [m.shown() for m in page[:limit]],
            "has_more": len(page) > limit,
            "response_metadata": {"next_cursor": ""},
        }

    def _replies(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        ts = str(args.get("ts"))
        parent = self.ws.find(channel or "", ts)
        if channel is None or parent is None:
            return {"ok": False, "error": "thread_not_found"}
        replies = [
            m
            for m in self.ws.messages[channel]
            if m.thread_ts == ts and m.ts != ts and m.visible_to is None
        ]
        page = [parent, *self._page(replies, args)]
        return {
            "ok": True,
            "messages": [m.shown() for m in page],
            "has_more": False,
            "response_metadata": {"next_cursor": ""},
        }

    def _file_info(self, args: Args, _request: web.Request) -> dict[str, Any]:
        found = self.ws.files.get(str(args.get("file") or ""))
        if found is None:
            return {"ok": False, "error": "file_not_found"}
        public = not self.ws.channels[found.channel].private
        return {"ok": True, "file": found.slack(self.ws.base, public)}

    def _info(self, args: Args, _request: web.Request) -> dict[str, Any]:
        info = self.ws.channel_info(str(args.get("channel")))
        if info is None:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "channel": info}

    def _members(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        members = self.ws.channels[channel].members
        return {"ok": True, "members": members, "response_metadata": {"next_cursor": ""}}

    def _open(self, args: Args, _request: web.Request) -> dict[str, Any]:
        users = str(args.get("users") or "")
        if users not in self.ws.people:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "channel": {"id": self.ws.dm_of(users)}}

    def _set_topic(self, args: Args, _request: web.Request) -> dict[str, Any]:
        channel = self._channel_ok(args)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        self.ws.channels[channel].topic = str(args.get("topic") or "")
        return {"ok": True, "channel": self.ws.channel_info(channel)}

    def _users_info(self, args: Args, _request: web.Request) -> dict[str, Any]:
        user = str(args.get("user") or "")
        if user not in self.ws.people and user != BOT_USER_ID:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": self.ws.user_info(user)}

    def _lookup(self, args: Args, _request: web.Request) -> dict[str, Any]:
        local = str(args.get("email") or "").split("@")[0].lower()
        person = next((p for p in self.ws.people.values() if p.name.lower() == local), None)
        if person is None:
            return {"ok": False, "error": "users_not_found"}
        return {"ok": True, "user": self.ws.user_info(person.id)}
