"""`TrajectoryBuilder`: one sample's exact token record, appended to as its episode runs.

The agent loop appends the prompt, each generation segment verbatim (ids, behaviour logprobs,
the policy version that produced them) and each observation; nothing is ever re-tokenized or
rewritten. Every turn's engine prompt is therefore the previous prompt plus exactly what came
after it. `build` turns the record into a validated `rollout.core.types.Trajectory`.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from kvcache.page_keys import AppendOnlyPageKeys, TokenSnapshot
from rollout.core.types import NO_VERSION, Trajectory, Turn
from rollout.errors import TrajectoryError
from rollout.trajectories.tokenizer import Span

__all__ = ["TrajectoryBuilder"]

_ZERO = array("b", (0,))
_ONE = array("b", (1,))
_NO_VERSION = array("q", (NO_VERSION,))


class TrajectoryBuilder:
    """Appends tokens and turns; see the module docstring. Not reusable across samples."""

    def __init__(self, prompt_ids: Sequence[int]) -> None:
        self._token_ids: list[int] = []
        self._page_keys = AppendOnlyPageKeys(self._token_ids)  # valid: only ever appended to
        # Mask and versions are small ints: typed arrays hold them in 1 and 8 bytes, and
        # unlike lists the garbage collector never walks them (a live sample's record is
        # tens of thousands of tokens; a collection would visit every entry).
        self._loss_mask = array("b")
        self._logprobs: list[float] = []  # the engine's float objects, shared, not copied
        self._versions = array("q")
        self._turns: list[Turn] = []
        self._turn_start: int | None = None
        self._generated = 0
        self._observed = 0
        self._append_fixed(prompt_ids)
        self._prompt_tokens = len(self._token_ids)

    # -- reading ---------------------------------------------------------------------------

    @property
    def token_ids(self) -> TokenSnapshot:
        """Everything so far: what the next generation request sends. A snapshot, not a copy
        (the record only grows, so taking one is O(1) however long the context), that equals
        the tuple of its ids and carries its page keys (`kvcache.page_keys`): a prefix cache
        hashes each page once per episode instead of once per request."""
        return TokenSnapshot(self._token_ids, self._page_keys)

    def token_slice(self, start: int, end: int) -> tuple[int, ...]:
        """`token_ids[start:end]` without copying the whole trajectory first."""
        return tuple(self._token_ids[start:end])

    @property
    def length(self) -> int:
        return len(self._token_ids)

    @property
    def prompt_tokens(self) -> int:
        return self._prompt_tokens

    @property
    def generated_tokens(self) -> int:
        """Model tokens over the whole episode (the loss-mask sum)."""
        return self._generated

    @property
    def observation_tokens(self) -> int:
        """Tokens appended after model turns (tool output and template)."""
        return self._observed

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(self._turns)

    @property
    def turn_tokens(self) -> int:
        """Tokens generated so far in the open turn (0 when none is open)."""
        return 0 if self._turn_start is None else len(self._token_ids) - self._turn_start

    def turn_ids(self) -> tuple[int, ...]:
        """The open turn's generated ids."""
        if self._turn_start is None:
            raise TrajectoryError("no turn is open; call open_turn() first")
        return tuple(self._token_ids[self._turn_start :])

    # -- appending -------------------------------------------------------------------------

    def open_turn(self) -> None:
        """Start a model turn; its generated segments follow."""
        if self._turn_start is not None:
            raise TrajectoryError("a turn is already open; end_turn() it first")
        self._turn_start = len(self._token_ids)

    def append_generated(
        self, ids: Sequence[int], logprobs: Sequence[float], version: int | Sequence[int]
    ) -> None:
        """One generation segment, verbatim, produced by policy `version` (or one per token,
        when a weight update fell inside the generation)."""
        if self._turn_start is None:
            raise TrajectoryError("no turn is open; call open_turn() before appending output")
        if len(ids) != len(logprobs):
            raise TrajectoryError(
                f"{len(ids)} generated ids but {len(logprobs)} logprobs; the engine must return "
                "one logprob per id"
            )
        if isinstance(version, int):
            versions = array("q", (version,)) * len(ids)
        else:
            versions = array("q", version)
            if len(versions) != len(ids):
                raise TrajectoryError(
                    f"{len(ids)} generated ids but {len(versions)} per-token versions"
                )
        if ids and min(versions) < 0:
            raise TrajectoryError(
                f"generated tokens need a policy version >= 0, got {min(versions)}"
            )
        self._token_ids.extend(ids)
        self._loss_mask.extend(_ONE * len(ids))
        self._logprobs.extend(map(float, logprobs))
        self._versions.extend(versions)
        self._generated += len(ids)

    def end_turn(self) -> Span:
        """Close the model turn; returns its generated span."""
        if self._turn_start is None:
            raise TrajectoryError("no turn is open; nothing to end")
        span = Span(self._turn_start, len(self._token_ids))
        self._turn_start = None
        return span

    def append_observation(self, ids: Sequence[int]) -> Span:
        """Tool output (and any template tokens around it) after a closed turn."""
        if self._turn_start is not None:
            raise TrajectoryError("a turn is open; end_turn() before appending an observation")
        start = len(self._token_ids)
        self._append_fixed(ids)
        self._observed += len(ids)
        return Span(start, len(self._token_ids))

    def add_turn(self, turn: Turn) -> None:
        """Record a finished turn (spans must refer to this builder's positions)."""
        self._turns.append(turn)

    # -- result ----------------------------------------------------------------------------

    def build(
        self,
        *,
        sample_id: str,
        group_id: str,
        prompt_index: int,
        sample_index: int,
        reward: float | None,
        terminated: bool = False,
        truncated: bool = False,
        infra_error: str | None = None,
        env_init_s: float = 0.0,
        admitted_step: int = 0,
        attempt: int = 0,
        info: Mapping[str, Any] | None = None,
    ) -> Trajectory:
        """The validated trajectory (`TrajectoryError` if an invariant is broken)."""
        if self._turn_start is not None:
            self.end_turn()  # an episode cut short mid-turn keeps its partial output
        return Trajectory(
            sample_id=sample_id,
            group_id=group_id,
            prompt_index=prompt_index,
            sample_index=sample_index,
            token_ids=tuple(self._token_ids),
            loss_mask=tuple(self._loss_mask),
            logprobs=tuple(self._logprobs),
            versions=tuple(self._versions),
            prompt_tokens=self._prompt_tokens,
            turns=tuple(self._turns),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            infra_error=infra_error,
            env_init_s=env_init_s,
            num_preemptions=sum(turn.preemptions for turn in self._turns),
            num_interruptions=sum(turn.interruptions for turn in self._turns),
            admitted_step=admitted_step,
            attempt=attempt,
            info=dict(info or {}),
            check_tokens=False,  # each appended segment was validated; spans still checked
        )

    def _append_fixed(self, ids: Sequence[int]) -> None:
        self._token_ids.extend(ids)
        self._loss_mask.extend(_ZERO * len(ids))
        self._logprobs.extend([0.0] * len(ids))
        self._versions.extend(_NO_VERSION * len(ids))
