"""Who may use the web app, checked before any page or action: an ASGI middleware.

- The Host must be this server's own address (``127.0.0.1:PORT`` or ``localhost:PORT``): a
  page of another site that had its name re-pointed here (DNS rebinding) is refused, 421.
- An Origin, where a request has one, must be this server's: 403. There is no CORS: no
  ``Access-Control-*`` header is ever sent, and a preflight (OPTIONS) is refused.
- A path with a backslash is refused, 400 (``/\\host`` is another server to a browser).
- The token: ``?token=…`` signs a browser in, or ``?code=…``, a one-time code the server made
  for ``--open`` (so the token is on no command line): a session (a random id held in this
  server's memory alone, so nothing made from the token, gone at sign-out, after
  :data:`SESSION_AGE` or when the server stops) in a cookie named with the port, HttpOnly,
  SameSite=Strict, with Max-Age, and a redirect to the same address without the token. The
  cookie then, or ``Authorization: Bearer <token>`` for programs. Anything else: 401.
- A mutating request (anything but GET and HEAD) signed in by the cookie must also carry
  this server's Origin and its session's CSRF token (in the pages) in ``X-CSRF-Token`` (a
  page of another site can send neither); one with the bearer token is a program's.
- ``POST /signout`` ends the session and clears the cookie.
- Every response carries a strict Content-Security-Policy (only this app's own script and
  style, nothing inline, nothing from elsewhere) and headers against framing, sniffing and
  referrers: the token never leaves in a Referer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from subagents.loopback import allowed_hosts, allowed_origins, bearer, same_secret
from subagents.web.templates import render

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
# A browser's session lasts this long (seconds), and a one-time code this long unused.
SESSION_AGE = 12 * 3600
CODE_AGE = 120
SIGN_OUT = "/signout"


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
        # Held in memory only: the sessions' CSRF tokens are made from it.
        self.secret = secrets.token_bytes(32)
        self.sessions: dict[str, float] = {}  # id -> when it ends (monotonic)
        self.codes: dict[str, float] = {}  # one-time code -> until when it signs in

    def one_time_code(self) -> str:
        """A code that signs one browser in, once, within :data:`CODE_AGE` seconds."""
        code = secrets.token_urlsafe(24)
        self.codes[code] = time.monotonic() + CODE_AGE
        return code

    def _csrf(self, session: str) -> str:
        return hmac.new(self.secret, session.encode(), hashlib.sha256).hexdigest()

    def _session(self, headers: dict[bytes, bytes]) -> str | None:
        given = _cookies(headers.get(b"cookie", b"")).get(self.cookie, "")
        now = time.monotonic()
        for session, until in list(self.sessions.items()):
            if until < now:
                del self.sessions[session]
            elif same_secret(given, session):
                return session
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        method = str(scope.get("method") or "GET").upper()
        if b"\\" in (scope.get("raw_path") or b"") or "\\" in str(scope.get("path") or ""):
            await _answer(send, 400, "a backslash in the path names nothing here")
            return
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
        if ("token" in query or "code" in query) and method in SAFE_METHODS:
            await self._sign_in(scope, send, query)
            return
        session = None
        given = bearer(list(headers.items()))
        if given is not None:
            if not same_secret(given, self.token):
                await _answer(send, 401, "wrong bearer token")
                return
        else:
            session = self._session(headers)
            if session is None:
                await _answer(send, 401, render("signin.html"))
                return
        csrf = self._csrf(session) if session is not None else ""
        if (
            method not in SAFE_METHODS
            and session is not None
            and (origin is None or not same_secret(headers.get(CSRF_HEADER, b""), csrf))
        ):
            await _answer(send, 403, "missing or wrong CSRF token")
            return
        if scope.get("path") == SIGN_OUT and method == "POST":
            self.sessions.pop(session or "", None)
            gone = f"{self.cookie}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
            await _answer(send, 200, "signed out", [(b"set-cookie", gone.encode())])
            return

        async def secured(message: Message) -> None:
            if message.get("type") == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app({**scope, CSRF_SCOPE_KEY: csrf}, receive, secured)

    def _code_ok(self, code: str) -> bool:
        now = time.monotonic()
        for known, until in list(self.codes.items()):
            if until < now:
                del self.codes[known]
            elif same_secret(code, known):
                del self.codes[known]  # once
                return True
        return False

    async def _sign_in(self, scope: Scope, send: Send, query: dict[str, str]) -> None:
        if not (
            same_secret(query["token"], self.token)
            if "token" in query
            else self._code_ok(query["code"])
        ):
            await _answer(send, 401, render("signin.html"))
            return
        session = secrets.token_urlsafe(32)
        self.sessions[session] = time.monotonic() + SESSION_AGE
        rest = urlencode({k: v for k, v in query.items() if k not in ("token", "code")})
        path = scope.get("raw_path") or str(scope.get("path") or "/").encode("utf-8")
        # Only a path of this server ("//host/…" would be another server's).
        path = b"/" + path.lstrip(b"/")
        target = path + (b"?" + rest.encode() if rest else b"")
        cookie = (
            f"{self.cookie}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_AGE}"
        )
        await _answer(
            send,
            303,
            "signed in",
            [(b"location", target), (b"set-cookie", cookie.encode())],
        )
