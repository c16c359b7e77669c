"""Reading `docker exec` output: Docker's multiplexed stream, frame by frame, to its end.

Each frame is an 8-byte header (stream type, three zero bytes, big-endian payload length) and
the payload. docker-py's stream wrapper (`CancellableStream`) turns a socket error into a quiet
end of stream, so a broken stream reads as a command that printed less; in a 64-container soak
on 2 cores a command's output came back empty although it had printed. This reader waits out
reads that find no data yet, ends only at a real end of file, and raises socket errors (the
sandbox layer turns them into a dead sandbox: the attempt is retried, not mis-read).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
from collections.abc import Iterator
from typing import Any

__all__ = ["exec_frames"]

_HEADER = struct.Struct(">BxxxL")


def exec_frames(stream_socket: Any) -> Iterator[bytes]:
    """The payloads of the exec stream on `stream_socket` (as `exec_start(socket=True)`
    returns it), until the exec ends (or the container goes); closes the socket."""
    raw: socket.socket = getattr(stream_socket, "_sock", stream_socket)
    try:
        while True:
            header = _receive(raw, _HEADER.size)
            if len(header) < _HEADER.size:
                return
            _, length = _HEADER.unpack(header)
            payload = _receive(raw, length)
            if payload:
                yield payload
            if len(payload) < length:  # the stream ended inside a frame
                return
    finally:
        response = getattr(stream_socket, "_response", None)  # docker-py keeps it alive here
        for closable in (response, stream_socket, raw):
            if closable is not None:
                with contextlib.suppress(OSError, ValueError):  # already closed by the one before
                    closable.close()


def _receive(raw: socket.socket, size: int) -> bytes:
    """`size` bytes, or fewer only at the end of the stream."""
    data = bytearray()
    while len(data) < size:
        try:
            chunk = raw.recv(size - len(data))
        except (BlockingIOError, InterruptedError):
            select.select([raw], [], [])  # nothing yet: wait for data, then read again
            continue
        except TimeoutError:
            continue  # a quiet command: the host-side deadline bounds the wait, not this
        if not chunk:
            break
        data += chunk
    return bytes(data)
