"""Only the sandbox's own page (and the bot it starts) may drive the sandbox.

A page on another site can reach 127.0.0.1 from the person's browser: it could post as Alice,
approve as Bob, or read `#exec`. So every route (page, Web API, WebSocket, Socket Mode, demo
model, files) passes these checks, in one middleware:

* `Host` must be the sandbox's own address (127.0.0.1, localhost or [::1] and the port it
  listens on): a DNS-rebinding page (evil.example resolving to 127.0.0.1) sends its own name;
* `Origin`, when a browser sends one, must be the page's own origin (`http://` + that Host): a
  fetch or WebSocket from another site is refused;
* the per-start random key must come with the request: the printed address carries it
  (`/?key=…`, which also sets a same-site cookie for the page's own requests), the bot's tokens
  are `xoxb-KEY` / `xapp-KEY` (and the demo model's key `sk-sandbox-KEY`). Two routes carry
  their own unguessable capability instead, as Slack's do: the Socket Mode URL's `ticket`
  (handed out by `apps.connections.open` to the holder of `xapp-KEY`) and a `response_url`;
* a POST must be JSON, so a form posted from another site is refused; the Web API also takes
  Slack's form posts, but only with the token in an `Authorization` header, which a form
  cannot send.

Refusals are 403 (415 for a POST that is not JSON) and never reach a handler.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import hdrs, web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
TOKEN_PREFIXES = ("xoxb-", "xapp-", "sk-sandbox-")
# Routes that carry a capability of their own instead of the key (see the module docstring).
OWN_CAPABILITY = ("/socket-mode", "/response/")


def new_key() -> str:
    return secrets.token_hex(16)


@dataclass
class Guard:
    key: str = field(default_factory=new_key)
    bound_host: str = "127.0.0.1"  # the address the server listens on
    tickets: set[str] = field(default_factory=set)  # Socket Mode URLs handed out

    # -- what the bot and the page are given ------------------------------------------------
    @property
    def bot_token(self) -> str:
        return f"xoxb-{self.key}"

    @property
    def app_token(self) -> str:
        return f"xapp-{self.key}"

    @property
    def model_key(self) -> str:
        return f"sk-sandbox-{self.key}"

    def cookie(self, port: int) -> str:
        """The page's cookie, one per port (browsers share cookies across a host's ports)."""
        return f"sandbox-key-{port}"

    def new_ticket(self) -> str:
        ticket = secrets.token_urlsafe(24)
        self.tickets.add(ticket)
        return ticket

    # -- checks ------------------------------------------------------------------------------
    def hosts(self, port: int) -> set[str]:
        names = set(LOOPBACK)
        if self.bound_host not in ("", "0.0.0.0", "::"):  # noqa: S104 - compared, not bound
            names.add(f"[{self.bound_host}]" if ":" in self.bound_host else self.bound_host)
        found = {f"{name}:{port}" for name in names}
        return found | (names if port == 80 else set())

    def _same(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.key.encode())

    def has_key(self, request: web.Request, port: int) -> bool:
        bearer = request.headers.get(hdrs.AUTHORIZATION, "").removeprefix("Bearer ").strip()
        for prefix in TOKEN_PREFIXES:
            if bearer.startswith(prefix) and self._same(bearer.removeprefix(prefix)):
                return True
        for given in (
            request.query.get("key", ""),
            request.headers.get("X-Sandbox-Key", ""),
            request.cookies.get(self.cookie(port), ""),
        ):
            if given and self._same(given):
                return True
        return False

    def refusal(self, request: web.Request) -> web.Response | None:
        """Why `request` may not drive the sandbox (a response to send), or None."""
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        if not sock:
            return _refuse(403, "no local address")
        port = int(sock[1])
        host = request.headers.get(hdrs.HOST, "").lower()
        if host not in self.hosts(port):
            return _refuse(403, "this is the sandbox's address only: wrong Host")
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is not None and origin.lower() != f"http://{host}":
            return _refuse(403, "only the sandbox's own page may drive it: wrong Origin")
        if not request.path.startswith(OWN_CAPABILITY) and not self.has_key(request, port):
            return _refuse(403, "open the address the sandbox printed (it carries its key)")
        if request.method not in ("GET", "HEAD", "OPTIONS") and not _json_or_slack_form(request):
            return _refuse(415, "the sandbox takes JSON (Content-Type: application/json)")
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        response = await handler(request)
        if request.path == "/" and request.query.get("key") and not response.prepared:
            port = int(request.transport.get_extra_info("sockname")[1])  # type: ignore[union-attr]
            response.set_cookie(
                self.cookie(port), self.key, httponly=True, samesite="Strict", path="/"
            )
        return response


def _json_or_slack_form(request: web.Request) -> bool:
    if request.content_type == "application/json":
        return True
    # Slack's clients post forms to the Web API with the token in a header (a browser's form
    # cannot set one).
    return request.path.startswith("/api/") and hdrs.AUTHORIZATION in request.headers


def _refuse(status: int, why: str) -> web.Response:
    return web.Response(status=status, text=why)
