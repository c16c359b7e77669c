"""The exec stream reader keeps reading through reads that find no data yet, raises a broken
stream instead of ending it quietly, and stops only at the end of the stream (a 64-container
soak saw a command's output come back empty)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from docker.types.daemon import CancellableStream

from harness.sandbox.docker_frames import exec_frames


def _frame(payload: bytes, stream: int = 1) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def _send_slowly(writer: socket.socket, data: bytes) -> None:
    """Byte pieces with pauses: a reader finds the socket empty between them."""
    for start in range(0, len(data), 5):
        writer.sendall(data[start : start + 5])
        time.sleep(0.01)
    writer.close()


def _non_blocking_pair() -> tuple[socket.socket, socket.socket]:
    reader, writer = socket.socketpair()
    reader.setblocking(False)  # as a socket with a timeout behaves inside: reads may find none
    return reader, writer


def test_every_frame_arrives_although_reads_find_the_socket_empty() -> None:
    reader, writer = _non_blocking_pair()
    stream = _frame(b"hello ") + _frame(b"error\n", stream=2) + _frame(b"world\n")
    threading.Thread(target=_send_slowly, args=(writer, stream)).start()
    assert b"".join(exec_frames(reader)) == b"hello error\nworld\n"


def test_docker_pys_stream_wrapper_makes_a_socket_error_look_like_the_end() -> None:
    """Why exec_frames exists: docker-py's wrapper swallows the error, so a broken stream
    reads as a command that printed less; ours raises it (the sandbox is then dead)."""

    def broken() -> Iterator[bytes]:
        yield b"first part"
        raise ConnectionResetError("reset by peer")

    assert list(CancellableStream(broken(), None)) == [b"first part"]

    class ResetSocket:
        def recv(self, size: int) -> bytes:
            raise ConnectionResetError("reset by peer")

        def close(self) -> None:
            pass

    with pytest.raises(ConnectionResetError):
        list(exec_frames(ResetSocket()))


def test_a_stream_cut_inside_a_frame_yields_what_arrived() -> None:
    reader, writer = socket.socketpair()
    writer.sendall(_frame(b"complete") + _frame(b"cut short")[:-5])
    writer.close()
    assert b"".join(exec_frames(reader)) == b"completecut "


def test_frames_the_http_reader_already_buffered_are_not_lost() -> None:
    """Issue 28: a fast command's output can arrive in the same read as the HTTP headers; the
    header parser's buffered reader then holds it, under which docker-py hands the raw
    socket over. `echo ok` came back empty (exit 0) in 4 of 100 first commands."""
    ours, daemon = socket.socketpair()
    daemon.sendall(b"HTTP/1.1 101 UPGRADED\r\n\r\n" + _frame(b"ok\n") + _frame(b"more\n"))
    buffered = ours.makefile("rb")
    assert buffered.readline() == b"HTTP/1.1 101 UPGRADED\r\n"  # reads everything sent so far
    assert buffered.readline() == b"\r\n"
    threading.Thread(target=_send_slowly, args=(daemon, _frame(b"tail\n"))).start()

    # What exec_start(socket=True) returns: a SocketIO with its response attached.
    response = SimpleNamespace(raw=SimpleNamespace(_fp=SimpleNamespace(fp=buffered)))
    response.close = buffered.close
    stream = SimpleNamespace(_sock=ours, _response=response, close=ours.close)
    ours.settimeout(30)
    assert b"".join(exec_frames(stream)) == b"ok\nmore\ntail\n"
