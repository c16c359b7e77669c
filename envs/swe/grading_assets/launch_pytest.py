"""Run the task's pytest for the grader, so that nothing of the repository runs before pytest
(and every plugin it will load) has loaded, and pytest reads only configuration the grader chose.

Usage (from the repository root, as the grader runs it)::

    python -I launch_pytest.py SPEC -- PYTEST_ARGS...
    python -I launch_pytest.py --probe OUT_JSON CONFIG_COPY -- PYTEST_ARGS...

`-I` keeps the repository off `sys.path` (isolated mode: no script directory, no current
directory, no `PYTHON*` variables, no user site) while this file imports the image's pytest and
every default plugin of it. Only then is the repository put first on `sys.path`, as
`python -m pytest` would put it, and with it a finder, placed before the path finder, that
serves every protected top-level name only from outside the repository for the rest of the
run: the standard library, what is imported already, pytest's dependencies (imported lazily or
not), the modules of the plugins that installed distributions register (only distributions
whose metadata lives outside the repository; `-p` loads them, autoloading is off) and their
dependencies. The modules the repository itself held at the base commit are exempt. So a
`pytest.py`, a `pdb.py` that pytest's debugging plugin imports while configuring, or a module
named like an installed plugin is never what runs. `PYTEST_ADDOPTS` / `PYTEST_PLUGINS` are
dropped.

`--probe` runs on the pristine tree (before the agent's patch) and asks pytest's own code which
configuration file and root directory the command gets; it copies that file's bytes. The real
run then passes `-c <a copy of those bytes beside the original> --rootdir <that root>`: pytest
reads no configuration file of the patch (a CR-only `setup.cfg`, a symlinked
`pyproject.toml`, a new `tox.ini` closer to the tests).

The run writes a report (every test's outcome by node id, the tests collected, pytest's exit
status and the file pytest was imported from) and makes sure the grader's canary tests run: any
the command's own selection dropped (`-k`, `-m`, node-id arguments) are collected and added,
and `--maxfail=0` goes last, so `-x` cannot stop the run at the fail canary.
With `run_only`, only those tests (and the canaries) run; the report still lists every test
that was collected. Python 3.6-compatible: it runs on the image's interpreter.
"""

import builtins
import contextlib
import importlib
import importlib.machinery
import inspect
import json
import os
import re
import sys

import pytest  # the image's pytest: under `-I` the repository is not on sys.path yet

_PLUGIN_GROUP = "pytest11"
_FAILING = ("FAILED", "ERROR")
_CONFIG_OPTIONS = ("-c", "--config-file", "--rootdir")
_NOT_FOUND = getattr(builtins, "ModuleNotFoundError", ImportError)


def main(argv):
    if len(argv) >= 5 and argv[1] == "--probe" and argv[4] == "--":
        return probe(argv[2], argv[3], list(argv[5:]))
    if len(argv) < 3 or argv[2] != "--":
        sys.stderr.write(
            "usage: launch_pytest.py SPEC -- PYTEST_ARGS...   (SPEC: JSON text or a file)\n"
            "       launch_pytest.py --probe OUT_JSON CONFIG_COPY -- PYTEST_ARGS...\n"
        )
        return 4
    spec = _read_spec(argv[1])
    args = list(argv[3:])
    repo = os.path.realpath(os.getcwd())
    runner_file = os.path.realpath(pytest.__file__)
    for variable in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(variable, None)
    _import_default_plugins()
    plugin_modules, plugin_dists = _installed_plugins(repo, args)
    protected = _protected_names(plugin_dists) | {name.split(".")[0] for name in plugin_modules}
    protected -= set(spec.get("allowed_shadows", ()))
    _install_finder(protected, repo)
    sys.path[0:0] = [repo, *_pythonpath(repo)]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    config_args, config_copy = _config_args(spec.get("config"), args)
    plugin_args = [part for module in plugin_modules for part in ("-p", module)]
    recorder = _Recorder(spec, runner_file, pytest.__version__, repo)
    # The fail canary sits among the task's tests: `-x` / `--maxfail` (in the command or the
    # configuration) would stop the run at it. A run with a failure is unresolved either way.
    run_args = plugin_args + config_args + ["--maxfail=0"]
    try:
        return int(pytest.main(run_args, plugins=[recorder]))
    finally:
        if config_copy is not None:
            with contextlib.suppress(OSError):
                os.unlink(config_copy)


def _read_spec(text):
    """The spec: JSON given inline (it starts with `{`), or the path of a JSON file."""
    if text.lstrip().startswith("{"):
        return json.loads(text)
    with open(text) as handle:
        return json.load(handle)


# -- the probe -----------------------------------------------------------------------------------


def probe(out_path, copy_path, args):
    """Which config file and rootdir pytest picks for `args` here (by pytest's own code)."""
    from _pytest.config import get_config

    repo = os.path.realpath(os.getcwd())
    inifile, rootdir_arg, rest = _split_config_options(args)
    config = get_config(list(rest))
    namespace, unknown = config._parser.parse_known_and_unknown_args(list(rest))
    dirs = list(getattr(namespace, "file_or_dir", []) or []) + list(unknown)
    rootdir, inipath = _determine_setup(inifile, dirs, rootdir_arg, config, namespace)
    record = {"repo": repo, "rootdir": str(rootdir), "inipath": None}  # type: dict
    if inipath is not None:
        record["inipath"] = os.path.abspath(str(inipath))
        with open(str(inipath), "rb") as source, open(copy_path, "wb") as copy:
            copy.write(source.read())
    record["allowed_shadows"] = _base_provided(repo, args)
    with open(out_path, "w") as out:
        json.dump(record, out)
    return 0


def _base_provided(repo, args):
    """The protected names that the repository itself provides on the pristine tree, as the
    run's path (repository first) would find them: those stay the repository's in the run."""
    import importlib.util

    plugin_modules, plugin_dists = _installed_plugins(repo, args)
    protected = _protected_names(plugin_dists) | {name.split(".")[0] for name in plugin_modules}
    sys.path[0:0] = [repo, *_pythonpath(repo)]
    provided = []
    for name in sorted(protected - set(sys.modules)):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
        if any(place and _inside(place, repo) for place in places):
            provided.append(name)
    return provided


def _determine_setup(inifile, dirs, rootdir_arg, config, namespace):
    """`findpaths.determine_setup` across pytest 5 to 9 (its signature changed)."""
    from _pytest.config import findpaths

    parameters = inspect.signature(findpaths.determine_setup).parameters
    kwargs = {"inifile": inifile, "args": dirs, "rootdir_cmd_arg": rootdir_arg}
    if "config" in parameters:
        kwargs["config"] = config
    if "override_ini" in parameters:
        kwargs["override_ini"] = getattr(namespace, "override_ini", None)
    if "invocation_dir" in parameters:
        from pathlib import Path

        kwargs["invocation_dir"] = Path.cwd()
    found = findpaths.determine_setup(**kwargs)
    return found[0], found[1]


def _split_config_options(args):
    """(`-c` value, `--rootdir` value, the other args): the options the launcher replaces."""
    values = {"-c": None, "--rootdir": None}
    rest = []
    index = 0
    while index < len(args):
        arg = args[index]
        name, value = _config_option(arg)
        if name is not None and value is None and index + 1 < len(args):
            index += 1
            value = args[index]
        if name is None:
            rest.append(arg)
        else:
            values[name] = value
        index += 1
    return values["-c"], values["--rootdir"], rest


def _config_option(arg):
    """(`-c` or `--rootdir`, its attached value or None) when `arg` is one of them."""
    for option in _CONFIG_OPTIONS:
        name = "--rootdir" if option == "--rootdir" else "-c"
        if arg == option:
            return name, None
        if arg.startswith(option + "="):
            return name, arg[len(option) + 1 :]
    if arg.startswith("-c") and not arg.startswith("--"):
        return "-c", arg[2:]
    return None, None


def _config_args(config, args):
    """The args with the grader's configuration: `-c FILE --rootdir ROOT`, and the copy made.

    `config` (from the grader) names the pristine file to use as is (`original`), or the bytes
    to copy (`copy_from`; none: an empty file, for a base without configuration) into
    `dir`/`name`, beside where the original lives so that paths in it mean the same.
    """
    if not config:
        return args, None
    _, _, rest = _split_config_options(args)
    copy = None
    chosen = config.get("original")
    if chosen is None:
        copy = os.path.join(config["dir"], config["name"])
        with contextlib.suppress(OSError):
            os.unlink(copy)  # never write through a link someone left there
        data = b""
        if config.get("copy_from") is not None:
            with open(config["copy_from"], "rb") as source:
                data = source.read()
        with open(copy, "xb") as target:
            target.write(data)
        chosen = copy
    return ["-c", chosen, "--rootdir", config["rootdir"], *rest], copy


# -- imports -------------------------------------------------------------------------------------


def _import_default_plugins():
    import _pytest.config

    for name in _pytest.config.default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module("_pytest." + name)


def _pythonpath(repo):
    """PYTHONPATH entries (ignored by `-I`), relative ones taken from the repository root."""
    entries = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return [os.path.join(repo, entry) for entry in entries]


def _inside(path, root):
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def _distributions():
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        try:
            import importlib_metadata as metadata  # type: ignore[no-redef]
        except ImportError:
            return []
    return list(metadata.distributions())


def _installed_plugins(repo, args):
    """(modules of `pytest11` entry points, their distributions): installed outside the repo,
    not disabled with `-p no:NAME`."""
    disabled = {arg[len("no:") :] for arg in _p_values(args) if arg.startswith("no:")}
    modules, dists = [], []
    for dist in _distributions():
        if _inside(str(dist.locate_file("")), repo):
            continue
        for entry in dist.entry_points:
            module = entry.value.split(":")[0].strip()
            if entry.group != _PLUGIN_GROUP or module in modules:
                continue
            if entry.name in disabled or module in disabled:
                continue
            modules.append(module)
            dists.append(dist)
    return modules, dists


def _p_values(args):
    values = []
    for index, arg in enumerate(args):
        if arg == "-p" and index + 1 < len(args):
            values.append(args[index + 1])
        elif arg.startswith("-p") and len(arg) > 2:
            values.append(arg[2:])
    return values


def _protected_names(plugin_dists):
    """Top-level module names the repository may not shadow: the standard library, what is
    imported already, pytest's dependencies (all of them, imported lazily or not) and the
    plugins' distributions."""
    names = set(_stdlib_names()) | {name.split(".")[0] for name in sys.modules}
    names.discard("__main__")
    by_name = {}
    for dist in _distributions():
        by_name[_normal(dist.metadata["Name"] or "")] = dist
    pending = [by_name.get("pytest"), *plugin_dists]
    seen = set()
    while pending:
        dist = pending.pop()
        if dist is None or id(dist) in seen:
            continue
        seen.add(id(dist))
        names |= _top_level_names(dist)
        for requirement in dist.requires or ():
            match = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
            if match and "extra ==" not in requirement:
                pending.append(by_name.get(_normal(match.group(1))))
    return names


def _normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _top_level_names(dist):
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    names = set()
    for path in dist.files or ():
        parts = str(path).replace("\\", "/").split("/")
        first = parts[0]
        if first.endswith((".dist-info", ".egg-info", ".data")) or first.startswith(".."):
            continue
        if len(parts) > 1 or first.endswith(".py"):
            names.add(first[:-3] if first.endswith(".py") else first)
    return names


def _stdlib_names():
    names = set(sys.builtin_module_names)
    listed = getattr(sys, "stdlib_module_names", None)
    if listed:
        return names | set(listed)
    import sysconfig

    paths = sysconfig.get_paths()
    roots = {paths.get("stdlib"), paths.get("platstdlib")}
    roots |= {os.path.join(root, "lib-dynload") for root in list(roots) if root}
    return names | _module_names([root for root in roots if root])


def _module_names(directories):
    """Top-level module and regular package names found directly in `directories`."""
    names = set()
    suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)
    for directory in directories:
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(directory, entry)
            if os.path.isdir(path):
                # A regular package only: a plain directory never beats a module found later
                # on the path (it is at most a namespace portion), so it proves nothing.
                if entry.isidentifier() and os.path.isfile(os.path.join(path, "__init__.py")):
                    names.add(entry)
                continue
            for suffix in suffixes:
                if entry.endswith(suffix):
                    names.add(entry[: -len(suffix)])
                    break
    return names


class _OutsideFinder:
    """Finds protected top-level modules only outside the repository (a meta path finder).

    It asks the finders that stood before the path finder when it was installed (built-in,
    frozen, shims), then the path finder over the `sys.path` entries outside the repository,
    then the finders after it (editable installs) for a module outside the repository. A
    protected name found nowhere else does not exist: the repository's copy is never used.
    """

    def __init__(self, names, repo, before, after):
        self.names = frozenset(names)
        self.repo = repo
        self.before = list(before)
        self.after = list(after)

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in self.names:
            return None
        for finder in self.before:
            spec = _spec_from(finder, name, target)
            if spec is not None:
                return spec
        outside = [entry for entry in sys.path if not _inside(entry or os.getcwd(), self.repo)]
        spec = importlib.machinery.PathFinder.find_spec(name, outside)
        if spec is not None:
            return spec
        for finder in self.after:
            spec = _spec_from(finder, name, target)
            origin = getattr(spec, "origin", None)
            if spec is not None and (origin is None or not _inside(origin, self.repo)):
                return spec
        raise _NOT_FOUND(f"No module named {name!r}", name=name)

    def invalidate_caches(self):
        pass


def _spec_from(finder, name, target):
    find_spec = getattr(finder, "find_spec", None)
    if find_spec is None:
        return None
    try:
        return find_spec(name, None, target)
    except TypeError:  # an old finder without `target`
        return find_spec(name, None)


class _FinderFirst(list):
    """`sys.meta_path` that keeps its first finder first: pytest inserts its assertion
    rewriting hook at index 0, and that hook looks modules up on the whole `sys.path`."""

    def insert(self, index, item):
        if index < 0:
            index = max(0, len(self) + index)
        super().insert(max(index, 1), item)


def _install_finder(names, repo):
    finders = list(sys.meta_path)
    position = len(finders)
    for index, finder in enumerate(finders):
        if finder is importlib.machinery.PathFinder:
            position = index
            break
    finder = _OutsideFinder(names, repo, finders[:position], finders[position + 1 :])
    sys.meta_path = _FinderFirst([finder, *finders])


# -- the run -------------------------------------------------------------------------------------


class _Recorder:
    """A pytest plugin object: records outcomes and the collection, runs the canaries, writes
    the report."""

    def __init__(self, spec, runner_file, version, repo):
        self.report_path = spec["report"]
        self.canary_ids = list(spec.get("canary_ids", ()))
        self.run_only = spec.get("run_only")
        self.runner_file = runner_file
        self.version = version
        self.repo = repo
        self.tests = {}
        self.collected = []
        self.collect_errors = []
        self.deselected = {}

    def pytest_deselected(self, items):
        for item in items:
            self.deselected.setdefault(item.nodeid, item)

    @pytest.hookimpl(trylast=True)  # after -k / -m selection
    def pytest_collection_modifyitems(self, session, config, items):
        present = {item.nodeid for item in items}
        for node_id in self.canary_ids:
            if node_id in present:
                continue
            item = self.deselected.get(node_id) or _collect_one(session, config, node_id)
            if item is not None:
                items.append(item)
                present.add(node_id)
        self.collected = [item.nodeid for item in items]
        if self.run_only is not None:
            keep = set(self.run_only) | set(self.canary_ids)
            dropped = [item for item in items if item.nodeid not in keep]
            items[:] = [item for item in items if item.nodeid in keep]
            if dropped:
                config.hook.pytest_deselected(items=dropped)

    def pytest_collectreport(self, report):
        if report.failed:
            self._set(report.nodeid, "ERROR")
            self.collect_errors.append(report.nodeid)

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
            "collected": list(dict.fromkeys(self.collected + self.collect_errors)),
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


def _collect_one(session, config, node_id):
    """The item `node_id` collected afresh from its file (None when it is not there)."""
    root = str(getattr(config, "rootpath", None) or config.rootdir)
    path = os.path.join(root, node_id.split("::")[0])
    try:
        try:
            from pathlib import Path

            module = pytest.Module.from_parent(session, path=Path(path))
        except TypeError:  # pytest < 7 knows only py.path
            import py

            module = pytest.Module.from_parent(session, fspath=py.path.local(path))
    except Exception:  # a pytest without `from_parent`: the canary is reported missing
        return None
    for item in session.genitems(module):
        if item.nodeid == node_id:
            return item
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
