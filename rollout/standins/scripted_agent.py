"""`ScriptedSWEAgent`: a scripted SWE agent that plays the model inside the simulated engine.

It is a `TokenModel` (`rollout.engines.sim.token_model`): the engine paces generation on its
cost model, and this agent decides the tokens — real Hermes tool calls for the shipped SWE
tasks, so `conductor run` exercises the whole stack (engine → agent loop → env pool → sandbox
→ grader) without a GPU. Each sample follows one strategy, drawn from its seed:

* ``fix``: explore (ls, grep, view), run the tests, apply the task's gold patch with a bash
  heredoc and `git apply`, re-run the tests, submit — reward 1;
* ``wrong_edit``: explore, run the tests, make an edit that changes nothing that matters
  (`str_replace_editor insert` of a comment), submit — reward 0;
* ``no_fix``: explore, run the tests, submit — reward 0.

So a group's rewards differ and GRPO advantages are non-zero. Register each session's task
with `register` before its first request (the session factory's `on_open` hook does), or any
other script with `register_script` (a mixed run's example-env source plays
`file_check_script`). Calls are written in a tool format of `envs.swe.tool_formats` (default the
Hermes ``<tool_call>`` JSON). Like the
synthetic token model, an aborted turn resumes exactly where it stopped when the caller sends
prompt + partial output again.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from envs.swe.tasks import SWETask
from envs.swe.tool_formats import ToolFormat, render_call
from rollout.engines.base import EngineError, FinishReason, GenerateRequest
from rollout.engines.sim.token_model import TurnPlan, unfinished_rest
from rollout.standins.config import ScriptedPolicyConfig
from rollout.trajectories.tokenizer import Tokenizer

__all__ = ["AgentScript", "ScriptedSWEAgent", "agent_script", "file_check_script"]

_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_PYTHON_WORDS = frozenset({"self", "return", "raise", "None", "True", "False", "elif", "else"})


@dataclass(frozen=True, slots=True)
class AgentScript:
    """The texts of one sample's turns, in order, and the strategy they follow."""

    strategy: str
    actions: tuple[str, ...]


def agent_script(
    task: SWETask,
    rng: random.Random,
    config: ScriptedPolicyConfig,
    workdir: str = "/testbed",
    tool_format: ToolFormat = "tool_call",
) -> AgentScript:
    """Draw a strategy and write its turns for `task` (or play `config.actions` as given)."""
    if config.actions:
        return AgentScript("fixed", tuple(config.actions))

    def _call(name: str, arguments: dict[str, object], thought: str) -> str:
        return render_call(tool_format, name, arguments, thought)

    def _bash(command: str, thought: str) -> str:
        return _call("bash", {"command": command}, thought)

    files = _DIFF_FILE.findall(task.patch)
    target = files[0] if files else "."
    word = _changed_word(task.patch)
    tests = " ".join(task.test_files)
    test_command = (
        f"python3 -m pytest -q -x --no-header -p no:cacheprovider {tests} 2>&1 | tail -n 5"
    )
    run_tests = _bash(test_command, "Let me run the existing tests first.")
    explore = [
        _bash("ls -la", "I'll look at the repository layout."),
        _bash(f"grep -rn {word} --include=*.py . | head -n 20", f"Where is `{word}` used?"),
        _call(
            "str_replace_editor",
            {"command": "view", "path": f"{workdir}/{target}"},
            f"Let me read {target}.",
        ),
    ]
    most = min(config.max_explore_steps, len(explore))
    steps = [*explore[: rng.randint(min(1, most), most)], run_tests]
    if rng.random() < config.fix_probability:
        strategy = "fix"
        patch = task.patch if task.patch.endswith("\n") else task.patch + "\n"
        apply = (
            f"cat > /tmp/fix.patch <<'EOF_PATCH'\n{patch}EOF_PATCH\n"
            "git apply /tmp/fix.patch && git diff --stat"
        )
        steps += [
            _bash(apply, "I found the bug; applying the fix."),
            _bash(test_command, "Running the tests again."),
        ]
    elif rng.random() < config.wrong_edit_probability:
        strategy = "wrong_edit"
        edit = {
            "command": "insert",
            "path": f"{workdir}/{target}",
            "insert_line": 0,
            "new_str": "# Reviewed: the logic below looks right to me.\n",
        }
        steps.append(_call("str_replace_editor", edit, "The code looks fine; noting my review."))
    else:
        strategy = "no_fix"
    steps.append(_call("submit", {}, "I'm done."))
    return AgentScript(strategy, tuple(steps))


def file_check_script(
    word: str, rng: random.Random, config: ScriptedPolicyConfig, tool_format: ToolFormat
) -> AgentScript:
    """Turns for the example env (`envs.example`, with tool calls): write `word` reversed into
    answer.txt (``fix``, with `config.fix_probability`) or `word` as it is (``wrong_edit``),
    look at the file, submit."""
    fix = rng.random() < config.fix_probability
    answer = word[::-1] if fix else word
    steps = (
        render_call(tool_format, "bash", {"command": f"printf %s {answer} > answer.txt"}, "Write."),
        render_call(tool_format, "bash", {"command": "cat answer.txt"}, "Check it."),
        render_call(tool_format, "submit", {}, "Done."),
    )
    return AgentScript("fix" if fix else "wrong_edit", steps)


def _changed_word(patch: str) -> str:
    """An identifier from a line the gold patch removes (something worth grepping for)."""
    for line in patch.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            for word in _WORD.findall(line):
                if word not in _PYTHON_WORDS:
                    return word
    return "def"


@dataclass(slots=True)
class _Session:
    script: AgentScript
    seed: str
    turns_done: int = 0
    last_plan: TurnPlan | None = None
    pending: TurnPlan | None = None  # the rest of an aborted turn
    pending_input_tokens: int = -1


class ScriptedSWEAgent:
    """A `TokenModel` that writes each registered session's scripted turns; see the module doc."""

    def __init__(self, tokenizer: Tokenizer, config: ScriptedPolicyConfig) -> None:
        self._tokenizer = tokenizer
        self._config = config
        self._sessions: dict[str, _Session] = {}

    def register(self, session_id: str, task: SWETask, sample_key: str) -> AgentScript:
        """Script the session's turns for `task`; `sample_key` seeds its strategy."""
        seed = f"{self._config.seed}/{sample_key}"
        script = agent_script(task, random.Random(seed), self._config)
        self._sessions[session_id] = _Session(script, seed)
        return script

    def register_script(self, session_id: str, script: AgentScript, sample_key: str) -> None:
        """Play `script` in the session; `sample_key` seeds its logprobs."""
        self._sessions[session_id] = _Session(script, f"{self._config.seed}/{sample_key}")

    def sample_rng(self, sample_key: str) -> random.Random:
        """The strategy draw of sample `sample_key` (as `register` seeds it)."""
        return random.Random(f"{self._config.seed}/{sample_key}")

    def script(self, session_id: str) -> AgentScript:
        return self._session(session_id).script

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def plan(self, request: GenerateRequest) -> TurnPlan:
        session = self._session(request.session_id)
        pending, session.pending = session.pending, None
        if pending is not None and len(request.input_ids) == session.pending_input_tokens:
            plan = pending
        else:
            plan = self._turn(session, request)
        session.last_plan = plan
        return plan

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        session = self._sessions.get(request.session_id)
        if session is None or session.last_plan is None:
            return
        rest = unfinished_rest(session.last_plan, produced_tokens, reason)
        if rest is not None:
            session.pending = rest
            session.pending_input_tokens = len(request.input_ids) + produced_tokens
        else:
            session.turns_done += 1

    def _turn(self, session: _Session, request: GenerateRequest) -> TurnPlan:
        actions = session.script.actions
        text = actions[min(session.turns_done, len(actions) - 1)]
        stops = request.sampling.stop_token_ids
        stop = stops[0] if stops else self._tokenizer.eos_token_id
        ids = (*self._tokenizer.encode(text), stop)
        rng = random.Random(f"{session.seed}/turn{session.turns_done}")
        low = self._config.min_logprob
        logprobs = tuple(rng.uniform(low, 0.0) for _ in ids)
        return TurnPlan(ids, logprobs, ends_with_stop=True)

    def _session(self, session_id: str) -> _Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise EngineError(
                f"the scripted agent has no script for session {session_id!r}; register() the "
                "session's task before its first request"
            ) from None
