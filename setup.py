"""Package discovery for the one ``trainforge`` namespace.

The repository keeps its top-level folders (``hw/``, ``golden/``, ``sim/``) and
maps each of them into the ``trainforge`` namespace, so that nothing is
installed as a bare ``hw`` or ``sim`` package. Every folder below them that has
an ``__init__.py`` becomes a subpackage; adding one needs no edit here.
"""
import pathlib

from setuptools import setup

ROOTS = {
    "trainforge": "trainforge",
    "trainforge.hw": "hw",
    "trainforge.golden": "golden",
    "trainforge.sim": "sim",
    "trainforge.spec": "spec",
}


def discover():
    packages = []
    for package, folder in ROOTS.items():
        for init in sorted(pathlib.Path(folder).rglob("__init__.py")):
            parts = init.parent.relative_to(folder).parts
            packages.append(".".join((package, *parts)))
    return packages


setup(packages=discover(), package_dir=ROOTS)
