"""`ToolLatencyEstimator`: how long a tool call will take, for the `tool_wait` KV hint.

The KV manager offloads a waiting session's KV and prefetches it shortly before the tool is
expected back, so the estimate matters more than its precision: the mean observed time of that
tool, else of all tools, else a configured default. Pure: observations come in, estimates go out.
"""

from __future__ import annotations

__all__ = ["ToolLatencyEstimator"]


class ToolLatencyEstimator:
    """Running means of act time per tool name and overall.

    >>> estimator = ToolLatencyEstimator(default_s=1.0)
    >>> estimator.expected_s("bash")
    1.0
    >>> estimator.observe("bash", 3.0)
    >>> estimator.expected_s("bash"), estimator.expected_s("submit"), estimator.expected_s(None)
    (3.0, 3.0, 3.0)
    """

    def __init__(self, default_s: float) -> None:
        if default_s <= 0:
            raise ValueError(f"default_s must be positive, got {default_s}")
        self._default_s = default_s
        self._sums: dict[str | None, tuple[float, int]] = {}

    def observe(self, tool: str | None, seconds: float) -> None:
        """Record one call of `tool` (None: unknown tool) that took `seconds`."""
        for key in {tool, None}:
            total, count = self._sums.get(key, (0.0, 0))
            self._sums[key] = (total + max(0.0, seconds), count + 1)

    def expected_s(self, tool: str | None) -> float:
        """The mean time of `tool`, else of every tool, else the default."""
        for key in (tool, None):
            total, count = self._sums.get(key, (0.0, 0))
            if count:
                return total / count
        return self._default_s
