"""`HTTPTransport`: one HTTP call to a server, nothing else (no retries, no policy).

The client above it decides what to retry and when; this layer turns aiohttp's errors into
`EngineTransportError` (connection refused or reset, dropped mid-reply, timed out) and gives
every answer, 4xx and 5xx included, back as an `HTTPReply` value.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from rollout.engines.base import EngineError

__all__ = ["EngineTransportError", "HTTPReply", "HTTPTransport"]


class EngineTransportError(EngineError):
    """The call did not get an answer: the server is unreachable, dropped it, or timed out."""


@dataclass(frozen=True, slots=True)
class HTTPReply:
    """A server's answer to one call."""

    status: int
    body: bytes
    url: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON (an `EngineError` that shows the body when it is not)."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise EngineError(
                f"{self.url} answered {self.status} with a body that is not JSON: "
                f"{self.text()[:200]!r}"
            ) from None

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def error_message(self) -> str:
        """SGLang's `{"error": {"message": ...}}` (or the raw body) for error reports."""
        try:
            body = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return self.text()[:500]
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return str(error.get("message", error))
        return str(error or body)[:500]


class HTTPTransport:
    """A pooled aiohttp session; create it on the loop that uses it, `aclose` it after."""

    def __init__(self, *, connect_timeout_s: float) -> None:
        self._connect_timeout_s = connect_timeout_s
        self._session: aiohttp.ClientSession | None = None
        self.calls = 0  # requests sent so far (benchmarks check what makes none)

    async def request(
        self, method: str, url: str, *, json_body: Any = None, timeout_s: float
    ) -> HTTPReply:
        """Send one request and read the whole answer within `timeout_s`."""
        session = self._open()
        self.calls += 1
        data = None if json_body is None else orjson.dumps(json_body)
        headers = {"Content-Type": "application/json"} if data is not None else None
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=self._connect_timeout_s)
        try:
            async with session.request(
                method, url, data=data, headers=headers, timeout=timeout
            ) as response:
                body = await response.read()
                return HTTPReply(response.status, body, url)
        except TimeoutError as exc:
            raise EngineTransportError(f"{method} {url} timed out after {timeout_s:g} s") from exc
        except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError) as exc:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)
            raise EngineTransportError(f"{method} {url} failed: {detail}") from exc

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session
