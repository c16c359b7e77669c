"""Where the repository's files are, for tests at any depth of the test tree."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONFIGS", "EXAMPLES", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = REPO_ROOT / "configs"
EXAMPLES = REPO_ROOT / "examples"
