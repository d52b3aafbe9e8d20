"""The one network format every model reads: declared as a JSON Schema, read and written here.

A network file (JSON or YAML, the same keys) names the network and lists its
weighted layers in forward order::

    name: lenet
    layers:
      - {name: conv1, kind: conv, in_channels: 1, out_channels: 20, kernel: 5,
         in_height: 28, in_width: 28, pool: max, pool_kernel: 2}
      - {name: fc1, kind: fc, in_channels: 2880, out_channels: 10}

The schema, ``network.schema.json`` in this package (:func:`schema`), gives
every field, its type and its default. Unweighted layers are folded into the
weighted layer before them: pooling as ``pool``/``pool_kernel``/
``pool_stride``/``pool_padding``, element-wise operations as ``aux``. The
checks the schema cannot state are made here too (a convolution's output size
follows from its input, kernel, stride and padding; names are unique;
``input_from``, ``residual_from`` and ``concat_from`` name earlier layers). Every error is a
:class:`~trainforge.errors.ConfigError` of one line naming the file, the field
(``layers[2].kernel``) and what was expected.

A layer whose input is the channel concatenation of several earlier layers'
(pooled) outputs lists them, in channel order, as ``concat_from`` (instead of
``input_from``); its ``in_channels`` is then their channels summed (their
neurons for an ``fc`` layer). Files without it read as before.

Shape links between consecutive layers are not checked here: a model that
chains its layers checks them when it converts a :class:`Network` to its own
form (each model's converter also says which layer kinds it takes).
"""
import json
import pathlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from trainforge.errors import ConfigError

__all__ = ["LAYER_KINDS", "FORMATS", "LINK_FIELDS", "Layer", "Network", "schema", "from_dict", "load", "loads",
           "dumps", "field_path", "require_chain_layer"]

#: Layer kinds of the format.
LAYER_KINDS = ("conv", "fc", "lstm")

#: File formats :func:`dumps` writes and :func:`load` reads.
FORMATS = ("yaml", "json")

#: Keys only a convolution takes.
_CONV_KEYS = ("kernel", "in_height", "in_width", "out_height", "out_width", "stride", "padding", "groups",
              "pool", "pool_kernel", "pool_stride", "pool_padding")


@lru_cache(maxsize=1)
def schema():
    """The JSON Schema of a network file (a dict, parsed from ``network.schema.json``)."""
    text = resources.files(__package__).joinpath("network.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def field_path(parts):
    """``("layers", 2, "kernel")`` -> ``"layers[2].kernel"``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _fail(source, parts, message):
    where = field_path(parts)
    raise ConfigError(f"{source}: {where}: {message}" if where else f"{source}: {message}")


@dataclass(frozen=True)
class Layer:
    """One weighted layer with every default filled in.

    Parameters
    ----------
    name : str
        Unique layer name.
    kind : str
        ``"conv"``, ``"fc"`` or ``"lstm"``.
    in_channels, out_channels : int
        Channels (conv), neurons (fc), input features and units (lstm).
    kernel, in_height, in_width, out_height, out_width, stride, padding, groups : int
        The convolution's geometry (1, 0 for padding, for fc and lstm).
    pool : str or None
        ``"max"`` or ``"avg"`` pooling after the convolution, ``None`` for none.
    pool_kernel, pool_stride, pool_padding : int
        The pooling window (0 without pooling).
    timesteps : int
        Timesteps of an fc or lstm layer.
    bidirectional : bool
        Two-direction lstm.
    aux : tuple of str
        Element-wise operations on the output, in order.
    input_from, residual_from : str or None
        Earlier layers read as input (``None``: the previous layer) and added by ``residual``.
    concat_from : tuple of str or None
        Earlier layers whose outputs, concatenated along the channels in this
        order, are the layer's input (``None``: a single input, see ``input_from``).
    """

    name: str
    kind: str
    in_channels: int
    out_channels: int
    kernel: int = 1
    in_height: int = 1
    in_width: int = 1
    out_height: int = 1
    out_width: int = 1
    stride: int = 1
    padding: int = 0
    groups: int = 1
    pool: str = None
    pool_kernel: int = 0
    pool_stride: int = 0
    pool_padding: int = 0
    timesteps: int = 1
    bidirectional: bool = False
    aux: tuple = ()
    input_from: str = None
    residual_from: str = None
    concat_from: tuple = None

    @property
    def pooled_height(self):
        """Output height after pooling."""
        return _pooled(self.out_height, self)

    @property
    def pooled_width(self):
        """Output width after pooling."""
        return _pooled(self.out_width, self)

    @property
    def outputs(self):
        """Values one sample's output holds after pooling (units for an lstm, per timestep)."""
        return self.out_channels * self.pooled_height * self.pooled_width

    def to_dict(self):
        """The file form: defaults left out, a convolution's output size written out."""
        record = {"name": self.name, "kind": self.kind, "in_channels": self.in_channels,
                  "out_channels": self.out_channels}
        if self.kind == "conv":
            record.update(kernel=self.kernel, in_height=self.in_height, in_width=self.in_width,
                          out_height=self.out_height, out_width=self.out_width)
            for key, default in (("stride", 1), ("padding", 0), ("groups", 1)):
                if getattr(self, key) != default:
                    record[key] = getattr(self, key)
            if self.pool_kernel:
                record.update(pool=self.pool, pool_kernel=self.pool_kernel, pool_stride=self.pool_stride)
                if self.pool_padding:
                    record["pool_padding"] = self.pool_padding
        if self.timesteps != 1:
            record["timesteps"] = self.timesteps
        if self.bidirectional:
            record["bidirectional"] = True
        if self.aux:
            record["aux"] = list(self.aux)
        for key in ("input_from", "residual_from"):
            if getattr(self, key) is not None:
                record[key] = getattr(self, key)
        if self.concat_from is not None:
            record["concat_from"] = list(self.concat_from)
        return record


#: The fields by which a layer reads other layers than the one before it (a network that is not a chain).
LINK_FIELDS = ("input_from", "residual_from", "concat_from")


def require_chain_layer(layer, where, model):
    """Refuse ``layer`` when it reads anything but the previous layer (a model that takes chains only).

    Parameters
    ----------
    layer : Layer
    where : str
        The layer's place in the file, e.g. ``"net.yaml: layers[3]"``; the error names ``where.<field>``.
    model : str
        The model refusing it, as the sentence's subject (e.g. ``"NeuroTrainer"``).

    Raises
    ------
    trainforge.errors.ConfigError
    """
    for key in LINK_FIELDS:
        value = getattr(layer, key)
        if value is not None:
            value = list(value) if isinstance(value, tuple) else value
            raise ConfigError(f"{where}.{key}: {model} takes chains of layers, each reading the previous one, "
                              f"got {value!r} (layer {layer.name!r})")


def _pooled(size, layer):
    if not layer.pool_kernel:
        return size
    return (size + 2 * layer.pool_padding - layer.pool_kernel) // layer.pool_stride + 1


@dataclass(frozen=True)
class Network:
    """A checked network description.

    Parameters
    ----------
    name : str
        Network name.
    layers : tuple of Layer
        Weighted layers in forward order.
    minibatch : int or None
        Minibatch size, if the file gives one.
    description : str or None
        Free text.
    """

    name: str
    layers: tuple
    minibatch: int = None
    description: str = None

    @property
    def kinds(self):
        """Layer kinds present, in :data:`LAYER_KINDS` order."""
        present = {layer.kind for layer in self.layers}
        return tuple(kind for kind in LAYER_KINDS if kind in present)

    def producer(self, index):
        """The layer whose output layer ``index`` reads (``None`` for the network input).

        Raises
        ------
        trainforge.errors.ConfigError
            For a layer reading a concatenation (``concat_from``; see :meth:`sources`).
        """
        layer = self.layers[index]
        if layer.concat_from is not None:
            raise ConfigError(f"network {self.name!r}: layer {layer.name!r} reads the concatenation of "
                              f"{', '.join(layer.concat_from)}, not one layer")
        if layer.input_from is None:
            return self.layers[index - 1] if index else None
        return next(other for other in self.layers if other.name == layer.input_from)

    def sources(self, index):
        """Every layer whose output layer ``index`` reads: the concatenated ones, or the one producer.

        Returns
        -------
        list of Layer
            Empty for a layer reading the network input.
        """
        layer = self.layers[index]
        if layer.concat_from is not None:
            by_name = {other.name: other for other in self.layers}
            return [by_name[name] for name in layer.concat_from]
        producer = self.producer(index)
        return [] if producer is None else [producer]

    def to_dict(self):
        """The file form (what :func:`from_dict` reads back to an equal network)."""
        record = {"name": self.name}
        if self.description is not None:
            record["description"] = self.description
        if self.minibatch is not None:
            record["minibatch"] = self.minibatch
        record["layers"] = [layer.to_dict() for layer in self.layers]
        return record


def _describe(value):
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return repr(value)


_TYPE_NAMES = {"integer": "an integer", "string": "a string", "boolean": "true or false", "object": "a mapping",
               "array": "a list", "number": "a number"}


def _schema_message(error):
    """(path parts, message) for one jsonschema validation error."""
    parts = list(error.absolute_path)
    kind, rule, value = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = [key for key in rule if key not in value]
        return parts + [missing[0]], "required field is missing"
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(key for key in value if key not in allowed)
        return parts + [unknown[0]], f"unknown field; expected one of {', '.join(allowed)}"
    if kind == "type":
        return parts, f"expected {_TYPE_NAMES.get(rule, rule)}, got {_describe(value)}"
    if kind == "minimum":
        return parts, f"expected an integer >= {rule}, got {_describe(value)}"
    if kind == "enum":
        return parts, f"expected one of {', '.join(map(str, rule))}, got {_describe(value)}"
    if kind == "minItems":
        return parts, f"expected at least {rule} item(s), got {len(value) or 'none'}"
    if kind == "minLength":
        return parts, "expected a non-empty string"
    return parts, error.message


def _validate_schema(record, source):
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    if not isinstance(record, dict):
        _fail(source, [], f"expected a mapping with 'name' and 'layers', got {_describe(record)}")
    errors = sorted(validator.iter_errors(record), key=lambda error: (
        [str(part) if isinstance(part, str) else f"{part:09d}" for part in error.absolute_path],
        error.validator != "required"))
    if errors:
        parts, message = _schema_message(errors[0])
        _fail(source, parts, message)


def _check_conv(entry, where, source):
    for key in ("kernel", "in_height", "in_width"):
        if key not in entry:
            _fail(source, where + [key], "required field is missing (a conv layer needs kernel, in_height, in_width)")
    kernel, stride, padding = entry["kernel"], entry.get("stride", 1), entry.get("padding", 0)
    if padding > kernel - 1:
        _fail(source, where + ["padding"], f"expected 0..{kernel - 1} (kernel - 1), got {padding}")
    out = {}
    for axis in ("height", "width"):
        size = entry[f"in_{axis}"]
        if size + 2 * padding < kernel:
            _fail(source, where + ["kernel"],
                  f"expected at most the padded in_{axis} {size + 2 * padding}, got {kernel}")
        expected = (size + 2 * padding - kernel) // stride + 1
        given = entry.get(f"out_{axis}", expected)
        if given != expected:
            _fail(source, where + [f"out_{axis}"],
                  f"expected {expected} (from in_{axis}={size}, kernel={kernel}, stride={stride}, "
                  f"padding={padding}), got {given}")
        out[axis] = expected
    groups = entry.get("groups", 1)
    for key in ("in_channels", "out_channels"):
        if entry[key] % groups:
            _fail(source, where + [key], f"expected a multiple of groups={groups}, got {entry[key]}")
    pool_kernel = entry.get("pool_kernel", 0)
    if not pool_kernel:
        for key in ("pool", "pool_stride", "pool_padding"):
            if entry.get(key):
                _fail(source, where + [key], "expected no pooling field without pool_kernel")
        return dict(out_height=out["height"], out_width=out["width"])
    pool_stride, pool_padding = entry.get("pool_stride") or pool_kernel, entry.get("pool_padding", 0)
    if pool_padding > pool_kernel - 1:
        _fail(source, where + ["pool_padding"], f"expected 0..{pool_kernel - 1} (pool_kernel - 1), got {pool_padding}")
    smallest = min(out.values()) + 2 * pool_padding
    if pool_kernel > smallest:
        _fail(source, where + ["pool_kernel"], f"expected at most the padded output map {smallest}, got {pool_kernel}")
    return dict(out_height=out["height"], out_width=out["width"], pool=entry.get("pool", "max"),
                pool_kernel=pool_kernel, pool_stride=pool_stride, pool_padding=pool_padding)


def from_dict(record, source="network"):
    """Check a parsed network document and build the :class:`Network`.

    Parameters
    ----------
    record : object
        What the JSON or YAML parser returned.
    source : str
        Where it came from (the file name), the start of every error message.

    Raises
    ------
    trainforge.errors.ConfigError
        One line: ``SOURCE: FIELD: expected ..., got ...``.
    """
    _validate_schema(record, source)
    layers, seen = [], set()
    for index, entry in enumerate(record["layers"]):
        where = ["layers", index]
        kind = entry["kind"]
        if entry["name"] in seen:
            _fail(source, where + ["name"], f"expected a unique name, got {entry['name']!r} a second time")
        if kind == "conv":
            derived = _check_conv(entry, where, source)
        else:
            derived = {}
            for key in _CONV_KEYS:
                if key in entry:
                    _fail(source, where + [key], f"expected no {key} in a {kind} layer (only conv takes it)")
        if kind == "conv" and "timesteps" in entry:
            _fail(source, where + ["timesteps"], "expected no timesteps in a conv layer (only fc and lstm take it)")
        if entry.get("bidirectional") and kind != "lstm":
            _fail(source, where + ["bidirectional"], f"expected false for a {kind} layer (only lstm is bidirectional)")
        for key in ("input_from", "residual_from"):
            if key in entry and entry[key] not in seen:
                _fail(source, where + [key], f"expected the name of an earlier layer, got {entry[key]!r}")
        concat = entry.get("concat_from")
        if concat is not None:
            if "input_from" in entry:
                _fail(source, where + ["concat_from"], "expected either input_from or concat_from, got both")
            for position, name in enumerate(concat):
                if name not in seen:
                    _fail(source, where + ["concat_from", position],
                          f"expected the name of an earlier layer, got {name!r}")
                if name in concat[:position]:
                    _fail(source, where + ["concat_from", position], f"expected each layer once, got {name!r} again")
            entry = {**entry, "concat_from": tuple(concat)}
        aux = tuple(entry.get("aux", ()))
        if ("residual" in aux) != ("residual_from" in entry):
            _fail(source, where + ["residual_from" if "residual" in aux else "aux"],
                  "expected aux 'residual' and residual_from together")
        layers.append(Layer(**{**entry, **derived, "aux": aux}))
        seen.add(entry["name"])
    return Network(name=record["name"], layers=tuple(layers), minibatch=record.get("minibatch"),
                   description=record.get("description"))


def loads(text, source="network", file_format="yaml"):
    """Parse ``text`` (``file_format`` ``"json"`` or ``"yaml"``; YAML also reads JSON) and check it."""
    if file_format == "json":
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source}: invalid JSON at line {error.lineno} column {error.colno} "
                              f"({error.msg})") from None
    else:
        import yaml

        try:
            record = yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(error, "problem", None) or type(error).__name__
            raise ConfigError(f"{source}: invalid YAML{where} ({problem})") from None
    return from_dict(record, source)


def load(path):
    """Read a network file: ``.json`` as JSON, anything else (``.yaml``, ``.yml``) as YAML.

    Raises
    ------
    trainforge.errors.ConfigError
        For an unreadable file, a syntax error or a bad field (one line naming the file).
    """
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the network file ({error.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: expected a UTF-8 text file") from None
    return loads(text, str(path), "json" if path.suffix.lower() == ".json" else "yaml")


def dumps(network, file_format="yaml"):
    """The text of ``network`` as a file :func:`load` reads back to an equal network."""
    record = network.to_dict()
    if file_format == "json":
        return json.dumps(record, indent=2) + "\n"
    if file_format != "yaml":
        raise ConfigError(f"network format {file_format!r}: expected one of {', '.join(FORMATS)}")
    import yaml

    def flow(value):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 20).strip()

    layers = record.pop("layers")
    header = yaml.safe_dump(record, sort_keys=False, width=1 << 20)
    return header + "layers:\n" + "".join(f"  - {flow(layer)}\n" for layer in layers)
