"""`TransferLink`: one direction of the host↔device link, a FIFO of copies at a fixed bandwidth.

Copies overlap compute (the GPU keeps stepping) but queue behind each other on the link; the
request that needs a copy waits for its end time. Pure: times are passed in.
"""

from __future__ import annotations

__all__ = ["TransferLink"]


class TransferLink:
    """A link that moves `bytes_per_s` with a fixed `latency_s` per copy, one copy at a time."""

    def __init__(self, bytes_per_s: float, latency_s: float) -> None:
        if bytes_per_s <= 0 or latency_s < 0:
            raise ValueError(
                f"a link needs bytes_per_s > 0 and latency_s >= 0, got {bytes_per_s}, {latency_s}"
            )
        self._bytes_per_s = bytes_per_s
        self._latency_s = latency_s
        self._busy_until_s = 0.0
        self.busy_s = 0.0
        self.moved_bytes = 0

    def schedule(self, now_s: float, nbytes: int) -> float:
        """Queue a copy of `nbytes` issued at `now_s`; return when it lands."""
        if nbytes <= 0:
            return now_s
        duration = self._latency_s + nbytes / self._bytes_per_s
        end = max(now_s, self._busy_until_s) + duration
        self._busy_until_s = end
        self.busy_s += duration
        self.moved_bytes += nbytes
        return end
