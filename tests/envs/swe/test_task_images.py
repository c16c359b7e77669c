"""Task image names (pure): a content hash of every input, prebuilt images passed through."""

from __future__ import annotations

import os
from pathlib import Path

from envs.swe.images import TaskImageConfig, TaskImageResolver, numeric_uid
from envs.swe.tasks import load_shipped_tasks

TASK = load_shipped_tasks()[0]


def resolver(**config: object) -> TaskImageResolver:
    return TaskImageResolver(TaskImageConfig(**config), "aio-conductor/base:abc")  # type: ignore[arg-type]


def test_the_tag_is_stable_and_changes_with_every_input() -> None:
    tag = resolver().image_for(TASK)
    assert tag == resolver().image_for(TASK)
    changed = [
        resolver().image_for(TASK.model_copy(update={"install_cmd": "pip install -e ."})),
        resolver().image_for(TASK.model_copy(update={"base_commit": "f" * 40})),
        resolver(allow_network=True).image_for(TASK),  # built under other conditions
        resolver(agent_uid=1000).image_for(TASK),  # /testbed handed to another user
        TaskImageResolver(TaskImageConfig(), "aio-conductor/base:def").image_for(TASK),
    ]
    assert tag not in changed and len(set(changed)) == len(changed)


def test_a_prebuilt_image_is_used_as_named_whatever_the_source() -> None:
    prebuilt = TASK.model_copy(update={"image": "me/env:1", "project": None})
    assert resolver().image_for(prebuilt) == "me/env:1"
    assert resolver(source="swebench").image_for(prebuilt) == "me/env:1"


def test_install_runs_in_the_image_build() -> None:
    with_install = TASK.model_copy(update={"install_cmd": "pip install -e ."})
    assert resolver().dockerfile(with_install).endswith("RUN pip install -e .\n")


async def test_the_local_backends_template_directories_are_removed_on_close() -> None:
    from envs.swe.runtime import swe_backend

    runtime = swe_backend("local")
    await runtime.ensure_image(TASK)
    root = runtime._template_root
    assert root is not None and (root / TASK.instance_id / ".git").is_dir()
    runtime.close()
    assert not root.exists()


def test_template_directories_of_dead_runs_are_removed(tmp_path: Path) -> None:
    from envs.swe.runtime import remove_stale_templates

    stale = tmp_path / "conductor-swe-templates-999999999-abc"
    mine = tmp_path / f"conductor-swe-templates-{os.getpid()}-def"
    other = tmp_path / "conductor-swe-templates-xyz"  # an old name without a pid: left alone
    for path in (stale, mine, other):
        path.mkdir()
    assert remove_stale_templates(tmp_path) == 1
    assert not stale.exists() and mine.exists() and other.exists()


def test_a_numeric_container_user_names_the_uid_the_workdir_is_handed_to() -> None:
    assert numeric_uid("1000:1000") == 1000 and numeric_uid("1001") == 1001
    assert numeric_uid(None) is None and numeric_uid("0:0") is None and numeric_uid("agent") is None
    dockerfile = resolver(agent_uid=1000).dockerfile(TASK)
    assert "RUN chown -R 1000:1000 /testbed\n" in dockerfile
    assert dockerfile.endswith('LABEL aio-conductor.agent-user="1000:1000"\n')
