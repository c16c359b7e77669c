"""Staleness-bounded admission of groups: how many may start now, and which prompts they take.

The bound (DESIGN.md §3; the same inequality as AReaL's staleness manager and SkyRL's group
capacity, anchors-rollout.md §0): at training step k at most ``(k + async_factor) × B`` groups
have been admitted in total, B = groups per training batch. "Admitted in total" counts every
group ever admitted except the ones explicitly `discard`-ed, whose quota is returned so a batch
can still be filled. k is the number of completed optimizer steps (the policy version): the
shell calls `set_training_step` after each weight update, so ``async_factor = 1`` is on-policy.

The controller is pure bookkeeping — no I/O, no clock. The shell prefetches the prompts that
`peek_prompt_indices` names (and warms containers for them) in the background, then calls
`admit` when the quota allows.

Checkpointing: `state_dict` holds the prompt cursor, the training step, the group counter and
the groups admitted but not yet consumed. `load_state_dict` re-admits those groups *from
scratch* (their partial rollouts are not saved): they come back first from the next `admit`
with `attempt + 1`, the same `group_id` and prompt, and `admitted_step` = the restored step. So
after a restart no prompt is lost and none is consumed twice. Save it together with the
trainer's checkpoint of the same step.

Several task sources (`rollout.core.sources`): give `sources` and each new group's source is
the next pick of a `SourceMix` over their weights (among the sources with prompts left); each
source walks its own prompts with its own cursor and seeded permutation, and its groups take
its `group_size`. Prompt indices are global (source i owns ``[offset_i, offset_i + n_i)``).
The staleness quota stays global: B groups per step, whatever their source.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from rollout.core.config import AdmissionConfig
from rollout.core.sources import SourceLayout, SourceMix, SourcePrompts
from rollout.core.types import Group
from rollout.errors import AdmissionError

__all__ = ["AdmissionController", "PromptSource"]

_PromptT_co = TypeVar("_PromptT_co", covariant=True)

_STATE_VERSION = 1


class PromptSource(Protocol[_PromptT_co]):
    """An indexable dataset of prompts (a list, a `datasets.Dataset`, a task registry view)."""

    def __len__(self) -> int:
        """Number of prompts."""
        ...

    def __getitem__(self, index: int) -> _PromptT_co:
        """Prompt number `index`, 0 <= index < len(self)."""
        ...


class AdmissionController:
    """Decides how many groups may be admitted and hands out groups in a reproducible order.

    >>> from rollout.core.config import AdmissionConfig
    >>> ctl = AdmissionController(
    ...     AdmissionConfig(groups_per_step=2, async_factor=1, shuffle=False), num_prompts=10
    ... )
    >>> [group.prompt_index for group in ctl.admit()]
    [0, 1]
    >>> ctl.quota()
    0
    """

    def __init__(
        self,
        config: AdmissionConfig,
        num_prompts: int,
        sources: Sequence[SourcePrompts] = (),
    ) -> None:
        if num_prompts < 1:
            raise AdmissionError(f"the prompt source is empty (num_prompts={num_prompts})")
        self._layout = SourceLayout.of(sources) if sources else None
        if self._layout is not None and self._layout.num_prompts != num_prompts:
            raise AdmissionError(
                f"num_prompts={num_prompts} but the task sources hold "
                f"{self._layout.num_prompts} prompts together; pass their sum"
            )
        self._mix = (
            None
            if self._layout is None
            else SourceMix({s.config.name: s.config.weight for s in self._layout.sources})
        )
        self._source_cursors = {} if self._layout is None else dict.fromkeys(self._layout.names, 0)
        self._source_permutations: dict[tuple[str, int], list[int]] = {}
        self._config = config
        self._num_prompts = num_prompts
        self._cursor = 0
        self._training_step = 0
        self._next_group_seq = 0
        self._consumed_total = 0
        self._live: dict[str, Group] = {}
        self._pending: deque[str] = deque()  # live groups to hand out again (after a restore)
        self._permutation_epoch = -1
        self._permutation: list[int] = []

    @classmethod
    def for_source(
        cls, config: AdmissionConfig, source: PromptSource[object]
    ) -> AdmissionController:
        """A controller over every prompt of `source` (prompt indices index into it)."""
        return cls(config, num_prompts=len(source))

    # -- reading ---------------------------------------------------------------------------

    @property
    def training_step(self) -> int:
        return self._training_step

    @property
    def cursor(self) -> int:
        """How many prompts have been drawn, over all epochs."""
        return self._cursor

    @property
    def admitted_total(self) -> int:
        """Groups admitted and not discarded: consumed ones plus live ones."""
        return self._consumed_total + len(self._live)

    @property
    def consumed_total(self) -> int:
        return self._consumed_total

    @property
    def live_groups(self) -> tuple[Group, ...]:
        """Admitted, not yet consumed, in admission order (including ones awaiting re-admission)."""
        return tuple(self._live.values())

    def consumable(self) -> frozenset[str] | None:
        """The groups the next batch may take under `consume_window`: the oldest
        ceil(consume_window × B) live groups, in admission order; None when there is no window
        (any complete group may be consumed)."""
        window = self._config.consume_window
        if window is None:
            return None
        size = math.ceil(window * self._config.groups_per_step - 1e-9)
        return frozenset(group_id for group_id, _ in zip(self._live, range(size), strict=False))

    def admission_limit(self) -> int:
        """``(k + async_factor) × B``: the most groups that may have been admitted at this step."""
        config = self._config
        return (self._training_step + config.async_factor) * config.groups_per_step

    def quota(self) -> int:
        """How many *new* groups may be admitted now (re-admissions need no quota)."""
        room = self.admission_limit() - self.admitted_total
        prompts_left = self._prompts_left()
        if prompts_left is not None:
            room = min(room, prompts_left)
        return max(0, room)

    @property
    def layout(self) -> SourceLayout | None:
        """Where each task source's prompts sit (None for a single-source run)."""
        return self._layout

    @property
    def num_prompts(self) -> int:
        """How many prompts the source holds (admission cycles through them by epochs)."""
        return self._num_prompts

    def peek_prompt_indices(self, count: int) -> tuple[int, ...]:
        """The prompt indices the next `count` new groups will take, without taking them."""
        prompts_left = self._prompts_left()
        if prompts_left is not None:
            count = min(count, prompts_left)
        count = max(0, count)
        if self._mix is not None:
            mix = SourceMix(self._mix_weights())
            mix.load_state_dict(self._mix.state_dict())
            cursors = dict(self._source_cursors)
            return tuple(self._draw(mix, cursors)[1] for _ in range(count))
        return tuple(self._prompt_index_at(self._cursor + offset) for offset in range(count))

    def staleness_deadline(self, group: Group) -> int:
        """The last training step at which consuming `group` keeps it under the staleness bound.

        A group admitted at step s and consumed at step k was generated by policy s (or later)
        and trains policy k, so it is k − s steps off-policy; the bound keeps that below
        `async_factor`, hence ``s + async_factor − 1``.
        """
        return group.admitted_step + self._config.async_factor - 1

    # -- deciding --------------------------------------------------------------------------

    def admit(self, max_groups: int | None = None) -> tuple[Group, ...]:
        """Admit as many groups as allowed (at most `max_groups`); returns them in order.

        Groups awaiting re-admission (after `load_state_dict` or `requeue`) come first and use
        no quota: they were counted when first admitted.
        """
        available = len(self._pending) + self.quota()
        limit = available if max_groups is None else min(available, max(0, max_groups))
        admitted: list[Group] = []
        while self._pending and len(admitted) < limit:
            admitted.append(self._live[self._pending.popleft()])
        new_groups = min(self.quota(), limit - len(admitted))
        for _ in range(new_groups):
            if self._mix is not None:
                source, prompt_index, size = self._draw(self._mix, self._source_cursors)
            else:
                source, prompt_index = "", self._prompt_index_at(self._cursor)
                size = self._config.group_size
            group = Group(
                group_id=f"g{self._next_group_seq:08d}",
                prompt_index=prompt_index,
                size=size,
                admitted_step=self._training_step,
                source=source,
            )
            self._next_group_seq += 1
            self._cursor += 1
            self._live[group.group_id] = group
            admitted.append(group)
        return tuple(admitted)

    def consume(self, group_ids: Iterable[str]) -> None:
        """The trainer took these groups; they leave the live set for good."""
        group_ids = list(group_ids)
        for group_id in group_ids:
            if group_id not in self._live:
                raise AdmissionError(
                    f"group {group_id} is not live (never admitted, already consumed or "
                    "discarded); consume each admitted group exactly once"
                )
            if group_id in self._pending:
                raise AdmissionError(
                    f"group {group_id} awaits re-admission and has no samples yet; admit() it first"
                )
        for group_id in group_ids:
            del self._live[group_id]
            self._consumed_total += 1

    def discard(self, group_id: str) -> Group:
        """Drop a live group that can never be trained on; its quota is returned."""
        group = self._live.pop(group_id, None)
        if group is None:
            raise AdmissionError(f"cannot discard group {group_id}: it is not live")
        if group_id in self._pending:
            self._pending.remove(group_id)
        return group

    def requeue(self, group_id: str) -> Group:
        """Restart a live group from scratch: the next `admit` returns it with `attempt + 1`."""
        group = self._live.get(group_id)
        if group is None:
            raise AdmissionError(f"cannot requeue group {group_id}: it is not live")
        if group_id in self._pending:
            return group
        restarted = _restart(group, self._training_step)
        self._live[group_id] = restarted
        self._pending.append(group_id)
        return restarted

    def set_training_step(self, step: int) -> None:
        """Record that `step` optimizer steps are done; the quota grows by B per step."""
        if step < self._training_step:
            raise AdmissionError(
                f"training step went backwards ({self._training_step} → {step}); to resume from a "
                "checkpoint use load_state_dict instead"
            )
        self._training_step = step

    # -- checkpointing ---------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot; see the module docstring for what a restore does with it."""
        state: dict[str, Any] = {
            "version": _STATE_VERSION,
            "num_prompts": self._num_prompts,
            "cursor": self._cursor,
            "training_step": self._training_step,
            "next_group_seq": self._next_group_seq,
            "consumed_total": self._consumed_total,
            "unconsumed": [_group_to_dict(group) for group in self._live.values()],
        }
        if self._mix is not None:
            state["sources"] = {
                "cursors": dict(self._source_cursors),
                "mix": self._mix.state_dict(),
            }
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot; every unconsumed group is queued for re-admission from scratch."""
        if state.get("version") != _STATE_VERSION:
            raise AdmissionError(
                f"admission state version {state.get('version')!r} is not {_STATE_VERSION}; "
                "it was written by an incompatible release"
            )
        if state["num_prompts"] != self._num_prompts:
            raise AdmissionError(
                f"the checkpoint was taken over {state['num_prompts']} prompts but the source has "
                f"{self._num_prompts}; resume with the same dataset"
            )
        if self._mix is not None:
            sources = state.get("sources")
            if sources is None or set(sources["cursors"]) != set(self._source_cursors):
                saved = None if sources is None else sorted(sources["cursors"])
                raise AdmissionError(
                    f"the checkpoint's task sources {saved} are not this run's "
                    f"{sorted(self._source_cursors)}; resume with the same sources"
                )
            self._mix.load_state_dict(sources["mix"])
            self._source_cursors = {
                name: int(sources["cursors"][name]) for name in self._source_cursors
            }
        elif "sources" in state:
            raise AdmissionError(
                "the checkpoint was taken with task sources but this run has none; resume with "
                "the same sources"
            )
        self._cursor = int(state["cursor"])
        self._training_step = int(state["training_step"])
        self._next_group_seq = int(state["next_group_seq"])
        self._consumed_total = int(state["consumed_total"])
        self._live = {}
        self._pending = deque()
        for record in state["unconsumed"]:
            group = _restart(_group_from_dict(record), self._training_step)
            self._live[group.group_id] = group
            self._pending.append(group.group_id)

    # -- internals -------------------------------------------------------------------------

    def _prompts_left(self) -> int | None:
        """Prompts left under `max_epochs`; None when the source cycles forever."""
        if self._config.max_epochs == 0:
            return None
        if self._layout is not None:
            return sum(self._source_left(self._source_cursors).values())
        return max(0, self._config.max_epochs * self._num_prompts - self._cursor)

    def _source_left(self, cursors: Mapping[str, int]) -> dict[str, int]:
        assert self._layout is not None
        epochs = self._config.max_epochs
        return {
            source.config.name: max(0, epochs * source.num_prompts - cursors[source.config.name])
            for source in self._layout.sources
        }

    def _mix_weights(self) -> dict[str, float]:
        assert self._layout is not None
        return {source.config.name: source.config.weight for source in self._layout.sources}

    def _draw(self, mix: SourceMix, cursors: dict[str, int]) -> tuple[str, int, int]:
        """The next group's (source, global prompt index, size); advances `mix` and `cursors`."""
        layout = self._layout
        assert layout is not None
        eligible = None
        if self._config.max_epochs:
            eligible = {name for name, left in self._source_left(cursors).items() if left > 0}
        name, _ = mix.next(eligible)
        position = layout.position(name)
        source = layout.sources[position]
        epoch, local = divmod(cursors[name], source.num_prompts)
        cursors[name] += 1
        if self._config.shuffle:
            key = (name, epoch)
            order = self._source_permutations.get(key)
            if order is None:
                order = list(range(source.num_prompts))
                random.Random(f"{self._config.seed}/{name}/{epoch}").shuffle(order)
                self._source_permutations = {
                    k: v for k, v in self._source_permutations.items() if k[0] != name
                }
                self._source_permutations[key] = order
            local = order[local]
        size = source.config.group_size or self._config.group_size
        return name, layout.offsets[position] + local, size

    def _prompt_index_at(self, position: int) -> int:
        epoch, offset = divmod(position, self._num_prompts)
        if not self._config.shuffle:
            return offset
        if epoch != self._permutation_epoch:
            order = list(range(self._num_prompts))
            random.Random(f"{self._config.seed}/{epoch}").shuffle(order)
            self._permutation = order
            self._permutation_epoch = epoch
        return self._permutation[offset]


def _restart(group: Group, step: int) -> Group:
    return Group(
        group_id=group.group_id,
        prompt_index=group.prompt_index,
        size=group.size,
        admitted_step=step,
        attempt=group.attempt + 1,
        source=group.source,
    )


def _group_to_dict(group: Group) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "prompt_index": group.prompt_index,
        "size": group.size,
        "admitted_step": group.admitted_step,
        "attempt": group.attempt,
        **({"source": group.source} if group.source else {}),
    }


def _group_from_dict(record: Mapping[str, Any]) -> Group:
    return Group(
        group_id=str(record["group_id"]),
        prompt_index=int(record["prompt_index"]),
        size=int(record["size"]),
        admitted_step=int(record["admitted_step"]),
        attempt=int(record["attempt"]),
        source=str(record.get("source", "")),
    )
