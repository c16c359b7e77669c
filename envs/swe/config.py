"""`SWEEnvConfig`: every tunable of the SWE env (tools, observations, episode limits, grading).

The defaults are the values of `configs/swe/default.yaml`; the reasons behind them are in
`/work/shared/reference/swe-envs.md` (§0, §1.5, §8.1).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from envs.swe.tool_formats import ToolFormat
from foundation.config import FrozenConfig

__all__ = ["EpisodeConfig", "GradingConfig", "ObservationConfig", "SWEEnvConfig", "ToolsConfig"]


class ToolsConfig(FrozenConfig):
    """How the bash tool and the file editor run."""

    workdir: str = Field(
        "/testbed",
        description="the repository root named in the prompt and tool descriptions (the "
        "sandbox's own workdir is what commands use; keep the two equal)",
    )
    bash_timeout_s: float = Field(
        120.0, gt=0, description="seconds one bash command may run before it is killed"
    )
    bash_env: dict[str, str] = Field(
        default_factory=lambda: {
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "TERM": "dumb",
            "TQDM_DISABLE": "1",
            "PIP_NO_INPUT": "1",
        },
        description="environment variables of every bash command (no pagers, no colour codes)",
    )
    editor_exec_timeout_s: float = Field(
        30.0, gt=0, description="seconds the editor's helper commands (directory listing) may run"
    )
    snippet_context_lines: int = Field(
        4, ge=0, description="lines shown above and below an edit in the editor's snippet"
    )
    view_max_chars: int = Field(
        16_000, ge=100, description="characters of a `view` result before it is clipped"
    )
    directory_depth: int = Field(
        2, ge=1, description="levels of a directory listed by `view` on a directory"
    )
    editor_max_file_mb: float = Field(
        16.0,
        gt=0,
        description="largest file the editor reads or writes; a larger one is refused with a "
        "hint to use bash (grep, sed), so no agent can make one call cost more than this (MB)",
    )
    editor_max_listed_matches: int = Field(
        20,
        ge=1,
        description="line numbers listed when `old_str` occurs more than once (the rest are "
        "counted) (matches)",
    )
    editor_max_quoted_chars: int = Field(
        400,
        ge=10,
        description="characters of an agent's `old_str` quoted back in an editor message "
        "(characters)",
    )
    editor_undo_max_mb: float = Field(
        64.0,
        ge=0,
        description="file versions `undo_edit` keeps per episode; past it the oldest are "
        "forgotten (MB)",
    )


class ObservationConfig(FrozenConfig):
    """How tool output becomes observation text."""

    max_output_chars: int = Field(
        10_000,
        ge=100,
        description="characters of bash output kept in an observation (half head, half tail; "
        "the middle is replaced by a note saying how many characters were elided)",
    )
    max_editor_output_chars: int = Field(
        20_000,
        ge=100,
        description="characters of an editor result kept (the editor clips views itself at "
        "tools.view_max_chars; this bounds messages that quote huge arguments)",
    )
    tool_format: ToolFormat = Field(
        "tool_call",
        description="how the first observation shows a tool call (envs/swe/tool_formats.py: "
        "tool_call, tool_call_xml, json); a task source sets its own tool_format here, so the "
        "prompt never contradicts the tool block of its system message",
    )


class EpisodeConfig(FrozenConfig):
    """When an episode ends without `submit`."""

    max_steps: int = Field(
        100, ge=1, description="steps (tool calls, bad ones included) per episode"
    )
    max_episode_s: float = Field(
        3600.0, gt=0, description="seconds from reset to truncation, model time included"
    )
    max_consecutive_timeouts: int = Field(
        3, ge=1, description="bash timeouts in a row that end the episode"
    )
    check_alive_after_timeout: bool = Field(
        True, description="ask the sandbox whether it still lives after a command timed out"
    )
    grade_on_truncation: bool = Field(
        False,
        description="grade the repository when the step or time limit ends the episode "
        "(false: reward 0 without grading, as only `submit` asks for grading)",
    )


class GradingConfig(FrozenConfig):
    """How a patch is graded in a fresh sandbox, and which logs are trusted."""

    scratch_dir: str = Field(
        ".git/conductor",
        description="directory, relative to workdir, for patches and logs (inside .git so that "
        "neither git status nor the test run sees it)",
    )
    git_timeout_s: float = Field(
        120.0, gt=0, description="seconds each git step (diff, apply, test-file reset) may run"
    )
    test_timeout_s: float = Field(
        900.0, gt=0, description="seconds the test command may run (in-sandbox `timeout`)"
    )
    probe_timeout_s: float = Field(
        60.0,
        gt=0,
        description="seconds the launcher's probe may take to ask pytest, on the pristine tree, "
        "which configuration file and root directory the test command gets",
    )
    kill_grace_s: float = Field(
        5.0, gt=0, description="seconds between SIGTERM and SIGKILL when the tests time out"
    )
    host_margin_s: float = Field(
        30.0, gt=0, description="seconds the host waits past the in-sandbox test timeout"
    )
    grading_deadline_s: float = Field(
        1800.0,
        gt=0,
        description="seconds for all of grading (sandbox start included); past it grading is "
        "an infra error",
    )
    max_patch_bytes: int = Field(
        10_000_000, ge=1, description="a larger agent patch is not graded (reward 0)"
    )
    max_log_bytes: int = Field(
        16_000_000, ge=1024, description="test log kept (head and tail halves) for parsing"
    )
    log_tail_chars: int = Field(
        4000, ge=0, description="characters of the test log kept in the grading report"
    )
    patch_fuzz_lines: int = Field(
        5, ge=0, description="`patch --fuzz` used when `git apply` rejects the agent patch"
    )
    test_path_patterns: tuple[str, ...] = Field(
        (
            "**/conftest.py",
            "**/test_*.py",
            "**/*_test.py",
            "**/tests/**",
            "**/test/**",
            "**/pytest.ini",
            "**/tox.ini",
            "**/sitecustomize.py",
            "**/usercustomize.py",
            "**/.pytest.ini",
            "**/pytest.toml",
            "**/.pytest.toml",
            "**/*.pth",
            "**/__pycache__/**",
            "**/*.pyc",
            "**/*.egg-info/**",
            "**/*.dist-info/**",
        ),
        description="glob patterns (git-style `**`) of protected paths: their changes are dropped "
        "from the agent patch and undone before grading (tests, files that load code into the "
        "test run, bytecode caches, packaging metadata), besides the task's own test files",
    )
    extract_exclude_patterns: tuple[str, ...] = Field(
        (
            "**/__pycache__/**",
            "**/*.pyc",
            "**/.pytest_cache/**",
            "**/*.egg-info/**",
            "**/.mypy_cache/**",
            "**/.ruff_cache/**",
        ),
        description="git glob pathspecs never taken into the agent patch (build artefacts; "
        "`.gitignore` is honoured as well)",
    )
    harden_pytest: bool = Field(
        True,
        description="run pytest test commands through the grader's launcher: the image's pytest "
        "pinned (a patch cannot shadow it), a report of every outcome checked against the log, "
        "and canary tests that detect tampering (docs/swe.md)",
    )
    second_verdict: bool = Field(
        True,
        description="when the first run resolves the task, re-run its FAIL_TO_PASS tests in a "
        "second fresh sandbox from pristine test files with only the patch's non-test source "
        "changes applied; reward 1 only if both verdicts agree (and, hardened, the first run "
        "reported exactly the tests the second collected). Costs a second sandbox and test run "
        "per resolved grading, none for the rest (docs/swe.md, 'Two verdicts')",
    )
    config_file_patterns: tuple[str, ...] = Field(
        (
            "**/pyproject.toml",
            "**/setup.cfg",
            "**/tox.ini",
            "**/pytest.ini",
            "**/.pytest.ini",
            "**/pytest.toml",
            "**/.pytest.toml",
            "**/conftest.py",
            "**/setup.py",
            "**/sitecustomize.py",
            "**/usercustomize.py",
            "**/*.pth",
        ),
        description="glob patterns (git-style `**`) of files that configure Python or pytest: "
        "a patch that makes one a symlink or gives it line breaks other than LF / CRLF scores 0 "
        "(readers would disagree on its content), and the second verdict never applies them",
    )
    suite_started_patterns: tuple[str, ...] = Field(
        (r"^=+ test session starts =+\s*$", r"\bcollected \d+ items?\b"),
        description="regexes (multiline); one must match the log to show the suite started",
    )
    suite_summary_patterns: tuple[str, ...] = Field(
        (
            r"^=*\s*(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|"
            r"warnings?|rerun)(?:, )?)+ in [\d.]+s\b",
            r"^=*\s*no tests ran in [\d.]+s\b",
        ),
        description="regexes (multiline); one must match the log to show the suite finished",
    )
    summary_header_pattern: str = Field(
        r"^=+ short test summary info =+\s*$",
        description="regex of pytest's summary header; a log with two of them is not trusted",
    )
    timeout_exit_codes: tuple[int, ...] = Field(
        (124, 137), description="exit codes of coreutils `timeout` when it killed the tests"
    )
    tests_timeout_is_infra_error: bool = Field(
        False,
        description="treat tests killed by the in-sandbox timeout as an infra error (true) or "
        "as a failed patch, reward 0, as SWE-bench does (false)",
    )

    @field_validator("scratch_dir")
    @classmethod
    def _scratch_dir_is_plain(cls, path: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*", path) or ".." in path:
            raise ValueError(f"must be a plain relative path like .git/conductor, got {path!r}")
        return path

    @field_validator("suite_started_patterns", "suite_summary_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        if not patterns:
            raise ValueError("give at least one regex")
        for pattern in patterns:
            re.compile(pattern)
        return patterns

    @field_validator("summary_header_pattern")
    @classmethod
    def _header_compiles(cls, pattern: str) -> str:
        re.compile(pattern)
        return pattern


class SWEEnvConfig(FrozenConfig):
    """The whole SWE env config (`configs/swe/default.yaml`)."""

    tools: ToolsConfig = Field(default_factory=ToolsConfig, description="bash and editor")
    observation: ObservationConfig = Field(
        default_factory=ObservationConfig, description="observation text"
    )
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig, description="episode limits")
    grading: GradingConfig = Field(default_factory=GradingConfig, description="reward")

    @model_validator(mode="after")
    def _editor_views_fit(self) -> SWEEnvConfig:
        if self.observation.max_editor_output_chars <= self.tools.view_max_chars:
            raise ValueError(
                "observation.max_editor_output_chars must exceed tools.view_max_chars, or every "
                "clipped view would be cut again"
            )
        return self
