"""The installed package holds every subpackage of the source tree (an editable install would hide a gap)."""
import pathlib
import runpy

import setuptools

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_subpackage_is_installed(monkeypatch):
    captured = {}
    monkeypatch.setattr(setuptools, "setup", lambda **options: captured.update(options))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"))
    installed = set(captured["packages"])
    expected = set()
    for package, folder in captured["package_dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            expected.add(".".join((package, *init.parent.relative_to(ROOT / folder).parts)))
    assert not expected - installed, f"subpackages left out of the installation: {sorted(expected - installed)}"
    assert {"trainforge.commands.tensordash", "trainforge.schemas", "trainforge.spec.neurotrainer"} <= installed
