"""Policy-version isolation of prefix-cache KV: cache namespaces (SGLang's `extra_key`) in the
sim engine, its HTTP server and the SGLang client, and `retired_requests: cancel` in the
conductor."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from rollout.engines.base import GenerateRequest, SamplingParams
from rollout.engines.sglang import SGLangEngine, SGLangEngineConfig
from rollout.engines.sglang.wire import generate_body
from rollout.engines.sim.kv import in_namespace, namespace_salt
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.tokenizer import ByteTokenizer
from tests.rollout.engines.doubles import STOP, FixedTokens, make_engine, prompt
from tests.rollout.engines.sglang.servers import sim_server

TOKENIZER = ByteTokenizer()


def request(rid: str, ids: tuple[int, ...], namespace: str = "") -> GenerateRequest:
    return GenerateRequest(
        rid=rid,
        input_ids=ids,
        sampling=SamplingParams(max_new_tokens=64, stop_token_ids=(STOP,)),
        session_id=rid,
        cache_namespace=namespace,
    )


# -- the sim engine ------------------------------------------------------------------------------


def test_a_prompt_cached_under_v0_is_not_reused_by_v1_but_still_by_v0() -> None:
    engine = make_engine(FixedTokens(default=2), flush_cache_on_weight_update=False)
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int, int, int]:
        await engine.generate(request("a", ids, "v0"))
        warm = await engine.generate(request("b", ids, "v0"))
        await engine.update_weights(1)
        other = await engine.generate(request("c", ids, "v1"))
        again = await engine.generate(request("d", ids, "v0"))
        second = await engine.generate(request("e", ids, "v1"))
        return (
            warm.cached_tokens,
            other.cached_tokens,
            again.cached_tokens,
            second.cached_tokens,
        )

    # 960 = the prompt's whole 64-token pages bar the last token; v1 starts cold, then hits.
    assert run_virtual(main()) == (960, 0, 960, 960)


def test_the_shared_namespace_is_todays_cache() -> None:
    engine = make_engine(FixedTokens(default=2), flush_cache_on_weight_update=False)
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int]:
        await engine.generate(request("a", ids))
        shared = await engine.generate(request("b", ids))
        named = await engine.generate(request("c", ids, "v0"))
        return shared.cached_tokens, named.cached_tokens

    assert run_virtual(main()) == (960, 0)


def test_flush_mode_still_flushes_on_a_weight_update() -> None:
    engine = make_engine(FixedTokens(default=2))  # flush_cache_on_weight_update: true
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int]:
        await engine.generate(request("a", ids, "v0"))
        warm = await engine.generate(request("b", ids, "v0"))
        await engine.update_weights(1)
        cold = await engine.generate(request("c", ids, "v0"))
        return warm.cached_tokens, cold.cached_tokens

    assert run_virtual(main()) == (960, 0)


def test_an_update_told_not_to_flush_keeps_the_cache_of_an_engine_built_to_flush() -> None:
    engine = make_engine(FixedTokens(default=2))  # flush_cache_on_weight_update: true
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int, int]:
        await engine.generate(request("a", ids, "v0"))
        await engine.update_weights(1, flush_cache=False)
        kept = await engine.generate(request("b", ids, "v0"))
        other = await engine.generate(request("c", ids, "v1"))
        await engine.update_weights(2)  # the default still flushes
        flushed = await engine.generate(request("d", ids, "v0"))
        return kept.cached_tokens, other.cached_tokens, flushed.cached_tokens

    assert run_virtual(main()) == (960, 0, 0)


def test_a_retired_versions_entries_are_evicted_before_the_live_versions() -> None:
    # Room for about two 1000-token prompts: two v0 prompts cached, then two v1 prompts
    # (nothing touches v0 after the update, so LRU takes v0 first).
    engine = make_engine(FixedTokens(default=2), capacity_tokens=2304)
    first, second, third, fourth = (prompt(start, 1000) for start in (0, 5000, 10000, 15000))

    async def main() -> tuple[int, int, int]:
        await engine.generate(request("a", first, "v0"))
        await engine.generate(request("b", second, "v0"))
        await engine.update_weights(1, flush_cache=False)
        await engine.generate(request("c", third, "v1"))
        await engine.generate(request("d", fourth, "v1"))
        live = await engine.generate(request("e", third, "v1"))
        retired = await engine.generate(request("f", first, "v0"))
        older = await engine.generate(request("g", second, "v0"))
        return live.cached_tokens, retired.cached_tokens, older.cached_tokens

    live, retired, older = run_virtual(main())
    assert live == 960 and retired == 0 and older == 0


def test_an_aborted_namespaced_request_resumes_from_its_own_cache() -> None:
    engine = make_engine(FixedTokens(default=4000), flush_cache_on_weight_update=False)
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int]:
        task = asyncio.create_task(engine.generate(request("a", ids, "v0")))
        await asyncio.sleep(0.5)
        await engine.abort("a")
        partial = await task
        resumed_ids = (*ids, *partial.output_ids)
        same = await engine.generate(request("b", resumed_ids, "v0"))
        other = await engine.generate(request("c", resumed_ids, "v1"))
        return same.cached_tokens, other.cached_tokens

    same, other = run_virtual(main())
    assert same >= 1000 - 64 and other == 0


def test_namespaces_shift_token_ids_past_any_vocabulary_and_apart() -> None:
    assert namespace_salt("") == 0
    assert in_namespace((1, 2), "") == (1, 2)
    salts = {namespace_salt(f"v{version}") for version in range(1000)}
    assert len(salts) == 1000 and min(salts) >= 1 << 32
    view = in_namespace((1, 2, 3), "v3")
    assert len(view) == 3 and view[1:] == (2 + namespace_salt("v3"), 3 + namespace_salt("v3"))


# -- the SGLang wire and our HTTP server ---------------------------------------------------------


def test_the_client_sends_extra_key_only_for_a_namespace() -> None:
    shared = generate_body(request("a", (1, 2)), wire_rid="a-0")
    named = generate_body(request("a", (1, 2), "v3"), wire_rid="a-0")
    assert "extra_key" not in shared and named["extra_key"] == "v3"


def config_for(url: str) -> SGLangEngineConfig:
    return SGLangEngineConfig.model_validate(
        {"endpoints": [url], "startup_timeout_s": 2.0, "poll_interval_s": 0.05}
    )


def http_request(rid: str, namespace: str) -> GenerateRequest:
    ids = tuple(TOKENIZER.encode("Tell me about rollouts. " * 12))
    return GenerateRequest(
        rid=rid,
        input_ids=ids,
        sampling=SamplingParams(max_new_tokens=4, stop_token_ids=(TOKENIZER.eos_token_id,)),
        cache_namespace=namespace,
    )


async def test_extra_key_namespaces_the_sim_servers_cache_over_http() -> None:
    async with sim_server() as server:
        engine = await SGLangEngine.connect(config_for(server.url), encode=TOKENIZER.encode)
        try:
            await engine.generate(http_request("h-a", "v0"))
            warm = await engine.generate(http_request("h-b", "v0"))
            other = await engine.generate(http_request("h-c", "v1"))
            again = await engine.generate(http_request("h-d", "v0"))
        finally:
            await engine.aclose()
    assert warm.cached_tokens > 0 and other.cached_tokens == 0
    assert again.cached_tokens == warm.cached_tokens


async def test_the_client_skips_the_flush_when_an_update_says_so() -> None:
    async with sim_server() as server:
        engine = await SGLangEngine.connect(config_for(server.url), encode=TOKENIZER.encode)
        try:
            await engine.generate(http_request("u-a", "v0"))
            await engine.update_weights(1, flush_cache=False)
            kept = await engine.generate(http_request("u-b", "v0"))
            await engine.update_weights(2)
            flushed = await engine.generate(http_request("u-c", "v0"))
        finally:
            await engine.aclose()
    assert kept.cached_tokens > 0 and flushed.cached_tokens == 0


async def test_cache_salt_namespaces_a_raw_generate_and_a_bad_key_is_a_400() -> None:
    ids = TOKENIZER.encode("Tell me about rollouts. " * 12)

    async def cached(http: aiohttp.ClientSession, url: str, **keys: Any) -> int:
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 2}, **keys}
        async with http.post(f"{url}/generate", json=body) as response:
            assert response.status == 200, await response.text()
            return int((await response.json())["meta_info"]["cached_tokens"])

    async with sim_server() as server, aiohttp.ClientSession() as http:
        await cached(http, server.url, cache_salt="alice")
        assert await cached(http, server.url, cache_salt="alice") > 0
        assert await cached(http, server.url, cache_salt="bob") == 0
        assert await cached(http, server.url, cache_salt="alice", extra_key="v1") == 0
        body = {"input_ids": ids, "extra_key": 3}
        async with http.post(f"{server.url}/generate", json=body) as response:
            assert response.status == 400


@pytest.mark.parametrize("value", ["flush", "namespace"])
def test_version_isolation_is_validated(value: str) -> None:
    from rollout.runtime.config import ConductorConfig

    assert ConductorConfig.model_validate({"version_isolation": value}).version_isolation == value
    with pytest.raises(ValueError):
        ConductorConfig.model_validate({"retired_requests": "drop"})


# -- the conductor -------------------------------------------------------------------------------


class GroupLog:
    """A sink writer that records every group the sink completes."""

    def __init__(self) -> None:
        self.groups: list[tuple[Any, ...]] = []

    def write_group(self, group: Any) -> None:
        self.groups.append(tuple(group))

    def close(self) -> None:
        pass


def conductor_run(steps: int = 3, **changes: Any) -> tuple[list[Any], Any, GroupLog]:
    from rollout.runtime.config import ConductorConfig
    from rollout.trajectories.sink import TrajectorySink
    from tests.rollout.fakes import build_rollout, train

    log = GroupLog()

    async def main() -> tuple[list[Any], Any]:
        rollout = build_rollout(
            async_factor=3,
            engine_overrides=("max_running_requests=2", "flush_cache_on_weight_update=false"),
            conductor_config=ConductorConfig.model_validate(changes),
            sink=TrajectorySink(3, [log]),
        )
        async with rollout.conductor:
            batches = await train(rollout, steps)
        await rollout.engine.aclose()
        return batches, rollout

    batches, rollout = run_virtual(main())
    return batches, rollout, log


def generated_versions(trajectory: Any) -> set[int]:
    return {v for v, m in zip(trajectory.versions, trajectory.loss_mask, strict=True) if m}


def test_cancel_re_runs_retired_groups_so_each_trained_group_has_one_version() -> None:
    batches, rollout, log = conductor_run(retired_requests="cancel")
    stats = rollout.conductor.stats
    assert stats.restarted_groups > 0 and stats.restarted_samples > 0
    for batch in batches:
        for group in batch.groups:
            versions = set().union(*(generated_versions(t) for t in group))
            assert len(versions) == 1, (group[0].group_id, versions)
            assert sorted(t.sample_index for t in group) == [0, 1, 2]
    # No loss, no duplicates: every group the sink completed was written once, with K
    # samples, and the trainer got each of them exactly once (the rest wait in the sink).
    written = [group[0].group_id for group in log.groups]
    trained = [group_id for batch in batches for group_id in batch.group_ids]
    assert len(written) == len(set(written)) and len(trained) == len(set(trained))
    assert len(trained) == 3 * 2 and set(trained) <= set(written)
    live = {group.group_id for group in rollout.conductor.admission.live_groups}
    assert live.isdisjoint(trained) and set(written) - set(trained) <= live
    ids = [t.sample_id for group in log.groups for t in group]
    assert len(ids) == len(set(ids)) == 3 * len(log.groups)


def test_resume_keeps_mixed_version_samples_and_groups() -> None:
    batches, rollout, _ = conductor_run()
    samples = [t for batch in batches for t in batch.trajectories]
    assert rollout.conductor.stats.restarted_samples == 0
    assert rollout.conductor.stats.restarted_groups == 0
    assert any(len(generated_versions(t)) > 1 for t in samples)


def test_namespace_mode_tags_each_request_with_the_policy_version() -> None:
    namespaces: list[str] = []

    async def main() -> None:
        from rollout.runtime.config import ConductorConfig
        from tests.rollout.fakes import build_rollout, train

        rollout = build_rollout(
            async_factor=3,
            engine_overrides=("max_running_requests=2", "flush_cache_on_weight_update=false"),
            conductor_config=ConductorConfig.model_validate({"version_isolation": "namespace"}),
        )
        generate = rollout.engine.generate

        async def spy(request: GenerateRequest) -> Any:
            namespaces.append(request.cache_namespace)
            return await generate(request)

        rollout.engine.generate = spy  # type: ignore[method-assign]
        async with rollout.conductor:
            await train(rollout, 3)
        await rollout.engine.aclose()

    run_virtual(main())
    assert {"v0", "v1", "v2"} <= set(namespaces) and "" not in namespaces


def test_namespace_mode_keeps_each_versions_cache_and_never_hits_across_versions() -> None:
    from dataclasses import replace

    from rollout.runtime.config import ConductorConfig
    from tests.rollout.fakes import build_rollout, train

    seen: dict[str, set[tuple[int, ...]]] = {}  # namespace -> first pages requested so far
    hits: list[tuple[bool, bool, int]] = []  # (seen in its namespace, in another, cached)
    first: list[GenerateRequest] = []

    async def main() -> tuple[int, int]:
        rollout = build_rollout(  # the engine is built to flush (the default config)
            async_factor=3,
            engine_overrides=("max_running_requests=2",),
            conductor_config=ConductorConfig.model_validate({"version_isolation": "namespace"}),
        )
        generate = rollout.engine.generate

        async def spy(request: GenerateRequest) -> Any:
            page, namespace = tuple(request.input_ids[:64]), request.cache_namespace
            own = page in seen.get(namespace, set())
            other = any(page in pages for ns, pages in seen.items() if ns != namespace)
            seen.setdefault(namespace, set()).add(page)
            first.append(request)
            result = await generate(request)
            hits.append((own, other, result.cached_tokens))
            return result

        rollout.engine.generate = spy  # type: ignore[method-assign]
        async with rollout.conductor:
            await train(rollout, 3)
        version = rollout.conductor.policy_version
        again = await rollout.sim_engine.generate(replace(first[0], rid="again-v0"))
        moved = replace(first[0], rid="again-new", cache_namespace=f"v{version}")
        other = await rollout.sim_engine.generate(moved)
        await rollout.engine.aclose()
        return again.cached_tokens, other.cached_tokens

    again, other = run_virtual(main())
    # Three updates did not flush: v0's first prompt still hits under v0, never under v3.
    assert first[0].cache_namespace == "v0" and again > 0 and other == 0
    # A hit only ever comes from a prefix first requested in the request's own namespace; a
    # context carried over from another version (a sample resumed after an update) starts cold.
    assert all(own for own, _, cached in hits if cached > 0)
    carried = [cached for own, other_ns, cached in hits if other_ns and not own]
    assert carried and all(cached == 0 for cached in carried)
