"""Builds real trajectories for tests through the chat prompt builder, as the agent loop will."""

from __future__ import annotations

from rollout.core.types import Trajectory, Turn, make_sample_id
from rollout.trajectories.tokenizer import ByteTokenizer, ChatPromptBuilder

TOKENIZER = ByteTokenizer()
IM_END = TOKENIZER.special_token_id("<|im_end|>")


def make_trajectory(
    group_id: str = "g0",
    index: int = 0,
    reward: float | None = 1.0,
    turns: int = 2,
    infra_error: str | None = None,
    version: int = 0,
) -> Trajectory:
    """A sample whose i-th turn generates `i + 2` tokens and runs a bash tool in between."""
    chat = ChatPromptBuilder(TOKENIZER, messages=[("system", "sys"), ("user", f"task {index}")])
    records = []
    for turn in range(turns):
        chat.open_turn()
        ids = [*TOKENIZER.encode("a" * (turn + 1 + index)), IM_END]
        chat.append_generated(ids, [-0.1 * (k + 1) for k in range(len(ids))], version=version)
        span = chat.end_turn()
        obs_start = obs_end = 0
        if turn + 1 < turns:
            observation = chat.add_observation(f"out {turn}")
            obs_start, obs_end = observation.start, observation.end
        records.append(
            Turn(
                index=turn,
                gen_start=span.start,
                gen_end=span.end,
                obs_start=obs_start,
                obs_end=obs_end,
                tool_name="bash" if obs_end else None,
                tool_result=f"out {turn}" if obs_end else None,
                gen_s=0.5,
                act_s=0.25 if obs_end else 0.0,
            )
        )
    return Trajectory(
        sample_id=make_sample_id(group_id, 0, index),
        group_id=group_id,
        prompt_index=0,
        sample_index=index,
        token_ids=chat.token_ids,
        loss_mask=chat.loss_mask,
        logprobs=chat.logprobs,
        versions=chat.versions,
        prompt_tokens=chat.prompt_tokens,
        turns=tuple(records),
        reward=reward,
        terminated=True,
        infra_error=infra_error,
        info={"tests_passed": index},
    )


def make_group(group_id: str, rewards: list[float | None], **kwargs: object) -> list[Trajectory]:
    return [
        make_trajectory(group_id, index, reward=reward, **kwargs)  # type: ignore[arg-type]
        for index, reward in enumerate(rewards)
    ]
