"""Where a simulated run's time beyond its floor went (SIMULATED).

`rollout.simulation.lower_bound` bounds the engine time of the consumed samples from below:
the fixed part of the fewest forwards that could compute them plus the per-token work of
computing each of their tokens once. A run's own time, Σ T_next (its origin to its last
batch), splits against that floor exactly, from what the simulated engine counted:

* **forwards**: the fixed part (`forward_fixed_s`: launch and weight read) of the forwards the
  engine ran, beyond the floor's. Decode batches smaller than the KV pool or the slots allow
  (contexts of a few tens of thousands of tokens pack a pool of a few hundred thousand
  unevenly; admission keeps room for running requests' growth) and prefill forwards of their
  own land here.
* **extra work**: per-token work beyond the consumed samples' once-over: recomputation (after
  evictions, and after weight updates flushed the cache), samples no batch consumed (in
  flight at the end, or dropped), the shared prompt prefilled more than once.
* **idle**: the rest: engine time with nothing to compute (agents in tools, admission held
  back). The counters are read when the trainer takes the last batch, so work between that
  batch's completion and its hand-over (a trainer still busy with the step before) counts
  in the parts above and makes idle that much lower, even below 0.

With several engines each part is per engine (engine-seconds ÷ engines), as the floor is.
Pure arithmetic; the caller reads the engine's counters.
"""

from __future__ import annotations

from rollout.engines.sim.cost_model import CostModelConfig
from rollout.observe.engine_work import EngineWork
from rollout.observe.run_summary import FloorGap
from rollout.simulation.lower_bound import work_terms_s

__all__ = ["floor_gap"]


def floor_gap(
    *,
    elapsed_s: float,
    floor_s: float,
    consumed: EngineWork,
    done: EngineWork,
    done_fixed_s: float,
    cost: CostModelConfig,
    engines: int = 1,
) -> FloorGap:
    """Split `elapsed_s - floor_s` (see the module docstring). `floor_s`: `engine_floor_s` of
    `consumed`, the consumed samples' work; `done`: what the engines computed in all, whose
    forwards' fixed parts sum to `done_fixed_s` (engine-seconds, summed over `engines`)."""
    if engines < 1:
        raise ValueError(f"a floor gap needs at least one engine, got {engines}")
    consumed_tokens_s = sum(work_terms_s(consumed, cost, engines))
    done_tokens_s = sum(work_terms_s(done, cost, engines))
    forwards_s = done_fixed_s / engines - (floor_s - consumed_tokens_s)
    extra_work_s = done_tokens_s - consumed_tokens_s
    idle_s = elapsed_s - floor_s - forwards_s - extra_work_s
    return FloorGap(elapsed_s, floor_s, forwards_s, extra_work_s, idle_s)
