"""Bad arguments, generated from the schemas: every parameter of every registered block.

For each parameter: one below its minimum, one above its maximum, a value of
the wrong type, and (for a choice) a value outside the choices. Each must be
refused by the component's constructor with a :class:`ParameterError` whose
message is exactly the project's one format, which this file states on its
own (it does not ask the schema for the text). The defaults that the
components' constructors and the golden models' entry points spell out must
be the schema's.
"""
import importlib
import inspect
import pkgutil

import pytest

from trainforge import golden
from trainforge.errors import ParameterError
from trainforge.hw.registry import BLOCKS


def _allowed(param):
    if param.kind is bool:
        return "true or false"
    if param.choices is not None:
        return "one of " + ", ".join(map(str, param.choices))
    if param.kind is str:
        return "a string"
    low = "-inf" if param.minimum is None else param.minimum
    high = "inf" if param.maximum is None else param.maximum
    return f"{'a power of two' if param.power_of_two else 'an integer'} in {low}..{high}"


def _bad_values(param):
    """(label, value, reason) of the bad values of one parameter."""
    if param.kind is bool:
        return [("wrong type", 1, "not a boolean"), ("wrong type", "yes", "not a boolean")]
    if param.kind is int:
        cases = [("wrong type", float(param.default), "not an integer"), ("wrong type", str(param.default), "not an integer"),
                 ("wrong type", True, "not an integer")]
        if param.minimum is not None:
            cases.append(("below minimum", param.minimum - 1, "out of range"))
        if param.maximum is not None:
            cases.append(("above maximum", param.maximum + 1, "out of range"))
        if param.power_of_two:
            low = param.minimum if param.minimum is not None else 1
            cases.append(("not a power of two", 3 * low if 3 * low <= (param.maximum or 3 * low) else low + 1,
                          "not a power of two"))
        if param.choices is not None:
            cases.append(("not a choice", next(value for value in range(min(param.choices), max(param.choices) + 2)
                                               if value not in param.choices), None))
        return cases
    if param.choices is not None:
        return [("not a choice", "no-such-choice", None)]
    return [("wrong type", 3, f"not a {param.kind.__name__}")]


CASES = [pytest.param(block.name, param, label, value, reason, id=f"{block.name}-{param.name}-{label}-{value!r}")
         for block in BLOCKS.values() for param in block.schema
         for label, value, reason in _bad_values(param)]


@pytest.mark.parametrize("block_name,param,label,value,reason", CASES)
def test_constructor_refuses_bad_parameter(block_name, param, label, value, reason):
    block = BLOCKS[block_name]
    with pytest.raises(ParameterError) as info:
        block.component(**{param.name: value})
    because = f" ({reason})" if reason else ""
    assert str(info.value) == f"parameter '{param.name}' = {value!r} is invalid{because}; allowed: {_allowed(param)}"
    # Python callers may catch the standard exceptions: a wrong type is a TypeError, a wrong value a ValueError.
    assert isinstance(info.value, TypeError if label == "wrong type" else ValueError)


@pytest.mark.parametrize("block_name", list(BLOCKS))
def test_unknown_parameter_is_named(block_name):
    block = BLOCKS[block_name]
    with pytest.raises(ParameterError, match=r"unknown parameter 'no_such_parameter'; known: "):
        block.schema.parse(["no_such_parameter=1"])


@pytest.mark.parametrize("block_name", list(BLOCKS))
def test_constructor_defaults_are_the_schemas(block_name):
    block = BLOCKS[block_name]
    signature = inspect.signature(block.component.__init__)
    for name, parameter in signature.parameters.items():
        if name in block.schema.names and parameter.default is not inspect.Parameter.empty:
            assert parameter.default == block.schema[name].default, (
                f"{block.component.__name__}({name}={parameter.default!r}) but the schema's default is "
                f"{block.schema[name].default!r}")


def _family(block_name):
    prefixes = {"td": "tensordash", "nt": "neurotrainer", "cp": "caterpillar"}
    return prefixes.get(block_name.split("_")[0], block_name)


def _golden_modules(family):
    """The golden modules of one family (a subpackage of trainforge.golden, or one module for a single block)."""
    name = f"{golden.__name__}.{family}"
    module = importlib.import_module(name)
    if not hasattr(module, "__path__"):
        return [module]
    return [importlib.import_module(f"{name}.{info.name}") for info in pkgutil.iter_modules(module.__path__)]


def _schema_defaults(family):
    defaults = {}
    for block in BLOCKS.values():
        if _family(block.name) == family:
            for param in block.schema:
                defaults.setdefault(param.name, set()).add(param.default)
    return defaults


@pytest.mark.parametrize("family", sorted({_family(name) for name in BLOCKS}))
def test_golden_defaults_are_the_schemas(family):
    """A golden entry point's keyword default named like a parameter of its family equals that schema default."""
    defaults = _schema_defaults(family)
    wrong = []
    for module in _golden_modules(family):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_"):
                continue
            for parameter in inspect.signature(function).parameters.values():
                if parameter.name in defaults and parameter.default is not inspect.Parameter.empty \
                        and parameter.default not in defaults[parameter.name]:
                    wrong.append(f"{module.__name__}.{name}({parameter.name}={parameter.default!r}): "
                                 f"schema default {sorted(defaults[parameter.name], key=repr)}")
    assert not wrong, "golden defaults that differ from the schemas:\n" + "\n".join(wrong)
