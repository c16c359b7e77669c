"""The rollout exception tree.

    RolloutError
    ├── IllegalTransitionError  a sample was moved along an edge its state machine does not have
    ├── TrajectoryError         a trajectory breaks an invariant (lengths, mask, spans)
    ├── AdmissionError          the admission controller was used against its contract
    ├── SchedulerError          the scheduler got an event that contradicts what it knows
    ├── TokenizerError          a token id or chat-template step is invalid
    ├── SinkError               a trajectory could not be written or read back
    └── RunFileWriteError       a run-directory file could not be written (the disk is full)

Every one of these is a broken invariant *inside* the rollout layer and is raised at once.
Failures at the boundaries (an engine that died, a container that vanished) are values:
`infra_error` on the trajectory, `EngineError` from the engine client.
"""

from __future__ import annotations

from foundation.errors import ConductorError

__all__ = [
    "AdmissionError",
    "IllegalTransitionError",
    "RolloutError",
    "RunFileWriteError",
    "SchedulerError",
    "SinkError",
    "TokenizerError",
    "TrajectoryError",
]


class RolloutError(ConductorError):
    """Base class of every error raised by `rollout` (engines keep their own `EngineError`)."""


class IllegalTransitionError(RolloutError, ValueError):
    """A sample state change that the state-machine table does not allow."""


class TrajectoryError(RolloutError, ValueError):
    """A trajectory whose tokens, mask, logprobs, versions or spans disagree."""


class AdmissionError(RolloutError, ValueError):
    """The admission controller was asked for something its bound or its state forbids."""


class SchedulerError(RolloutError, LookupError):
    """An event names an unknown sample or engine, or arrives in a state it cannot apply to."""


class TokenizerError(RolloutError, ValueError):
    """An id outside the vocabulary, or a chat-template step out of order."""


class SinkError(RolloutError):
    """A trajectory group could not be written, or a stored record could not be read."""


class RunFileWriteError(RolloutError, OSError):
    """A run-directory file could not be written (the disk is full, or went away).

    The run cannot go on without losing samples, so it stops cleanly (containers removed) and
    says how to continue once there is room (`conductor run --resume`).
    """

    @classmethod
    def of(cls, path: object, error: OSError) -> RunFileWriteError:
        reason = error.strerror or str(error)
        return cls(f"could not write {path}: {reason}; make room there")
