"""`conductor run` on the SGLang client over real HTTP: serve-sim plays the model, real Docker
SWE sandboxes run the tools and grade, the simulated trainer publishes weights mid-run."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from foundation.config import load_config
from rollout.core.types import NO_VERSION
from rollout.jobs.config import RunConfig
from rollout.jobs.run_job import run_job
from rollout.jobs.run_plan import plan_run_config
from rollout.trajectories.hf_tokenizer import HFTokenizer
from rollout.trajectories.tokenizer import ByteTokenizer
from tests.paths import CONFIGS
from tests.rollout.engines.sglang.servers import FaultProxy, sim_server
from tests.rollout.trajectories.local_tokenizer import save_local_tokenizer

RUN_CONFIG = CONFIGS / "run" / "sglang.yaml"
TASK = "swe-taskset__spans-remove-drops-right-part"


@pytest.mark.docker
@pytest.mark.slow
async def test_a_run_over_http_keeps_every_token_exact_through_weight_updates(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    async with sim_server(["max_running_requests=8"]) as server:
        config = load_config(
            RunConfig,
            RUN_CONFIG,
            [
                f'engine.overrides=["endpoints=[{server.url}]", poll_interval_s=0.1]',
                "steps=3",
                "groups_per_step=1",
                "group_size=4",
                "async_factor=2",
                f"task_ids=[{TASK}]",
                "pool.overrides=[backend=docker, warm_per_image=2, max_live=8, act_slots=4]",
                "trainer.train_time_s=0.5",
                "seed=3",
            ],
        )
        result = await run_job(plan_run_config(config, RUN_CONFIG.parent), tmp_path / "run")
        assert server.token_model is not None
        agent = server.token_model.agent
        trajectories = [t for batch in result.batches for t in batch.trajectories]
        assert len(trajectories) == 12 and all(t.infra_error is None for t in trajectories)
        assert {t.reward for t in trajectories} == {0.0, 1.0}
        tokenizer = ByteTokenizer()
        end_of_turn = tokenizer.special_token_id("<|im_end|>")  # the chat template's stop token
        for trajectory in trajectories:
            for position, generated in enumerate(trajectory.loss_mask):
                version = trajectory.versions[position]
                logprob = trajectory.logprobs[position]
                if generated:
                    assert version >= 0 and logprob <= 0.0
                else:
                    assert version == NO_VERSION and logprob == 0.0
            # The generated ids are the server's, token for token: each turn is the script's
            # text for that turn and the end-of-turn token.
            script = agent.script(f"{trajectory.sample_id}/r{trajectory.attempt}")
            for index, turn in enumerate(trajectory.turns):
                span = trajectory.token_ids[turn.gen_start : turn.gen_end]
                assert span[-1] == end_of_turn
                assert tokenizer.decode(span[:-1]) == script.actions[index]
            token_versions = [v for v in trajectory.versions if v != NO_VERSION]
            assert token_versions == sorted(token_versions)  # never older than a token before
        # The third group is admitted only after the first update: the run kept generating
        # across weight updates, and no sample was lost to them (12 consumed, none failed).
        assert len({v for t in trajectories for v in t.versions if v != NO_VERSION}) >= 2


@pytest.mark.docker
@pytest.mark.slow
async def test_a_run_with_a_models_own_tokenizer_and_chat_template_is_exact(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    tokenizer_dir = save_local_tokenizer(tmp_path / "tokenizer")
    tokenizer = HFTokenizer(tokenizer_dir)
    async with sim_server(
        ["max_running_requests=8"], serve_overrides=[f"tokenizer_path={tokenizer_dir}"]
    ) as server:
        config = load_config(
            RunConfig,
            RUN_CONFIG,
            [
                f'engine.overrides=["endpoints=[{server.url}]", poll_interval_s=0.1]',
                f"tokenizer_path={tokenizer_dir}",
                "steps=1",
                "groups_per_step=1",
                "group_size=2",
                "async_factor=1",
                f"task_ids=[{TASK}]",
                "pool.overrides=[backend=docker, warm_per_image=2, max_live=4, act_slots=2]",
                "trainer.train_time_s=0.1",
                "seed=5",
            ],
        )
        result = await run_job(plan_run_config(config, RUN_CONFIG.parent), tmp_path / "run")
        assert server.token_model is not None
        agent = server.token_model.agent
    end_of_turn = tokenizer.special_token_id("<|im_end|>")
    trajectories = [t for batch in result.batches for t in batch.trajectories]
    assert len(trajectories) == 2 and all(t.infra_error is None for t in trajectories)
    for trajectory in trajectories:
        script = agent.script(f"{trajectory.sample_id}/r{trajectory.attempt}")
        rendered = tokenizer.decode(trajectory.token_ids)
        assert rendered.startswith("<|im_start|>system\n") and "<|im_start|>tool\n" in rendered
        for index, turn in enumerate(trajectory.turns):
            span = trajectory.token_ids[turn.gen_start : turn.gen_end]
            assert span[-1] == end_of_turn
            assert tokenizer.decode(span[:-1]) == script.actions[index]


@pytest.mark.docker
@pytest.mark.slow
async def test_two_servers_as_two_engines_each_keep_their_samples(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    async with (
        sim_server(["max_running_requests=4"]) as first,
        sim_server(["max_running_requests=4"]) as second,
        FaultProxy(first.url) as first_proxy,
        FaultProxy(second.url) as second_proxy,
    ):
        endpoints = f"[{first_proxy.url},{second_proxy.url}]"
        config = load_config(
            RunConfig,
            RUN_CONFIG,
            [
                f'engine.overrides=["endpoints={endpoints}", engine_per_endpoint=true, '
                "poll_interval_s=0.1]",
                "steps=1",
                "groups_per_step=2",
                "group_size=2",
                "async_factor=1",
                f"task_ids=[{TASK}]",
                "pool.overrides=[backend=docker, warm_per_image=2, max_live=8, act_slots=4]",
                "trainer.train_time_s=0.2",
                "seed=4",
            ],
        )
        result = await run_job(plan_run_config(config, RUN_CONFIG.parent), tmp_path / "run")
    trajectories = [t for batch in result.batches for t in batch.trajectories]
    assert len(trajectories) == 4 and all(t.infra_error is None for t in trajectories)
    served = [
        {body["session_id"] for body in proxy.bodies("/generate")}
        for proxy in (first_proxy, second_proxy)
    ]
    assert {t.info["engine"] for t in trajectories} == {"sglang-0", "sglang-1"}
    assert all(served), "both servers took samples"
    assert not served[0] & served[1], "a sample's turns stay on the engine it started on"
    assert served[0] | served[1] == {f"{t.sample_id}/r{t.attempt}" for t in trajectories}
