"""The import layering of the package, checked on the source text.

The layers, as the README states them:

============  ==========================================================
layer         may import (within trainforge)
============  ==========================================================
base          ``trainforge.errors``, ``.checks``, ``.discover``, ``.outputs``, ``.progress``, ``.provenance``
spec          base, spec
hw            base, spec, hw
golden        base, spec, golden
sim           base, spec, hw, golden, sim
tool          anything (the rest of the ``trainforge`` package)
============  ==========================================================

``verif/`` may import anything. Installed code never imports ``verif`` modules
and never edits ``sys.path``. Every import counts, also one inside a function.
There must be no import cycle between modules through top-level imports.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Folder of the source tree -> package it installs as (setup.py's ROOTS).
FOLDERS = {
    "trainforge": "trainforge",
    "spec": "trainforge.spec",
    "hw": "trainforge.hw",
    "golden": "trainforge.golden",
    "sim": "trainforge.sim",
}

BASE_MODULES = ("trainforge.errors", "trainforge.checks", "trainforge.discover", "trainforge.outputs",
                "trainforge.progress", "trainforge.provenance")

#: Layer -> the layers it may import from.
ALLOWED = {
    "base": {"base"},
    "spec": {"base", "spec"},
    "hw": {"base", "spec", "hw"},
    "golden": {"base", "spec", "golden"},
    "sim": {"base", "spec", "hw", "golden", "sim"},
    "tool": {"base", "spec", "hw", "golden", "sim", "tool"},
}

#: Modules of verif/ (testbenches, drivers) that installed code must never import.
VERIF_MODULES = {path.stem for path in (ROOT / "verif").glob("*.py")}


def layer_of(module):
    """The layer of a ``trainforge`` module name, or ``None`` outside the package."""
    if module in BASE_MODULES or any(module.startswith(base + ".") for base in BASE_MODULES):
        return "base"
    for layer in ("spec", "hw", "golden", "sim"):
        prefix = f"trainforge.{layer}"
        if module == prefix or module.startswith(prefix + "."):
            return layer
    if module == "trainforge" or module.startswith("trainforge."):
        return "tool"
    return None


def module_name(path, root=ROOT):
    parts = path.relative_to(root).with_suffix("").parts
    package = FOLDERS[parts[0]]
    rest = [part for part in parts[1:] if part != "__init__"]
    return ".".join([package, *rest])


def imports(path, root=ROOT, known=frozenset()):
    """Yield ``(line, imported module, top_level)`` for every import statement of one source file."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield node.lineno, target, id(node) in top_level
            # "from package import name" imports the module package.name where there is one.
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    yield node.lineno, f"{target}.{alias.name}", id(node) in top_level


def sys_path_uses(path):
    """Lines where the source uses ``sys.path`` (as code: docstrings and comments do not count)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys"]


def source_files(root=ROOT):
    for folder in FOLDERS:
        yield from sorted((root / folder).rglob("*.py"))


def violations(root=ROOT):
    """Every import that breaks the layering, as ``"file:line: message"``."""
    found, known = [], existing_modules(root)
    for path in source_files(root):
        where = path.relative_to(root)
        layer = layer_of(module_name(path, root))
        for line in sys_path_uses(path):
            found.append(f"{where}:{line}: installed code edits or reads sys.path")
        for line, target, _ in imports(path, root, known):
            head = target.split(".")[0]
            if head in VERIF_MODULES or head == "verif":
                found.append(f"{where}:{line}: installed code imports the test module '{target}' of verif/")
                continue
            target_layer = layer_of(target)
            if target_layer is not None and target_layer not in ALLOWED[layer]:
                found.append(f"{where}:{line}: {layer} module imports the {target_layer} module '{target}'")
    return sorted(set(found))


def existing_modules(root=ROOT):
    return {module_name(path, root) for path in source_files(root)}


def import_cycles(root=ROOT):
    """Cycles of top-level imports between modules, each as a list of module names."""
    known = existing_modules(root)
    graph = {}
    for path in source_files(root):
        module = module_name(path, root)
        edges = graph.setdefault(module, set())
        for _, target, top_level in imports(path, root, known):
            if top_level and target in known and target != module:
                edges.add(target)
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for successor in sorted(graph.get(node, ())):
            if state.get(successor) == "open":
                cycles.append(stack[stack.index(successor):] + [successor])
            elif successor not in state:
                visit(successor, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_layering_holds():
    found = violations()
    assert not found, "layering violations:\n" + "\n".join(found)


def test_no_import_cycle():
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def _copy_tree(tmp_path):
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    (tmp_path / "verif").mkdir(exist_ok=True)
    return tmp_path


@pytest.mark.parametrize("victim,statement,expected", [
    ("hw/dense_pe.py", "from ..golden import dense_pe as _golden", "hw module imports the golden module"),
    ("golden/dense_pe.py", "from ..hw.dense_pe import DensePE", "golden module imports the hw module"),
    ("golden/dense_pe.py", "from ..sim import hypar", "golden module imports the sim module"),
    ("spec/dense_pe.py", "from ..hw import registry", "spec module imports the hw module"),
    ("hw/registry.py", "import tbutil", "installed code imports the test module 'tbutil'"),
    ("sim/hypar/comm.py", "import sys\nsys.path.insert(0, 'verif')", "installed code edits or reads sys.path"),
])
def test_injected_violation_is_named(tmp_path, victim, statement, expected):
    """A violation injected into a copy of the tree is reported with its file and line."""
    root = _copy_tree(tmp_path)
    path = root / victim
    lines = path.read_text().splitlines()
    # After the module docstring and imports, at the first blank line past the imports.
    insert_at = next(i for i, text in enumerate(lines) if text.startswith(("import ", "from "))) + 1
    path.write_text("\n".join(lines[:insert_at] + [statement] + lines[insert_at:]) + "\n")
    lines_added = range(insert_at + 1, insert_at + 2 + statement.count("\n"))
    found = [item for item in violations(root) if expected in item
             and any(item.startswith(f"{victim}:{line}:") for line in lines_added)]
    assert found, f"the injected '{statement}' in {victim} was not reported at its line; got {violations(root)}"


def test_injected_cycle_is_found(tmp_path):
    root = _copy_tree(tmp_path)
    errors = root / "trainforge" / "errors.py"
    errors.write_text("from .checks import is_int\n" + errors.read_text())
    checks = root / "trainforge" / "checks.py"
    checks.write_text("from .errors import TrainforgeError\n" + checks.read_text())
    cycles = import_cycles(root)
    assert any({"trainforge.errors", "trainforge.checks"} <= set(cycle) for cycle in cycles), cycles
