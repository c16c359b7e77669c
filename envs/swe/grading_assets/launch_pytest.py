"""Run the task's pytest for the grader, so that files of the patch cannot replace the runner.

Usage (from the repository root, as the grader runs it)::

    python -I launch_pytest.py REPORT_JSON CANARY_FILE -- PYTEST_ARGS...

`-I` keeps the repository off `sys.path` while this file imports the image's pytest (and every
default plugin of it), so a `pytest.py`, a `pytest/` package or a shadowed stdlib module in the
patch is never what runs. Only then is the repository put first on `sys.path`, as
`python -m pytest` would put it. Plugins that installed distributions register are loaded only
when the distribution's metadata lives outside the repository (an `*.egg-info` the patch adds
cannot load code). `PYTEST_ADDOPTS` / `PYTEST_PLUGINS` are dropped.

The run writes REPORT_JSON itself (every test's outcome by node id, pytest's exit status and the
file pytest was imported from) and appends the canary tests of CANARY_FILE after collection and
selection, so `-k`/`-m` in the test command cannot drop them.
"""

import contextlib
import importlib
import json
import os
import sys

import pytest  # the image's pytest: under `-I` the repository is not on sys.path yet

_PLUGIN_GROUP = "pytest11"
_FAILING = ("FAILED", "ERROR")


def main(argv):
    if len(argv) < 4 or argv[3] != "--":
        sys.stderr.write("usage: launch_pytest.py REPORT_JSON CANARY_FILE -- PYTEST_ARGS...\n")
        return 4
    report_path, canary_path, args = argv[1], argv[2], list(argv[4:])
    repo = os.path.realpath(os.getcwd())
    import _pytest.config

    for name in _pytest.config.default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module("_pytest." + name)
    runner_file = os.path.realpath(pytest.__file__)
    for variable in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(variable, None)
    sys.path[0:0] = [repo, *_pythonpath(repo)]
    plugin_args = _allowed_plugins(repo, args)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    recorder = _Recorder(report_path, canary_path, runner_file, pytest.__version__, repo)
    return int(pytest.main(plugin_args + args, plugins=[recorder]))


def _pythonpath(repo):
    """PYTHONPATH entries (ignored by `-I`), relative ones taken from the repository root."""
    entries = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return [os.path.join(repo, entry) for entry in entries]


def _inside(path, root):
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def _allowed_plugins(repo, args):
    """`-p module` for each entry-point plugin of a distribution installed outside the repo."""
    from importlib import metadata

    disabled = {arg[len("no:") :] for arg in _p_values(args) if arg.startswith("no:")}
    chosen = []
    for dist in metadata.distributions():
        if _inside(str(dist.locate_file("")), repo):
            continue
        for entry in dist.entry_points:
            module = entry.value.split(":")[0].strip()
            if entry.group != _PLUGIN_GROUP or module in chosen:
                continue
            if entry.name in disabled or module in disabled:
                continue
            chosen.append(module)
    return [part for module in chosen for part in ("-p", module)]


def _p_values(args):
    values = []
    for index, arg in enumerate(args):
        if arg == "-p" and index + 1 < len(args):
            values.append(args[index + 1])
        elif arg.startswith("-p") and len(arg) > 2:
            values.append(arg[2:])
    return values


class _Recorder:
    """A pytest plugin object: records outcomes, adds the canaries, writes the report."""

    def __init__(self, report_path, canary_path, runner_file, version, repo):
        self.report_path = report_path
        self.canary_path = canary_path
        self.runner_file = runner_file
        self.version = version
        self.repo = repo
        self.tests = {}

    @pytest.hookimpl(trylast=True)  # after -k / -m selection
    def pytest_collection_modifyitems(self, session, config, items):
        items.extend(_collect_canaries(session, self.canary_path))

    def pytest_collectreport(self, report):
        if report.failed:
            self._set(report.nodeid, "ERROR")

    def pytest_runtest_logreport(self, report):
        status = _status(report)
        if status is not None:
            self._set(report.nodeid, status)

    def pytest_sessionfinish(self, session, exitstatus):
        record = {
            "runner_file": self.runner_file,
            "repo_root": self.repo,
            "pytest_version": self.version,
            "exitstatus": int(exitstatus),
            "tests": self.tests,
        }
        partial = self.report_path + ".partial"
        with open(partial, "w") as out:
            json.dump(record, out)
        os.replace(partial, self.report_path)

    def _set(self, node_id, status):
        if self.tests.get(node_id) not in _FAILING:
            self.tests[node_id] = status


def _status(report):
    """The short-summary word pytest would print for this phase, or None for a quiet phase."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "XPASS" if xfail else "PASSED"
        if report.failed:
            return "FAILED"
        return "XFAIL" if xfail else "SKIPPED"
    if report.failed:
        return "ERROR"
    if report.when == "setup" and report.skipped:
        return "XFAIL" if xfail else "SKIPPED"
    return None


def _collect_canaries(session, canary_path):
    from pathlib import Path

    try:
        module = pytest.Module.from_parent(session, path=Path(canary_path))
    except TypeError:  # pytest < 7 knows only py.path
        import py

        module = pytest.Module.from_parent(session, fspath=py.path.local(canary_path))
    return list(module.collect())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
