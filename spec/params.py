"""Parameter schemas: the one place where a block declares its parameters.

A block lists its parameters once, as :class:`Param` objects in a
:class:`ParamSchema`. The component validates its constructor arguments with
that schema; the golden model, the testbench, ``trainforge verilog``,
``trainforge list`` and the reports read defaults, ranges and meanings from it.
"""
from dataclasses import dataclass, field

from ..errors import ParameterError, ParameterTypeError

__all__ = ["Param", "ParamSchema"]


_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True,
               "0": False, "false": False, "no": False, "off": False}


@dataclass(frozen=True)
class Param:
    """One parameter of a block.

    Parameters
    ----------
    name : str
        Python identifier of the parameter, as the component's constructor spells it.
    kind : type
        ``int`` or ``bool`` (or ``str`` with ``choices``).
    default : object
        Value used when the parameter is not given.
    doc : str
        One-line meaning, shown by ``trainforge list``.
    minimum, maximum : int, optional
        Inclusive range of an ``int`` parameter.
    choices : tuple, optional
        Allowed values of a ``str`` parameter, or of an ``int`` one (then also within its range).
    power_of_two : bool
        An ``int`` parameter must also be a power of two (buffer and memory depths).
    """
    name: str
    kind: type
    default: object
    doc: str
    minimum: int = None
    maximum: int = None
    choices: tuple = None
    power_of_two: bool = False

    def __post_init__(self):
        self.check(self.default)

    @property
    def allowed(self):
        """Human-readable description of the allowed values."""
        if self.kind is bool:
            return "true or false"
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind is str:
            return "a string"
        low = "-inf" if self.minimum is None else self.minimum
        high = "inf" if self.maximum is None else self.maximum
        return f"{'a power of two' if self.power_of_two else 'an integer'} in {low}..{high}"

    def error(self, value, reason=None, kind=ParameterError):
        """The error for ``value``: a :class:`ParameterError` (or ``kind``) naming the parameter, the value and what is allowed."""
        reason = f" ({reason})" if reason else ""
        return kind(f"parameter '{self.name}' = {value!r} is invalid{reason}; allowed: {self.allowed}")

    def check(self, value):
        """Return ``value`` if it is valid, else raise :class:`ParameterError`."""
        if self.kind is bool:
            if not isinstance(value, bool):
                raise self.error(value, "not a boolean", ParameterTypeError)
            return value
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(value, "not an integer", ParameterTypeError)
            if (self.minimum is not None and value < self.minimum) or \
                    (self.maximum is not None and value > self.maximum):
                raise self.error(value, "out of range")
            if self.power_of_two and (value < 1 or value & (value - 1)):
                raise self.error(value, "not a power of two")
            if self.choices is not None and value not in self.choices:
                raise self.error(value)
            return value
        if self.choices is not None and value not in self.choices:
            raise self.error(value)
        if not isinstance(value, self.kind):
            raise self.error(value, f"not a {self.kind.__name__}", ParameterTypeError)
        return value

    def parse(self, text):
        """Convert a command-line string to a checked value."""
        if self.kind is bool:
            word = text.strip().lower()
            if word not in _BOOL_WORDS:
                raise self.error(text, "not a boolean")
            return _BOOL_WORDS[word]
        if self.kind is int:
            # Decimal only: '08' is eight and '0x8' is not an integer (one syntax, no surprise).
            word = text.strip()
            if not word.lstrip("+-").isdigit() or not word.isascii():
                raise self.error(text, "not an integer")
            return self.check(int(word, 10))
        return self.check(self.kind(text))


@dataclass(frozen=True)
class ParamSchema:
    """The ordered parameters of one block.

    Parameters
    ----------
    params : tuple of Param
        The parameters, in the order the constructor takes them.
    constraints : tuple of callable
        Checks across parameters. Each takes the resolved parameter dict and
        returns ``None`` or raises :class:`ParameterError` itself.

    Attributes
    ----------
    defaults : dict
        Name to default value.
    """
    params: tuple
    constraints: tuple = field(default=())

    def __iter__(self):
        return iter(self.params)

    def __getitem__(self, name):
        for param in self.params:
            if param.name == name:
                return param
        raise ParameterError(f"unknown parameter '{name}'; known: {', '.join(self.names)}")

    @property
    def names(self):
        return tuple(param.name for param in self.params)

    @property
    def defaults(self):
        return {param.name: param.default for param in self.params}

    def resolve(self, **overrides):
        """Defaults updated by ``overrides``, every value checked. Returns a new dict."""
        values = self.defaults
        for name, value in overrides.items():
            values[name] = self[name].check(value)
        for constraint in self.constraints:
            constraint(values)
        return values

    def apply(self, target, **overrides):
        """Resolve ``overrides`` and give ``target`` the result: ``target.params`` and one attribute per parameter.

        A component's constructor is ``self.PARAMS.apply(self, **params)``: its defaults are the
        schema's, its validation the schema's, and ``self.lanes`` (say) is set once, here.
        Returns the resolved dict.
        """
        values = self.resolve(**overrides)
        target.params = values
        for name, value in values.items():
            setattr(target, name, value)
        return values

    def parse(self, assignments):
        """Resolve ``["name=value", ...]`` strings from the command line."""
        overrides = {}
        for assignment in assignments:
            name, sep, text = assignment.partition("=")
            if not sep:
                raise ParameterError(f"parameter assignment {assignment!r} is not of the form name=value")
            if name.strip() in overrides:
                raise ParameterError(f"parameter '{name.strip()}' is given twice; give each parameter once")
            overrides[name.strip()] = self[name.strip()].parse(text)
        return self.resolve(**overrides)
