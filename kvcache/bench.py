"""Micro-benchmark of the KV policies: per-operation cost at 1M cached tokens and 10k sessions.

Run `python -m kvcache.bench` (about a minute on 2 cores) or shrink it with flags, e.g.
`python -m kvcache.bench --tokens 100000 --sessions 1000`. It builds a cache of agent sessions
(groups of samples sharing a prompt, each context inserted over several turns so the tree is
deep), then times single operations with `time.perf_counter` and prints one table row each.
Contexts carry their page keys, as the engine's requests do (`kvcache.page_keys`); a lookup of
a plain tuple also hashes its pages first.
Figures are for comparison between policies and revisions on one machine, not absolutes.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvcache.config import KVCacheConfig
from kvcache.eviction_order import EvictionClass
from kvcache.page_keys import AppendOnlyPageKeys, TokenSnapshot
from kvcache.policy_base import CachePolicyBase
from kvcache.registry import make_kv_policy
from kvcache.types import Priority

__all__ = ["BenchRow", "BenchSettings", "format_table", "main", "run_benchmark"]


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """Sizes of the benchmark workload."""

    cached_tokens: int = 1_000_000
    sessions: int = 10_000
    samples_per_group: int = 8
    turns_per_session: int = 4
    shared_prompt_fraction: float = 0.2  # share of the tokens in prompts shared by a group
    high_priority_fraction: float = 0.2
    page_size: int = 16
    vocab_size: int = 50_000
    ops: int = 2_000  # timed operations per row
    policies: tuple[str, ...] = ("priority", "lru")
    seed: int = 0


@dataclass(frozen=True, slots=True)
class BenchRow:
    """Timing of one operation kind under one policy."""

    policy: str
    operation: str
    ops: int
    mean_us: float
    p50_us: float
    p99_us: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class _Workload:
    contexts: list[TokenSnapshot]  # per session, page-aligned
    priorities: list[Priority]
    prompt_tokens: int  # shared by the samples of a group
    unique_tokens: int  # tokens the tree holds once every context is cached


def _workload(settings: BenchSettings) -> _Workload:
    rng = random.Random(settings.seed)
    page = settings.page_size
    groups = max(1, settings.sessions // settings.samples_per_group)
    prompt_tokens = int(settings.cached_tokens * settings.shared_prompt_fraction / groups)
    tail_tokens = int(settings.cached_tokens * (1 - settings.shared_prompt_fraction))
    tail_tokens //= settings.sessions
    prompt_tokens = max(page, prompt_tokens - prompt_tokens % page)
    tail_tokens = max(page, tail_tokens - tail_tokens % page)
    prompts = [
        tuple(rng.randrange(settings.vocab_size) for _ in range(prompt_tokens))
        for _ in range(groups)
    ]
    contexts: list[TokenSnapshot] = []
    priorities: list[Priority] = []
    for index in range(settings.sessions):
        tail = [rng.randrange(settings.vocab_size) for _ in range(tail_tokens)]
        record = [*prompts[index % groups], *tail]
        # As the engine's requests do: the context carries its page keys (hashed once).
        contexts.append(TokenSnapshot(record, AppendOnlyPageKeys(record)))
        high = rng.random() < settings.high_priority_fraction
        priorities.append(Priority.HIGH if high else Priority.LOW)
    unique = groups * prompt_tokens + settings.sessions * tail_tokens
    return _Workload(contexts, priorities, prompt_tokens, unique)


def _time_ops(operation: Callable[[int], object], ops: int) -> tuple[float, float, float]:
    """(mean, median, p99) in µs of `ops` calls; collects garbage first so that earlier work
    is not charged to these calls (the cyclic collector still runs as it would)."""
    gc.collect()
    samples: list[float] = []
    for index in range(ops):
        start = time.perf_counter()
        operation(index)
        samples.append(time.perf_counter() - start)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return statistics.fmean(samples) * 1e6, samples[len(samples) // 2] * 1e6, p99 * 1e6


def _bench_policy(name: str, settings: BenchSettings, work: _Workload) -> list[BenchRow]:
    rows: list[BenchRow] = []
    # The device holds exactly the built cache, so every later reservation must evict.
    config = KVCacheConfig(
        policy=name,
        page_size=settings.page_size,
        device_capacity_tokens=work.unique_tokens,
        host_capacity_tokens=2 * work.unique_tokens,
    )
    policy = make_kv_policy(config)
    assert isinstance(policy, CachePolicyBase)
    rng = random.Random(settings.seed + 1)
    sessions = [f"s{index}" for index in range(settings.sessions)]

    def row(operation: str, ops: int, timing: tuple[float, float, float], note: str = "") -> None:
        rows.append(BenchRow(name, operation, ops, *timing, note))

    # Build: every session opens, then caches the shared prompt plus a growing share of its own
    # tokens, one turn at a time, interleaved with the other sessions like concurrent agents.
    turns = settings.turns_per_session
    page = settings.page_size
    inserts: list[tuple[int, str, tuple[int, ...]]] = []
    for session_id, context, priority in zip(sessions, work.contexts, work.priorities, strict=True):
        policy.open(session_id, priority, 0.0)
        own_pages = (len(context) - work.prompt_tokens) // page
        for turn in range(1, turns + 1):
            cut = work.prompt_tokens + max(1, own_pages * turn // turns) * page
            inserts.append((turn, session_id, context[:cut]))
    rng.shuffle(inserts)
    inserts.sort(key=lambda item: item[0])  # stable: turn by turn, sessions interleaved
    clock = iter(range(1, len(inserts) + 1))

    def insert(index: int) -> None:
        _, session_id, tokens = inserts[index]
        policy.insert(tokens, float(next(clock)), session_id=session_id)

    timing = _time_ops(insert, len(inserts))
    cache = policy.cache
    row(
        "insert (one turn's context)",
        len(inserts),
        timing,
        f"{cache.device_cached_tokens:,} tokens, {cache.tree.node_count:,} nodes",
    )
    now_s = float(len(inserts) + 1)

    picks = [rng.randrange(settings.sessions) for _ in range(settings.ops)]
    timing = _time_ops(lambda i: policy.match_prefix(work.contexts[picks[i]], now_s), settings.ops)
    row("match_prefix (full device hit)", settings.ops, timing)
    misses = [
        tuple(rng.randrange(settings.vocab_size) for _ in range(page * 8))
        for _ in range(settings.ops)
    ]
    timing = _time_ops(lambda i: policy.match_prefix(misses[i], now_s), settings.ops)
    row("match_prefix (miss)", settings.ops, timing)
    timing = _time_ops(lambda i: policy.evictable_size(Priority.LOW), settings.ops)
    row("evictable_size", settings.ops, timing)

    def lock_unlock(index: int) -> None:
        policy.unlock(policy.lock(work.contexts[picks[index]]))

    row("lock + unlock", settings.ops, _time_ops(lock_unlock, settings.ops))

    # Sessions: a tenth finish (their KV becomes unreferenced cache); of the low-priority rest,
    # half start a long tool (offloaded at once), half a short one (kept on device).
    order = list(range(settings.sessions))
    rng.shuffle(order)
    closing = order[: max(1, settings.sessions // 10)]
    for index in closing:
        policy.close(sessions[index], now_s)
    waiting = [i for i in order[len(closing) :] if work.priorities[i] is Priority.LOW]
    long_tools = waiting[: min(settings.ops, len(waiting) // 2)]
    short_tools = waiting[len(long_tools) :]
    decisions = 0

    def tool_wait(index: int) -> None:
        nonlocal decisions
        decisions += len(policy.tool_wait(sessions[long_tools[index]], 60.0, now_s))

    if name == "priority":
        timing = _time_ops(tool_wait, len(long_tools))
        row("tool_wait (low, 60 s tool)", len(long_tools), timing, f"{decisions} offloads")
    for index in short_tools:
        policy.tool_wait(sessions[index], 0.01, now_s)

    # Eviction decisions: the device is full, so each one-page reservation evicts leaf-up.
    policy.reserve(cache.free_device_tokens, Priority.HIGH, now_s)
    ops = min(settings.ops, max(1, cache.evictable_tokens(EvictionClass.UNREFERENCED) // page))
    timing = _time_ops(lambda i: policy.reserve(page, Priority.LOW, now_s), ops)
    row("reserve → evict (unreferenced)", ops, timing, _moved(policy))
    if name == "priority":
        demand = cache.device_capacity_tokens
        steps = min(settings.ops, 200)
        decisions = 0

        def forward(index: int) -> None:
            nonlocal decisions
            decisions += len(policy.before_forward(demand, now_s + index * 1e-3))

        timing = _time_ops(forward, steps)
        note = f"{decisions} offloads, {len(short_tools):,} short tools waiting"
        row("before_forward (pressure)", steps, timing, note)
        policy.reserve(cache.evictable_tokens(EvictionClass.UNREFERENCED), Priority.LOW, now_s)
        policy.reserve(cache.free_device_tokens, Priority.LOW, now_s)
        timing = _time_ops(lambda i: policy.reserve(page, Priority.LOW, now_s), settings.ops)
        row("reserve → evict (low-ref)", settings.ops, timing, _moved(policy))
    return rows


def _moved(policy: CachePolicyBase) -> str:
    stats = policy.stats()
    return f"{stats.offloaded_tokens:,} offloaded, {stats.dropped_tokens:,} dropped"


def run_benchmark(settings: BenchSettings) -> list[BenchRow]:
    """Build the workload once and time every operation for each policy."""
    work = _workload(settings)
    rows: list[BenchRow] = []
    for name in settings.policies:
        rows.extend(_bench_policy(name, settings, work))
    return rows


def format_table(rows: Sequence[BenchRow], settings: BenchSettings) -> str:
    """A plain-text table of the rows."""
    header = (
        f"KV policy micro-benchmark: {settings.cached_tokens:,} cached tokens (target), "
        f"{settings.sessions:,} sessions, page {settings.page_size}, "
        f"{settings.turns_per_session} turns/session"
    )
    lines = [header, ""]
    lines.append(
        f"{'policy':<9} {'operation':<31} {'ops':>6} {'mean µs':>8} {'p50 µs':>8} {'p99 µs':>8}"
        "  note"
    )
    lines.append("-" * 110)
    for r in rows:
        lines.append(
            f"{r.policy:<9} {r.operation:<31} {r.ops:>6} {r.mean_us:>8.1f} {r.p50_us:>8.1f} "
            f"{r.p99_us:>8.1f}  {r.note}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; prints the table."""
    defaults = BenchSettings()
    parser = argparse.ArgumentParser(prog="python -m kvcache.bench", description=__doc__)
    parser.add_argument("--tokens", type=int, default=defaults.cached_tokens)
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument("--turns", type=int, default=defaults.turns_per_session)
    parser.add_argument("--page-size", type=int, default=defaults.page_size)
    parser.add_argument("--ops", type=int, default=defaults.ops)
    parser.add_argument("--policy", choices=["priority", "lru", "both"], default="both")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    policies = ("priority", "lru") if args.policy == "both" else (args.policy,)
    settings = BenchSettings(
        cached_tokens=args.tokens,
        sessions=args.sessions,
        turns_per_session=args.turns,
        page_size=args.page_size,
        ops=args.ops,
        policies=policies,
        seed=args.seed,
    )
    started = time.perf_counter()
    rows = run_benchmark(settings)
    print(format_table(rows, settings))
    print(f"\n(total wall time {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
