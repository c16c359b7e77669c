"""The agent API checks every call before it reaches a sample (real HTTP, aiohttp client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from rollout.agent_api.server import AgentApiServer, ApiReply, SampleEndpoint
from rollout.agent_api.validation import bearer_key, key_matches

GOOD_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Recorder:
    """A sample's session: records the calls that reach it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, body: dict[str, Any]) -> ApiReply:
        self.calls.append(body)
        return 200, {"object": "chat.completion", "choices": []}


@pytest.fixture
async def server() -> AsyncIterator[AgentApiServer]:
    async with AgentApiServer(max_body_mb=0.01) as started:  # 10 KiB
        yield started


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _post(
    http: aiohttp.ClientSession, url: str, key: str | None, data: bytes | None = None, **kw: Any
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with http.post(url, data=data, headers=headers, **kw) as response:
        return response.status, await response.json(content_type=None)


def _chat(server: AgentApiServer, sample: SampleEndpoint) -> str:
    return server.base_url(sample.token) + "/chat/completions"


async def test_a_call_with_its_samples_key_reaches_the_sample(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    session = Recorder()
    sample = server.register(session)
    status, _ = await _post(http, _chat(server, sample), sample.api_key, json=GOOD_BODY)
    assert status == 200 and session.calls == [GOOD_BODY]


async def test_another_samples_key_is_refused_403_and_neither_sample_is_touched(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    victim, attacker = Recorder(), Recorder()
    victims, attackers = server.register(victim), server.register(attacker)
    status, body = await _post(http, _chat(server, victims), attackers.api_key, json=GOOD_BODY)
    assert status == 403 and body["error"]["type"] == "permission_error"
    assert "not this sample's" in body["error"]["message"]
    assert victim.calls == [] and attacker.calls == []


async def test_a_token_is_not_a_key(server: AgentApiServer, http: aiohttp.ClientSession) -> None:
    """The URL token (in logs and URLs) does not open the sample: only its key does."""
    session = Recorder()
    sample = server.register(session)
    status, _ = await _post(http, _chat(server, sample), sample.token, json=GOOD_BODY)
    assert status == 403 and session.calls == []


@pytest.mark.parametrize("header", [None, "Basic abc", "Bearer ", "token"])
async def test_a_call_without_a_bearer_key_is_refused_401(
    server: AgentApiServer, http: aiohttp.ClientSession, header: str | None
) -> None:
    session = Recorder()
    sample = server.register(session)
    headers = {"Authorization": header} if header is not None else {}
    async with http.post(_chat(server, sample), json=GOOD_BODY, headers=headers) as response:
        body = await response.json()
    assert response.status == 401 and body["error"]["type"] == "authentication_error"
    assert session.calls == []


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b'{"messages": [{"role": "user", "content": "hi"}], "n": "abc"}', "`n` must be an"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "n": 2}', "n must be 1"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "`stream`"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": true}', "streaming"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "tools": 5}', "`tools` must"),
        (b'{"messages": "hello"}', "non-empty list"),
        (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "role"),
        (b"[1, 2]", "JSON object"),
        (b'{"messages": ', "not JSON"),
        (b'{"messages": "\xff\xfe"}', "not UTF-8"),
        (b"", "not JSON"),
    ],
)
async def test_every_malformed_body_is_a_400_error_object_and_never_reaches_the_sample(
    server: AgentApiServer, http: aiohttp.ClientSession, data: bytes, says: str
) -> None:
    session = Recorder()
    sample = server.register(session)
    status, body = await _post(http, _chat(server, sample), sample.api_key, data=data)
    assert status == 400 and says in body["error"]["message"], body
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == 400
    assert session.calls == []


async def test_a_body_over_the_limit_is_a_413_error_object(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    session = Recorder()
    sample = server.register(session)
    big = {"messages": [{"role": "user", "content": "x" * 20_000}]}
    status, body = await _post(http, _chat(server, sample), sample.api_key, json=big)
    assert status == 413 and "max_body_mb" in body["error"]["message"]
    assert session.calls == []


@pytest.mark.parametrize("path", ["/completions", "/responses", "/embeddings", "/../x"])
async def test_unknown_routes_are_json_404s(
    server: AgentApiServer, http: aiohttp.ClientSession, path: str
) -> None:
    sample = server.register(Recorder())
    status, body = await _post(http, server.base_url(sample.token) + path, sample.api_key,
                               json=GOOD_BODY)  # fmt: skip
    assert status == 404 and "chat/completions" in body["error"]["message"]


async def test_a_wrong_method_is_a_json_405(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    sample = server.register(Recorder())
    async with http.get(_chat(server, sample)) as response:
        body = await response.json()
    assert response.status == 405 and body["error"]["code"] == 405


async def test_an_unknown_sample_is_a_404(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    sample = server.register(Recorder())
    server.unregister(sample.token)
    status, body = await _post(http, _chat(server, sample), sample.api_key, json=GOOD_BODY)
    assert status == 404 and "finished sample" in body["error"]["message"]


async def test_a_failing_session_is_a_500_error_object_not_a_traceback_page(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    async def broken(body: dict[str, Any]) -> ApiReply:
        raise RuntimeError("a bug in the session")

    sample = server.register(broken)
    status, body = await _post(http, _chat(server, sample), sample.api_key, json=GOOD_BODY)
    assert status == 500 and "a bug in the session" in body["error"]["message"]


async def test_models_needs_the_key_too(
    server: AgentApiServer, http: aiohttp.ClientSession
) -> None:
    sample, other = server.register(Recorder()), server.register(Recorder())
    url = server.base_url(sample.token) + "/models"
    for key, status in ((sample.api_key, 200), (other.api_key, 403), (None, 401)):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with http.get(url, headers=headers) as response:
            assert response.status == status


def test_keys_compare_whole_and_exact() -> None:
    assert key_matches("abc", "abc")
    assert not key_matches("abc", "abd") and not key_matches("ab", "abc")
    assert bearer_key("Bearer  k1 ") == "k1" and bearer_key("bearer k") == "k"
    assert bearer_key("Basic k") is None and bearer_key(None) is None
