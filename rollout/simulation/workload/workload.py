"""`SyntheticWorkload`: one seeded workload — its token pool, scripts (drawn, or replayed from a
trace file), envs and token model."""

from __future__ import annotations

from pathlib import Path

from rollout.simulation.workload.book import ScriptBook
from rollout.simulation.workload.config import WorkloadConfig
from rollout.simulation.workload.corpus import TokenCorpus
from rollout.simulation.workload.distributions import derive_seed
from rollout.simulation.workload.script import SampleScript, draw_group
from rollout.simulation.workload.sim_env import SimEnv
from rollout.simulation.workload.token_model import ScriptedTokenModel
from rollout.simulation.workload.trace import WorkloadTrace, load_trace

__all__ = ["SyntheticWorkload"]


class SyntheticWorkload:
    """Builds the matching pieces of a simulated rollout from one config and seed.

    `make_env(group, sample)` registers the sample's script in `book`, so the `token_model()`
    (give it to the engine) writes the turns that env expects. Use the env's `session_id` as the
    `session_id` of the sample's generate requests.
    """

    def __init__(self, config: WorkloadConfig, seed: int) -> None:
        self.config = config
        self.seed = seed
        self.book = ScriptBook()
        self.corpus = TokenCorpus(
            derive_seed(seed, "corpus"),
            config.vocab_size,
            config.corpus_tokens,
            reserved_ids=(config.eos_token_id,),
            distinct_ids=config.distinct_token_ids,
        )
        self._groups: dict[int, tuple[SampleScript, ...]] = {}
        self.trace: WorkloadTrace | None = None
        if config.trace is not None:
            self.trace = load_trace(Path(config.trace), group_size=config.group_size)

    def group(self, group_index: int) -> tuple[SampleScript, ...]:
        """The scripts of one group (drawn once, then remembered)."""
        scripts = self._groups.get(group_index)
        if scripts is None:
            if self.trace is not None:
                scripts = self.trace.scripts(self.config.name, self.seed, group_index, self.corpus)
            else:
                scripts = draw_group(self.config, self.seed, group_index, self.corpus)
            self._groups[group_index] = scripts
        return scripts

    def make_env(self, group_index: int, sample_index: int) -> SimEnv:
        """A fresh env for one sample; its script becomes visible to the token model."""
        scripts = self.group(group_index)
        if not 0 <= sample_index < len(scripts):
            raise IndexError(
                f"sample {sample_index} is outside group_size {self.config.group_size}"
            )
        script = scripts[sample_index]
        self.book.register(script)
        return SimEnv(script, self.corpus)

    def token_model(self) -> ScriptedTokenModel:
        return ScriptedTokenModel(
            self.config, self.book, self.corpus, derive_seed(self.seed, "tokens")
        )
