"""Canary tests the grader adds to every hardened test run, to detect tampering generically.

One canary must pass and leave a side effect only its real body produces (a digest of the
nonce written next to it); one must fail. A run in which the pass canary did not pass or left no
side effect, or the fail canary did not fail, was tampered with, whatever the trick. The nonce is
fresh per grading run; a patch written for one run cannot know the next one's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Canary"]


@dataclass(frozen=True, slots=True)
class Canary:
    """The canaries of one grading run (`nonce` is hex)."""

    nonce: str

    @property
    def module_name(self) -> str:
        return f"test_conductor_canary_{self.nonce}.py"

    @property
    def pass_name(self) -> str:
        return f"test_canary_passes_{self.nonce}"

    @property
    def fail_name(self) -> str:
        return f"test_canary_fails_{self.nonce}"

    @property
    def output_name(self) -> str:
        """The file the pass canary writes, beside its module."""
        return f"canary-{self.nonce}.out"

    @property
    def expected_output(self) -> str:
        return hashlib.sha256(f"conductor canary {self.nonce}".encode()).hexdigest()

    def source(self) -> str:
        """The canary module (Python 3.7-compatible: it runs on the image's interpreter)."""
        return (
            "import hashlib\nimport os\n\n"
            f"_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "
            f"{self.output_name!r})\n\n\n"
            f"def {self.pass_name}():\n"
            f"    digest = hashlib.sha256({f'conductor canary {self.nonce}'!r}.encode())\n"
            "    with open(_OUT, 'w') as out:\n"
            "        out.write(digest.hexdigest())\n\n\n"
            f"def {self.fail_name}():\n"
            f"    raise AssertionError('conductor canary {self.nonce} must fail')\n"
        )

    def is_canary(self, test_id: str) -> bool:
        return test_id.endswith((f"::{self.pass_name}", f"::{self.fail_name}"))

    def status_of(self, statuses: Mapping[str, str], name: str) -> str | None:
        """The status `statuses` gives the canary called `name` (ids end in `::name`)."""
        for test_id, status in statuses.items():
            if test_id.endswith(f"::{name}"):
                return status
        return None
