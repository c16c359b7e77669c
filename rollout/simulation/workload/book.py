"""`ScriptBook`: session id → hidden script, shared by the simulated envs and the token model.

In the simulation the "model" and the "environment" must agree on each sample's future (when the
model stops a turn, what the tool returns); the book is the one place both look it up. It is an
object you pass around, never module state.
"""

from __future__ import annotations

from rollout.simulation.workload.script import SampleScript

__all__ = ["ScriptBook"]


class ScriptBook:
    """A registry of the scripts of live samples, keyed by session id."""

    def __init__(self) -> None:
        self._scripts: dict[str, SampleScript] = {}

    def register(self, script: SampleScript) -> None:
        """Make `script` visible under its session id (re-registering the same script is fine)."""
        known = self._scripts.get(script.session_id)
        if known is not None and known != script:
            raise ValueError(
                f"session {script.session_id!r} already has a different script; session ids must "
                "be unique per sample"
            )
        self._scripts[script.session_id] = script

    def get(self, session_id: str) -> SampleScript | None:
        return self._scripts.get(session_id)

    def forget(self, session_id: str) -> None:
        self._scripts.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._scripts)
