"""Who may use the web app, checked before any page or action: an ASGI middleware.

- The Host must be this server's own address (``127.0.0.1:PORT`` or ``localhost:PORT``): a
  page of another site that had its name re-pointed here (DNS rebinding) is refused, 421.
- An Origin, where a request has one, must be this server's: 403. There is no CORS: no
  ``Access-Control-*`` header is ever sent, and a preflight (OPTIONS) is refused.
- The token: ``?token=…`` in the address the server prints signs a browser in (a cookie,
  HttpOnly, SameSite=Strict, and a redirect to the same address without the token); the
  cookie then, or ``Authorization: Bearer <token>`` for programs. Anything else: 401.
- A mutating request (anything but GET and HEAD) signed in by the cookie must also carry
  this server's Origin and the CSRF token of its pages in ``X-CSRF-Token`` (a page of
  another site can send neither); one with the bearer token is a program's, not a browser's.
- Every response carries a strict Content-Security-Policy (only this app's own script and
  style, nothing inline, nothing from elsewhere) and headers against framing, sniffing and
  referrers: the token never leaves in a Referer.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from subagents.loopback import allowed_hosts, allowed_origins, bearer, same_secret

CSRF_HEADER = b"x-csrf-token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
SAFE_METHODS = frozenset({"GET", "HEAD"})
# Where the app keeps the CSRF token for the pages it renders.
CSRF_SCOPE_KEY = "subagents.csrf"

SIGN_IN = (
    "<!doctype html><meta charset=utf-8><title>subagents: sign in</title>"
    "<p>Not signed in. Open the address <code>subagents web</code> printed when it started "
    "(it carries the token), or send <code>Authorization: Bearer &lt;token&gt;</code>.</p>"
)


def derived(token: str, purpose: str) -> str:
    """A secret for one purpose (the cookie's value, the CSRF token) made from the token, so
    neither is the token itself, and both stay valid across restarts with the same token."""
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers") or []}


def _cookies(raw: bytes) -> dict[str, str]:
    out = {}
    for part in raw.decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            out[name] = value
    return out


async def _answer(
    send: Send, status: int, body: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = body.encode()
    kind = (
        b"text/html; charset=utf-8"
        if body.startswith("<!doctype")
        else b"text/plain; charset=utf-8"
    )
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(data)).encode()),
                *SECURITY_HEADERS,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class Access:
    """The checks above, around ``app``, for a server on 127.0.0.1:``port``."""

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.hosts = {h.encode() for h in allowed_hosts(port)}
        self.origins = {o.encode() for o in allowed_origins(port)}
        # Cookies are per host, not per port: each server has its own.
        self.cookie = f"subagents_web_{port}"
        self.session = derived(token, "cookie")
        self.csrf = derived(token, "csrf")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        method = str(scope.get("method") or "GET").upper()
        if headers.get(b"host") not in self.hosts:
            await _answer(send, 421, "wrong Host: this server answers to 127.0.0.1 only")
            return
        origin = headers.get(b"origin")
        if origin is not None and origin not in self.origins:
            await _answer(send, 403, "foreign Origin refused (no cross-origin requests)")
            return
        if method == "OPTIONS":
            await _answer(send, 405, "no cross-origin requests", [(b"allow", b"GET, HEAD, POST")])
            return
        query = dict(parse_qsl((scope.get("query_string") or b"").decode("latin-1")))
        if "token" in query and method in SAFE_METHODS:
            await self._sign_in(scope, send, query)
            return
        by_bearer = False
        given = bearer(list(headers.items()))
        if given is not None:
            by_bearer = same_secret(given, self.token)
            if not by_bearer:
                await _answer(send, 401, "wrong bearer token")
                return
        elif not same_secret(
            _cookies(headers.get(b"cookie", b"")).get(self.cookie, ""), self.session
        ):
            await _answer(send, 401, SIGN_IN)
            return
        if (
            method not in SAFE_METHODS
            and not by_bearer
            and (origin is None or not same_secret(headers.get(CSRF_HEADER, b""), self.csrf))
        ):
            await _answer(send, 403, "missing or wrong CSRF token")
            return

        async def secured(message: Message) -> None:
            if message.get("type") == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app({**scope, CSRF_SCOPE_KEY: self.csrf}, receive, secured)

    async def _sign_in(self, scope: Scope, send: Send, query: dict[str, str]) -> None:
        if not same_secret(query["token"], self.token):
            await _answer(send, 401, SIGN_IN)
            return
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        path = scope.get("raw_path") or str(scope.get("path") or "/").encode("utf-8")
        # Only a path of this server ("//host/…" would be another server's).
        path = b"/" + path.lstrip(b"/")
        target = path + (b"?" + rest.encode() if rest else b"")
        cookie = f"{self.cookie}={self.session}; HttpOnly; SameSite=Strict; Path=/"
        await _answer(
            send,
            303,
            "signed in",
            [(b"location", target), (b"set-cookie", cookie.encode())],
        )
