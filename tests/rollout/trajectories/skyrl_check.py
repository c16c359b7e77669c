"""Run by `.venv-skyrl/bin/python` (SkyRL needs Python >= 3.12): SkyRL's own definitions, read
from the installed `skyrl` and `skyrl-train` packages, checked against a JSON `GeneratorOutput`
on stdin; prints a JSON verdict.

The modules that define them import Ray, torch (no CPU build for Python 3.12 on the package
index: several GB) and SkyRL's training workers at the top, so the definitions are taken from
the installed files (`ast`) and executed alone with what their bodies use: numpy, loguru's
logger and `SAMPLE_SUPPORT_FIELD`. The code that runs is SkyRL's, as installed.
"""

import ast
import json
import sys
import traceback
import typing
from dataclasses import dataclass
from importlib.metadata import distribution
from typing import Any

import numpy as np
from loguru import logger


def installed(dist: str, path: str) -> ast.Module:
    """An installed package's source file, parsed (not imported)."""
    located = distribution(dist).locate_file(path)
    return ast.parse(located.read_text(encoding="utf-8"), filename=str(located))


def definitions(tree: ast.Module, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    nodes = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Assign)
        and (getattr(node, "name", None) in names or _assigns(node) & names)
    ]
    found = {getattr(n, "name", None) for n in nodes} | {t for n in nodes for t in _assigns(n)}
    missing = names - found
    if missing:
        raise SystemExit(f"not found in the installed file: {sorted(missing)}")
    exec(compile(ast.Module(body=nodes, type_ignores=[]), "<skyrl>", "exec"), namespace)
    return namespace


def _assigns(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()


def typed_dict_keys(tree: ast.Module, name: str) -> list[str]:
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return [
        s.target.id
        for s in node.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]


def main() -> None:
    request = json.load(sys.stdin)
    output = request["output"]
    base = {name: getattr(typing, name) for name in typing.__all__}
    base.update(np=np, logger=logger, dataclass=dataclass, GeneratorOutput=dict)
    verdict: dict[str, Any] = {}

    # skyrl 0.4: skyrl/train/generators/base.py and skyrl/train/utils/trainer_utils.py
    generators = installed("skyrl", "skyrl/train/generators/base.py")
    verdict["skyrl_keys"] = typed_dict_keys(generators, "GeneratorOutput")
    trajectory_id = definitions(generators, {"TrajectoryID"}, dict(base))["TrajectoryID"]
    support = definitions(
        installed("skyrl", "skyrl/backends/skyrl_train/utils/sample_support.py"),
        {"SAMPLE_SUPPORT_FIELD"},
        {},
    )
    namespace = dict(base, SAMPLE_SUPPORT_FIELD=support["SAMPLE_SUPPORT_FIELD"])
    definitions(
        installed("skyrl", "skyrl/train/utils/trainer_utils.py"),
        {
            "validate_generator_output",
            "_validate_per_token_side_channels",
            "_validate_step_wise_fields",
        },
        namespace,
    )
    skyrl_output = dict(output)
    skyrl_output["trajectory_ids"] = [trajectory_id(*pair) for pair in output["trajectory_ids"]]
    verdict["skyrl"] = _run(namespace["validate_generator_output"], request, skyrl_output)

    # skyrl-train 0.3: skyrl_train/utils/trainer_utils.py
    old = definitions(
        installed("skyrl-train", "skyrl_train/utils/trainer_utils.py"),
        {"validate_generator_output"},
        dict(base),
    )
    verdict["skyrl_train"] = _run(old["validate_generator_output"], request, skyrl_output)
    print(json.dumps(verdict))


def _run(validate: Any, request: dict[str, Any], output: dict[str, Any]) -> str:
    try:
        validate(request["num_prompts"], output)
    except Exception:
        return traceback.format_exc(limit=1).strip().splitlines()[-1]
    return "passed"


if __name__ == "__main__":
    main()
