"""These tests run on SGLang's real classes, in `.venv-sglang` (`make test-sglang`); where SGLang
is not installed (the main venv) they are not collected."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("sglang") else ["test_*.py"]
