"""`conductor run`'s pre-start check of SGLang endpoints (real sockets): a server that does not
answer fails the run in seconds; one that answers but is still loading (503) is let through,
for the client's connect to wait out (`startup_timeout_s`)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rollout.engines.base import EngineError
from rollout.engines.registry import SGLangBackend
from rollout.engines.sglang import SGLangEngineConfig


class _Loading(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def loading_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Loading)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_server_that_answers_503_while_loading_passes_the_probe(loading_server: str) -> None:
    SGLangBackend().probe(SGLangEngineConfig(endpoints=(loading_server,)))


def test_an_endpoint_nobody_answers_fails_in_seconds_naming_it(loading_server: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening
        closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        config = SGLangEngineConfig(endpoints=(loading_server, closed_url))
        started = time.monotonic()
        with pytest.raises(EngineError, match="no engine answers at") as caught:
            SGLangBackend().probe(config)
    assert closed_url in str(caught.value) and loading_server not in str(caught.value)
    assert time.monotonic() - started < config.probe_timeout_s + 2
