"""Trace replay: per-sample scripts read from a file instead of drawn from distributions.

A trace is JSONL (one sample per line) or Parquet (one sample per row, the same fields; `turns`
a list of structs). Each sample:

    {"group": "g7", "sample": 0, "prompt_tokens": 4512, "prefix_tokens": 1200,
     "prefix_id": "system-v1", "reward": 1.0, "truncated": false, "reset_s": 0.3,
     "turns": [{"output_tokens": 150, "observation_tokens": 300, "tool": "shell",
                "latency_s": 1.2}, ...,
               {"output_tokens": 80, "tool": "submit", "latency_s": 31.0}]}

* `group` names the sample's group; every group holds the run's `group_size` samples, whose
  `sample` indices are 0..K-1. Groups are numbered in the order of their first line, and the
  run's prompt index i replays group i mod G (a run that admits more groups than the trace's G
  replays some again, under new session ids).
* `prompt_tokens` is the whole initial prompt. Its first `prefix_tokens` are a prefix shared by
  every sample that names the same `prefix_id` (a system prompt shared across groups); the rest
  is the group's own (a group's samples share their whole prompt, as GRPO siblings do).
* Each turn: the tokens the model wrote, the tool output appended after it, the tool's name and
  how long it ran. The last turn ends the episode: its observation is ignored and its latency
  is the final evaluation's.
* `reward`, `truncated` (the context limit cut it short) and `reset_s` (the env reset) are the
  sample's outcome.

`trace_from_run` turns a run directory's `trajectories.jsonl` into a trace, so a user can
replay their real runs against every policy (`conductor trace convert RUN_DIR`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rollout.errors import RolloutError
from rollout.observe.run_dir import read_jsonl_records
from rollout.simulation.workload.corpus import TokenCorpus
from rollout.simulation.workload.distributions import derive_seed
from rollout.simulation.workload.script import SUBMIT_TOOL, SampleScript, TurnScript, session_id_of

__all__ = [
    "TraceError",
    "TraceSample",
    "TraceTurn",
    "WorkloadTrace",
    "load_trace",
    "trace_from_run",
    "write_trace",
]


class TraceError(RolloutError, ValueError):
    """A trace file is missing, malformed, or does not fit the run (the message says where)."""


class TraceTurn(BaseModel):
    """One model turn and the tool call that answered it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output_tokens: int = Field(ge=1, description="Tokens the model wrote in this turn.")
    observation_tokens: int = Field(
        default=0, ge=0, description="Tool-output tokens appended after it (the last turn: 0)."
    )
    tool: str = Field(default=SUBMIT_TOOL, min_length=1, description="The tool's name.")
    latency_s: float = Field(default=0.0, ge=0.0, description="How long the tool ran (s).")


class TraceSample(BaseModel):
    """One sample of a trace (one JSONL line or Parquet row)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(min_length=1, description="The sample's group (its prompt).")
    sample: int = Field(ge=0, description="Index within the group, 0..K-1.")
    prompt_tokens: int = Field(ge=1, description="Initial prompt tokens, prefix included.")
    prefix_tokens: int = Field(
        default=0, ge=0, description="Leading prompt tokens shared with every `prefix_id` peer."
    )
    prefix_id: str | None = Field(default=None, description="Names the shared prefix.")
    reward: float = Field(default=0.0, description="The sample's reward.")
    truncated: bool = Field(default=False, description="The context limit cut it short.")
    reset_s: float = Field(default=0.0, ge=0.0, description="Seconds the env reset took (s).")
    turns: tuple[TraceTurn, ...] = Field(min_length=1, description="The model turns, in order.")


@dataclass(frozen=True, slots=True)
class WorkloadTrace:
    """A validated trace: its groups in file order, each sorted by sample index."""

    path: str
    groups: tuple[tuple[TraceSample, ...], ...]

    @property
    def group_size(self) -> int:
        return len(self.groups[0])

    def scripts(
        self, workload: str, seed: int, group_index: int, corpus: TokenCorpus
    ) -> tuple[SampleScript, ...]:
        """The scripts of the run's prompt `group_index` (trace group `group_index` mod G)."""
        samples = self.groups[group_index % len(self.groups)]
        group_rng_seed = derive_seed(seed, "trace-group", group_index)
        return tuple(
            _script(workload, seed, group_index, sample, corpus, group_rng_seed)
            for sample in samples
        )


def load_trace(path: Path, *, group_size: int | None = None) -> WorkloadTrace:
    """Read and check a trace; `group_size` (the run's K) must match every group's size.

    Raises:
        TraceError: the file is missing or unreadable, a record is malformed (its line or row
            is named), a group's sample indices are not 0..K-1, or K differs from `group_size`.
    """
    if not path.is_file():
        raise TraceError(f"trace file {path} does not exist (make one: conductor trace convert)")
    by_group: dict[str, dict[int, TraceSample]] = {}
    for where, record in _records(path):
        try:
            sample = TraceSample.model_validate(record)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "record"
            raise TraceError(f"{path} {where}: {field}: {first['msg']}") from None
        if sample.prefix_tokens > sample.prompt_tokens:
            raise TraceError(
                f"{path} {where}: prefix_tokens {sample.prefix_tokens} exceeds prompt_tokens "
                f"{sample.prompt_tokens}"
            )
        samples = by_group.setdefault(sample.group, {})
        if sample.sample in samples:
            raise TraceError(f"{path} {where}: group {sample.group} repeats sample {sample.sample}")
        samples[sample.sample] = sample
    if not by_group:
        raise TraceError(f"trace file {path} holds no samples")
    groups = []
    for name, samples in by_group.items():
        if sorted(samples) != list(range(len(samples))):
            raise TraceError(
                f"{path}: group {name} has samples {sorted(samples)}; "
                f"expected 0..{len(samples) - 1}"
            )
        groups.append(tuple(samples[index] for index in range(len(samples))))
    sizes = {len(group) for group in groups}
    expected = group_size if group_size is not None else len(groups[0])
    if sizes != {expected}:
        raise TraceError(
            f"{path}: groups hold {sorted(sizes)} samples, the run asks for group_size "
            f"{expected}; set group_size to the trace's or convert a run with that group size"
        )
    return WorkloadTrace(str(path), tuple(groups))


def write_trace(samples: Iterable[TraceSample], path: Path) -> int:
    """Write samples as a JSONL trace; returns how many were written."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for sample in samples:
            out.write(sample.model_dump_json(exclude_none=True) + "\n")
            count += 1
    return count


def trace_from_run(run_dir: Path) -> list[TraceSample]:
    """The consumed samples of a run directory as a trace.

    Per turn: generated tokens (`gen_end - gen_start`), tool-output tokens, tool name and
    the env step's duration; per sample: group, index, prompt length, reward, truncation and
    env reset time. The shared prefix is the longest token prefix every sample's prompt
    starts with (the system prompt), named after the run. A group with a sample that ended
    in an infrastructure error is left out whole (a trace group needs all K samples).

    Raises:
        TraceError: no trajectories.jsonl, or a record lacks a field the trace needs.
    """
    path = run_dir / "trajectories.jsonl"
    if not path.is_file():
        raise TraceError(f"{run_dir} has no trajectories.jsonl (is it a run directory?)")
    trajectories = [
        trajectory
        for record in read_jsonl_records(path)
        if all(t.get("infra_error") is None for t in record.get("trajectories", ()))
        for trajectory in record.get("trajectories", ())
    ]
    if not trajectories:
        raise TraceError(f"{path} holds no group without an infrastructure error")
    prefix = _shared_prefix_tokens(trajectories)
    samples = []
    for trajectory in trajectories:
        try:
            samples.append(_traced_sample(trajectory, prefix, run_dir.name))
        except ValidationError as exc:
            name = trajectory.get("sample_id", "?")
            why = exc.errors()[0]["msg"]
            raise TraceError(f"trajectory {name} cannot be traced: {why}") from None
    return samples


# -- internals ---------------------------------------------------------------------------------


def _records(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as parquet
        except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
            raise TraceError(f"reading {path} needs pyarrow (pip install pyarrow)") from exc
        try:
            rows = parquet.read_table(path).to_pylist()
        except OSError as exc:
            raise TraceError(f"{path} is not a readable Parquet file: {exc}") from exc
        for number, row in enumerate(rows, start=1):
            yield f"row {number}", {key: value for key, value in row.items() if value is not None}
        return
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{path} line {number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise TraceError(f"{path} line {number}: expected an object")
            yield f"line {number}", record


def _script(
    workload: str,
    seed: int,
    group_index: int,
    sample: TraceSample,
    corpus: TokenCorpus,
    group_rng_seed: int,
) -> SampleScript:
    prefix: tuple[int, ...] = ()
    if sample.prefix_tokens and sample.prefix_id is not None:
        offset = derive_seed(seed, "trace-prefix", sample.prefix_id) % corpus.size
        prefix = corpus.ids(offset, sample.prefix_tokens)
    own = sample.prompt_tokens - len(prefix)
    prompt_ids = prefix + (corpus.ids(group_rng_seed % corpus.size, own) if own else ())
    last = len(sample.turns) - 1
    turns = tuple(
        TurnScript(
            output_tokens=turn.output_tokens,
            observation_tokens=0 if index == last else max(1, turn.observation_tokens),
            tool=SUBMIT_TOOL if index == last else turn.tool,
            tool_latency_s=turn.latency_s,
        )
        for index, turn in enumerate(sample.turns)
    )
    return SampleScript(
        session_id=session_id_of(workload, group_index, sample.sample),
        group_index=group_index,
        sample_index=sample.sample,
        seed=derive_seed(seed, "trace-sample", group_index, sample.sample),
        prompt_ids=prompt_ids,
        turns=turns,
        reset_s=sample.reset_s,
        reward=sample.reward,
        truncated=sample.truncated,
    )


def _shared_prefix_tokens(trajectories: Sequence[Mapping[str, Any]]) -> int:
    """Length of the token prefix every trajectory's prompt starts with."""
    prompts = [_field(t, "token_ids")[: int(_field(t, "prompt_tokens"))] for t in trajectories]
    shortest = min(len(prompt) for prompt in prompts)
    first = prompts[0]
    length = 0
    while length < shortest and all(prompt[length] == first[length] for prompt in prompts):
        length += 1
    return length


def _traced_sample(trajectory: Mapping[str, Any], prefix: int, run_name: str) -> TraceSample:
    turns = []
    for turn in _field(trajectory, "turns"):
        observation = 0
        if turn.get("obs_start") is not None and turn.get("obs_end") is not None:
            observation = int(turn["obs_end"]) - int(turn["obs_start"])
        turns.append(
            TraceTurn(
                output_tokens=max(1, int(turn["gen_end"]) - int(turn["gen_start"])),
                observation_tokens=observation,
                tool=str(turn.get("tool_name") or SUBMIT_TOOL),
                latency_s=float(turn.get("act_s") or 0.0),
            )
        )
    prompt_tokens = int(_field(trajectory, "prompt_tokens"))
    truncated = bool(trajectory.get("truncated"))
    return TraceSample(
        group=str(_field(trajectory, "group_id")),
        sample=int(_field(trajectory, "sample_index")),
        prompt_tokens=prompt_tokens,
        prefix_tokens=min(prefix, prompt_tokens) if prefix else 0,
        prefix_id=f"run:{run_name}" if prefix else None,
        reward=float(trajectory.get("reward") or 0.0),
        truncated=truncated,
        reset_s=float(trajectory.get("env_init_s") or 0.0),
        turns=tuple(turns),
    )


def _field(record: Mapping[str, Any], name: str) -> Any:
    if name not in record:
        sample = record.get("sample_id", "?")
        raise TraceError(f"trajectory {sample} has no {name!r}; was it written by this project?")
    return record[name]
