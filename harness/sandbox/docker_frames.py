"""Reading `docker exec` output: Docker's multiplexed stream, frame by frame, to its end.

docker-py hands over the socket *under* the buffered reader that parsed the HTTP response
headers. When the daemon sends the first output frames right behind the headers (a fast
command on a loaded machine), that reader has already taken them into its buffer, and a read
of the raw socket never sees them: issue 28's start race saw `echo ok` come back empty with
exit code 0 in 4 of 100 first commands. So the frames start with whatever that buffer holds
(`_buffered_bytes`), then continue on the socket.

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
    pending = bytearray(_buffered_bytes(stream_socket, raw))
    try:
        while True:
            header = _receive(raw, _HEADER.size, pending)
            if len(header) < _HEADER.size:
                return
            _, length = _HEADER.unpack(header)
            payload = _receive(raw, length, pending)
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


def _buffered_bytes(stream_socket: Any, raw: socket.socket) -> bytes:
    """What the HTTP layer's buffered reader read past the response headers (without waiting
    for more: the socket is non-blocking while it is asked)."""
    response = getattr(stream_socket, "_response", None)
    reader = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    if reader is None or not hasattr(reader, "peek"):
        return b""
    timeout = raw.gettimeout()
    raw.setblocking(False)
    try:
        buffered = reader.peek()  # the buffer as it is; an empty one tries one read, no wait
        return reader.read(len(buffered)) if buffered else b""
    except (BlockingIOError, InterruptedError, OSError, ValueError):
        return b""
    finally:
        raw.settimeout(timeout)


def _receive(raw: socket.socket, size: int, pending: bytearray) -> bytes:
    """`size` bytes (first from `pending`, which it consumes), or fewer only at the end of
    the stream."""
    data = bytearray(pending[:size])
    del pending[:size]
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
