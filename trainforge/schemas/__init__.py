"""JSON Schemas of the JSON reports that trainforge writes, one per report kind.

Each ``<kind>.json`` in this package is a JSON Schema (draft 2020-12) that
states a report's fields, their types and their meaning (``description``);
``provenance.json`` is the block that every report written by a command
carries (:mod:`trainforge.provenance`), and every report schema requires it.
Fields not named in a schema are allowed (a report may grow), but a named
field that is missing or of the wrong type fails validation.

A report is matched to its kind by its path (:data:`KINDS`, the file names
the commands write). :func:`validate` needs the ``jsonschema`` package, which
the ``test`` extra installs: the commands do not validate what they write
(the test suite does, on every report kind it can make), so a user of the
command line does not need it.
"""
import fnmatch
import functools
import json
import pathlib
from importlib import resources

__all__ = ["KINDS", "kinds", "load", "kind_of", "validate", "errors"]

#: Report kind (the schema file's stem) of each report path, matched against the path's tail,
#: in order: the first pattern that matches names the kind.
KINDS = (
    ("synth.json", "synth"),
    ("qor.json", "fpga"),
    ("bench.json", "bench"),
    ("manifest.json", "verilog_manifest"),
    ("mutation.json", "mutation"),
    ("coverage/summary.json", "coverage"),
    ("tensordash/speedup.json", "tensordash_speedup"),
    ("tensordash/training.json", "tensordash_training"),
    ("tensordash/rtl_check_*.json", "tensordash_rtl_check"),
    ("tensordash/area_*.json", "tensordash_area"),
    ("tensordash/patterns.json", "tensordash_patterns"),
    ("neurotrainer/lut_error.json", "neurotrainer_lut_error"),
    ("neurotrainer/area_*.json", "neurotrainer_area"),
    ("neurotrainer/alexnet.json", "neurotrainer_alexnet"),
    ("neurotrainer/scaling_*.json", "neurotrainer_scaling"),
    ("neurotrainer/training.json", "neurotrainer_training"),
    ("caterpillar/table2.json", "caterpillar_table2"),
    ("caterpillar/gemv_utilization.json", "caterpillar_utilization"),
    ("caterpillar/rates.json", "caterpillar_rates"),
    ("caterpillar/*.json", "caterpillar_study"),  # `caterpillar study --name NAME` picks the name
    ("hypar/fig5.json", "hypar_fig5"),
    ("hypar/fig6_7.json", "hypar_fig6_7"),
    ("hypar/fig8.json", "hypar_fig8"),
    ("hypar/fig9.json", "hypar_fig9"),
    ("hypar/fig10.json", "hypar_fig10"),
    ("hypar/fig11.json", "hypar_fig11"),
    ("hypar/fig12.json", "hypar_fig12"),
    ("hypar/fig13.json", "hypar_fig13"),
    ("hypar/nodes.json", "hypar_nodes"),
    ("hypar/third_type.json", "hypar_third_type"),
    ("dsm/*.json", "dsm_sweep"),
)

_BASE = "urn:trainforge:schema:"


def kinds():
    """Every report kind that has a schema (the stems of the schema files, ``provenance`` excluded)."""
    return sorted(path.name[:-5] for path in resources.files(__name__).iterdir()
                  if path.name.endswith(".json") and path.name != "provenance.json")


@functools.lru_cache(maxsize=None)
def load(kind):
    """The schema of report ``kind`` (a dict), read from this package."""
    return json.loads(resources.files(__name__).joinpath(f"{kind}.json").read_text())


def kind_of(path):
    """The report kind of the JSON report at ``path``, or ``None`` when no pattern of :data:`KINDS` matches."""
    tail = "/".join(pathlib.PurePath(path).parts[-2:])
    for pattern, kind in KINDS:
        if fnmatch.fnmatchcase(tail, pattern if "/" in pattern else f"*/{pattern}") \
                or fnmatch.fnmatchcase(pathlib.PurePath(path).name, pattern):
            return kind
    return None


@functools.lru_cache(maxsize=None)
def _validator(kind):
    import jsonschema
    from referencing import Registry, Resource

    registry = Registry().with_resource(_BASE + "provenance", Resource.from_contents(load("provenance")))
    schema = load(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def errors(report, kind):
    """The validation errors of ``report`` (a parsed JSON value) against the schema of ``kind``, as lines."""
    found = sorted(_validator(kind).iter_errors(report), key=lambda error: list(error.absolute_path))
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in found]


def validate(path, kind=None):
    """Validate the JSON report at ``path`` against its schema; returns the errors (empty: valid).

    Parameters
    ----------
    path : str or pathlib.Path
        The report.
    kind : str, optional
        The report kind; by default from the path (:func:`kind_of`).

    Raises
    ------
    LookupError
        No kind is given and none matches the path.
    """
    kind = kind or kind_of(path)
    if kind is None:
        raise LookupError(f"{path}: no report kind matches this path")
    return errors(json.loads(pathlib.Path(path).read_text()), kind)
