"""The project's base image, built offline: debootstrap a Debian rootfs, `docker import` it.

No registry can be reached from our machines, so nothing is pulled. The image is tagged with a
hash of its recipe (suite, variant, packages, image changes), so it is rebuilt only when the
recipe changes; `ensure_base_image` is cheap when the image already exists.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors
from pydantic import Field

from foundation.config import FrozenConfig
from harness.errors import SandboxError

__all__ = [
    "BaseImageRecipe",
    "base_image_tag",
    "build_base_image",
    "ensure_base_image",
    "image_exists",
]

Progress = Callable[[str], None]


class BaseImageRecipe(FrozenConfig):
    """What goes into the base image. Changing any field changes the tag and forces a rebuild."""

    repository: str = Field("aio-conductor/base", description="image repository name")
    suite: str = Field("bookworm", description="Debian release to bootstrap")
    variant: str = Field("minbase", description="debootstrap variant")
    packages: tuple[str, ...] = Field(
        ("python3", "python3-pytest", "git", "patch", "ca-certificates"),
        description="extra Debian packages (coreutils' `timeout` and bash come with minbase)",
    )
    workdir: str = Field("/testbed", description="WORKDIR of the image")


def base_image_tag(recipe: BaseImageRecipe) -> str:
    """`repository:<12 hex>` where the hex is a hash of the recipe."""
    digest = hashlib.sha256(json.dumps(recipe.model_dump(), sort_keys=True).encode()).hexdigest()
    return f"{recipe.repository}:{digest[:12]}"


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_base_image(
    client: docker.DockerClient, recipe: BaseImageRecipe | None = None, progress: Progress = print
) -> str:
    """Return the base image tag, building it first if it does not exist."""
    recipe = recipe or BaseImageRecipe()
    tag = base_image_tag(recipe)
    if image_exists(client, tag):
        return tag
    build_base_image(client, recipe, progress)
    return tag


def build_base_image(
    client: docker.DockerClient, recipe: BaseImageRecipe, progress: Progress = print
) -> str:
    """Bootstrap, pack and import the base image (about 40 s on 2 cores); returns its tag."""
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "debootstrap is not installed; on Debian/Ubuntu run `sudo apt-get install debootstrap`"
        )
    tag = base_image_tag(recipe)
    with tempfile.TemporaryDirectory(prefix="conductor-rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        progress(f"debootstrap {recipe.suite} ({recipe.variant}) with {', '.join(recipe.packages)}")
        command = [
            "debootstrap",
            f"--variant={recipe.variant}",
            f"--include={','.join(recipe.packages)}",
            recipe.suite,
            str(rootfs),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SandboxError(
                f"debootstrap failed (exit {result.returncode}); it must run as root with access "
                f"to a Debian mirror. Last output:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
            )
        (rootfs / Path(recipe.workdir).relative_to("/")).mkdir(parents=True, exist_ok=True)
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        tarball = Path(scratch) / "rootfs.tar"
        progress(f"packing the root file system into {tarball.name}")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        progress(f"importing as {tag}")
        repository, version = tag.split(":")
        client.api.import_image_from_file(
            str(tarball),
            repository=repository,
            tag=version,
            changes=[f"WORKDIR {recipe.workdir}", 'CMD ["sleep", "infinity"]', "ENV LANG=C.UTF-8"],
        )
    if not image_exists(client, tag):
        raise SandboxError(f"docker import finished but {tag} is not listed; see the daemon log")
    return tag
