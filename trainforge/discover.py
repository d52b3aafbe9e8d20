"""Finding the per-family modules (``blocks``, ``cli``, ``bench``) by convention.

A family of blocks or a system model is a subpackage, such as
``trainforge.hw.tensordash`` or ``trainforge.sim.hypar``. The registry, the
command line and the benchmark runner look in every such subpackage for a
module of an agreed name, so adding a family edits no shared list.
"""
import importlib
import importlib.util
import pkgutil

__all__ = ["family_modules"]


def family_modules(package_name, module_name):
    """Import ``<package_name>.<family>.<module_name>`` for every family that has one, in name order."""
    package = importlib.import_module(package_name)
    modules = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        if not info.ispkg:
            continue
        full_name = f"{package_name}.{info.name}.{module_name}"
        if importlib.util.find_spec(full_name) is not None:
            modules.append(importlib.import_module(full_name))
    return modules
