"""What pytest's own code says about a task's configuration, and the launcher spec built on it.

The launcher's `--probe` runs in the grading sandbox on the pristine tree (base commit plus
`test_patch`, before the agent's patch) and reports the root directory and configuration file
pytest picks for the test command, a copy of that file's bytes, and the modules the repository
already held at the top level of its import path. `launch_spec` turns that into what the real run
uses: `-c` a copy of the pristine bytes written beside the original (so relative paths in it
mean the same), `--rootdir` the pristine root. Pure: the grader does the I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

__all__ = ["PytestProbe", "launch_spec", "parse_probe"]

# Files whose format pytest infers from the name, not the suffix: a copy under another name
# would be read differently, so these are used in place (they are protected paths, restored
# from the base commit before the run).
_NAME_FORMATTED = frozenset({"pytest.toml", ".pytest.toml"})


@dataclass(frozen=True, slots=True)
class PytestProbe:
    """The pristine configuration of one task's test command. Paths inside the repository are
    relative to its root (`.` for the root itself), so the probe of one sandbox serves another
    whose repository lives elsewhere; paths outside it are absolute."""

    rootdir: str
    inipath: str | None
    ini_bytes: bytes | None
    allowed_shadows: tuple[str, ...] = ()


def parse_probe(raw: bytes, ini_bytes: bytes | None) -> PytestProbe | None:
    """The probe's JSON (None when it is not what the launcher writes)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    repo, rootdir, inipath = data.get("repo"), data.get("rootdir"), data.get("inipath")
    shadows = data.get("allowed_shadows", [])
    if not (isinstance(repo, str) and isinstance(rootdir, str)):
        return None
    if inipath is not None and not isinstance(inipath, str):
        return None
    if not isinstance(shadows, list) or not all(isinstance(name, str) for name in shadows):
        return None
    return PytestProbe(
        _relative(rootdir, repo),
        None if inipath is None else _relative(inipath, repo),
        ini_bytes if inipath else None,
        tuple(shadows),
    )


def launch_spec(
    *,
    report: str,
    canary_ids: tuple[str, ...],
    run_only: tuple[str, ...] | None,
    probe: PytestProbe | None,
    nonce: str,
    pristine_copy: str,
) -> dict[str, Any]:
    """The launcher's spec. `pristine_copy` is where the grader wrote `probe.ini_bytes`."""
    return {
        "report": report,
        "canary_ids": list(canary_ids),
        "run_only": None if run_only is None else list(run_only),
        "allowed_shadows": [] if probe is None else list(probe.allowed_shadows),
        "config": None if probe is None else _config(probe, nonce, pristine_copy),
    }


def _config(probe: PytestProbe, nonce: str, pristine_copy: str) -> dict[str, Any]:
    if probe.inipath is None:
        home = "." if probe.rootdir.startswith("/") else probe.rootdir
        return {"rootdir": probe.rootdir, "dir": home, "name": f".conductor-{nonce}.ini"}
    ini = PurePosixPath(probe.inipath)
    if probe.inipath.startswith("/") or ini.name in _NAME_FORMATTED:
        return {"rootdir": probe.rootdir, "original": probe.inipath}
    return {
        "rootdir": probe.rootdir,
        "copy_from": pristine_copy,
        "dir": str(ini.parent),
        "name": f".conductor-{nonce}{ini.suffix}",
    }


def _relative(path: str, repo: str) -> str:
    """`path` relative to `repo` when inside it (`.` for the root), else as given."""
    root = repo.rstrip("/")
    if path == root:
        return "."
    if path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path
