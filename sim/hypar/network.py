"""Network descriptions: weighted layers only, with shape checks.

A network is a list of weighted layers in forward (topological) order,
convolution (``"conv"``) or fully connected (``"fc"``). Each layer reads the
output of the layer before it, or of an earlier layer named by
``input_from``, or the channel concatenation of several earlier layers'
outputs named by ``concat_from`` (an Inception module's or a DenseNet
block's join); ``residual_from`` adds an earlier layer's output to the
layer's output (a residual connection: the sum is what the layer's readers
get). Without these fields the network is a chain, the paper's case.
Unweighted layers are folded in: activations are element-wise and cost no
communication; pooling is a property of the convolution it follows
(``pool_kernel``, ``pool_stride``); a residual sum is taken before the
layer's pooling.

Networks come from the Python API (:class:`Layer`, :class:`Network`), from
network files in the one format of :mod:`trainforge.spec.network` (JSON or
YAML; :func:`load_network`, converted by :func:`from_spec`), or from the
built-ins in :mod:`trainforge.sim.hypar.builtins`. HyPar takes ``conv``
and ``fc`` layers: no ``lstm``, no grouped convolution, no pooling padding;
``aux`` operations other than ``residual`` are element-wise and ignored.

:meth:`Network.to_dict` and :meth:`Network.from_dict` are that format's
subset HyPar uses: for ``fc`` layers ``in_channels``/``out_channels`` are the
input and output neuron counts and the spatial keys are omitted.
"""
from dataclasses import asdict, dataclass, field

import numpy as np

from trainforge.checks import check_range
from trainforge.errors import ConfigError
from trainforge.spec import network as network_format

LAYER_KINDS = ("conv", "fc")
_SPATIAL_KEYS = ("kernel", "in_height", "in_width", "out_height", "out_width", "stride", "padding",
                 "pool_kernel", "pool_stride")


@dataclass(frozen=True)
class Layer:
    """One weighted layer.

    Parameters
    ----------
    name : str
        Layer name, used in every error message.
    kind : str
        ``"conv"`` or ``"fc"``.
    in_channels, out_channels : int
        Input and output channels (conv) or neurons (fc), >= 1.
    kernel : int
        Square kernel size K (conv), 1 for fc.
    in_height, in_width, out_height, out_width : int
        Feature-map sizes before and after the convolution (before pooling);
        1 for fc. Checked against ``kernel``, ``stride`` and ``padding``.
    stride, padding : int
        Convolution stride (>= 1) and zero padding (0..kernel-1).
    pool_kernel, pool_stride : int
        Max pooling after the layer; ``pool_kernel=0`` means none.
    input_from : str or None
        The earlier layer whose output this layer reads (``None``: the previous layer).
    residual_from : str or None
        The earlier layer whose (pooled) output is added to this layer's
        output before its pooling (``None``: no residual connection).
    concat_from : tuple of str or None
        Earlier layers whose pooled outputs, concatenated along the channels
        in this order, are this layer's input (instead of ``input_from``):
        convolutions of the same pooled map size, ``in_channels`` their sum;
        for an fc reader, their output values summed.
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
    pool_kernel: int = 0
    pool_stride: int = 0
    input_from: str = None
    residual_from: str = None
    concat_from: tuple = None

    def __post_init__(self):
        where = f"layer {self.name!r}"
        if self.concat_from is not None:
            object.__setattr__(self, "concat_from", tuple(self.concat_from))
            if self.input_from is not None:
                raise ConfigError(f"{where}: input_from and concat_from together; a layer reads one or the other")
            if len(self.concat_from) < 2 or len(set(self.concat_from)) != len(self.concat_from):
                raise ConfigError(f"{where}: concat_from={list(self.concat_from)} must name at least two "
                                  f"different layers")
        if self.kind not in LAYER_KINDS:
            raise ConfigError(f"{where}: kind={self.kind!r} is unknown; allowed: conv, fc")
        for key in ("in_channels", "out_channels", "kernel", "in_height", "in_width", "out_height",
                    "out_width", "stride"):
            check_range(f"{self.name}.{key}", getattr(self, key), 1)
        for key in ("padding", "pool_kernel", "pool_stride"):
            check_range(f"{self.name}.{key}", getattr(self, key), 0)
        if self.kind == "fc":
            spatial = {key: getattr(self, key) for key in _SPATIAL_KEYS}
            if any(spatial[key] != 1 for key in ("kernel", "in_height", "in_width", "out_height",
                                                 "out_width", "stride")) or self.padding or self.pool_kernel:
                raise ConfigError(f"{where}: a fully connected layer takes no spatial keys "
                                  f"(got {spatial})")
            return
        check_range(f"{self.name}.padding", self.padding, 0, self.kernel - 1)
        for axis in ("height", "width"):
            size_in = getattr(self, f"in_{axis}")
            expected = (size_in + 2 * self.padding - self.kernel) // self.stride + 1
            if size_in + 2 * self.padding < self.kernel:
                raise ConfigError(
                    f"{where}: kernel={self.kernel} exceeds padded in_{axis}={size_in + 2 * self.padding}")
            if getattr(self, f"out_{axis}") != expected:
                raise ConfigError(
                    f"{where}: out_{axis}={getattr(self, f'out_{axis}')} but in_{axis}={size_in}, "
                    f"kernel={self.kernel}, stride={self.stride}, padding={self.padding} give {expected}")
        if self.pool_kernel:
            check_range(f"{self.name}.pool_stride", self.pool_stride, 1)  # a pooling layer moves
            if self.pool_kernel > min(self.out_height, self.out_width):
                raise ConfigError(f"{where}: pool_kernel={self.pool_kernel} exceeds the output map "
                                  f"{self.out_height}x{self.out_width}")
        elif self.pool_stride:
            raise ConfigError(f"{where}: pool_stride={self.pool_stride} without pool_kernel")

    @property
    def pooled_height(self):
        """Output height after pooling (what the next layer reads)."""
        if not self.pool_kernel:
            return self.out_height
        return (self.out_height - self.pool_kernel) // self.pool_stride + 1

    @property
    def pooled_width(self):
        """Output width after pooling."""
        if not self.pool_kernel:
            return self.out_width
        return (self.out_width - self.pool_kernel) // self.pool_stride + 1

    @property
    def weights(self):
        """A(W_l): kernel elements (biases are ignored, as in the paper)."""
        return self.in_channels * self.out_channels * self.kernel * self.kernel

    def to_dict(self):
        """The file form: fc layers drop their spatial keys."""
        record = asdict(self)
        if self.kind == "fc":
            for key in _SPATIAL_KEYS:
                record.pop(key)
        for key in ("input_from", "residual_from", "concat_from"):
            if record[key] is None:
                record.pop(key)
        if self.concat_from is not None:
            record["concat_from"] = list(self.concat_from)
        if self.residual_from is not None:
            record["aux"] = ["residual"]
        return record


@dataclass(frozen=True)
class Network:
    """Weighted layers in forward order (a chain or a DAG), checked for consistent shapes.

    Parameters
    ----------
    name : str
        Network name.
    layers : tuple of Layer
        The weighted layers in forward order (at least one).

    Attributes
    ----------
    arrays : LayerArrays
        The per-layer sizes as numpy vectors (built once).
    main_producer : numpy.ndarray of int, shape (L,)
        Index of the one layer each layer reads (-1: the network input, or a
        layer reading a concatenation, whose inputs are ``concat_edges``).
    concat_edges : tuple of (int, int)
        ``(p, k)``: layer p's output is a channel slice of layer k's input
        (p is in k's ``concat_from``), in k's ``concat_from`` order.
    residual_edges : tuple of (int, int)
        ``(r, k)``: layer r's output joins layer k's input through a
        residual sum (r is a ``residual_from`` of a layer that k reads,
        whole or as a slice of a concatenation).
    """

    name: str
    layers: tuple
    arrays: "LayerArrays" = field(init=False, repr=False, compare=False)
    main_producer: np.ndarray = field(init=False, repr=False, compare=False)
    concat_edges: tuple = field(init=False, repr=False, compare=False)
    residual_edges: tuple = field(init=False, repr=False, compare=False)
    _input_edges: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise ConfigError(f"network {self.name!r}: no layers; allowed: at least one weighted layer")
        seen = set()
        duplicate = next((layer.name for layer in self.layers if layer.name in seen or seen.add(layer.name)), None)
        if duplicate is not None:
            raise ConfigError(f"layer {duplicate!r}: the name is used twice")
        index_of = {}
        producers, concat_edges = [], []
        shares = {}  # (source, reader) -> the share of the reader's input the source's output is
        for index, layer in enumerate(self.layers):
            producer = index - 1
            for key in ("input_from", "residual_from"):
                named = getattr(layer, key)
                if named is not None and named not in index_of:
                    raise ConfigError(f"layer {layer.name!r}: {key}={named!r} is not an earlier layer")
            for named in layer.concat_from or ():
                if named not in index_of:
                    raise ConfigError(f"layer {layer.name!r}: concat_from names {named!r}, not an earlier layer")
            if layer.input_from is not None:
                producer = index_of[layer.input_from]
            if layer.concat_from is not None:
                producer = -1
                sources = [index_of[named] for named in layer.concat_from]
                values = _check_concat([self.layers[source] for source in sources], layer)
                for source, count in zip(sources, values):
                    concat_edges.append((source, index))
                    shares[source, index] = count / sum(values)
            elif producer >= 0:
                _check_link(self.layers[producer], layer)
                shares[producer, index] = 1.0
            if layer.residual_from is not None:
                _check_residual(self.layers[index_of[layer.residual_from]], layer)
            producers.append(producer)
            index_of[layer.name] = index
        edges, residual_shares = [], []
        for index, layer in enumerate(self.layers):
            if layer.residual_from is None:
                continue
            readers = sorted(reader for source, reader in shares if source == index)
            if not readers:
                raise ConfigError(f"layer {layer.name!r}: residual_from on a layer no other layer reads "
                                  f"is not supported")
            source = index_of[layer.residual_from]
            for reader in readers:
                edges.append((source, reader))
                # the sum enters the reader wherever the summed layer does: its share of the reader's input
                residual_shares.append(shares[index, reader])
        object.__setattr__(self, "main_producer", np.array(producers, dtype=np.int64))
        object.__setattr__(self, "concat_edges", tuple(concat_edges))
        object.__setattr__(self, "residual_edges", tuple(edges))
        main = [(int(source), reader) for reader, source in enumerate(producers) if source >= 0]
        object.__setattr__(self, "_input_edges", tuple(
            [(source, reader, shares[source, reader]) for source, reader in main + concat_edges]
            + [(source, reader, share) for (source, reader), share in zip(edges, residual_shares)]))
        object.__setattr__(self, "arrays", LayerArrays.of(self.layers))


    @property
    def is_chain(self):
        """True when every layer reads the previous one and there is no residual connection or concatenation."""
        return (not self.residual_edges and not self.concat_edges
                and bool((self.main_producer == np.arange(len(self.layers)) - 1).all()))

    def input_edges(self):
        """Every edge ``(source, reader, share)``: the layer read, the concatenation slices, then the residual edges.

        ``share`` is the fraction of the reader's input map the source's output
        makes up: 1 for the layer read (and for a residual source added to
        it); for a concatenation, the source's channels (fc: values) over the
        reader's ``in_channels``; for a residual source of a concatenated
        layer, that layer's fraction.
        """
        return list(self._input_edges)

    def __len__(self):
        return len(self.layers)

    @property
    def names(self):
        """Layer names in order."""
        return [layer.name for layer in self.layers]

    def to_dict(self):
        """The file form: the common network format (:mod:`trainforge.spec.network`)."""
        return {"name": self.name, "layers": [layer.to_dict() for layer in self.layers]}

    @classmethod
    def from_dict(cls, record, source="network"):
        """Build from the file form (:func:`trainforge.spec.network.from_dict`, then :func:`from_spec`)."""
        return from_spec(network_format.from_dict(record, source), source)


def _check_link(previous, layer):
    where = f"layer {layer.name!r}"
    if previous.kind == "fc" and layer.kind == "conv":
        raise ConfigError(f"{where}: a convolution after the fully connected layer "
                          f"{previous.name!r} is not supported")
    if layer.kind == "conv":
        if layer.in_channels != previous.out_channels:
            raise ConfigError(f"{where}: in_channels={layer.in_channels} but layer "
                              f"{previous.name!r} has out_channels={previous.out_channels}")
        if (layer.in_height, layer.in_width) != (previous.pooled_height, previous.pooled_width):
            raise ConfigError(
                f"{where}: input map {layer.in_height}x{layer.in_width} but layer {previous.name!r} "
                f"produces {previous.pooled_height}x{previous.pooled_width}")
        return
    produced = previous.out_channels * previous.pooled_height * previous.pooled_width
    if layer.in_channels != produced:
        raise ConfigError(f"{where}: in_channels={layer.in_channels} but layer "
                          f"{previous.name!r} produces {produced} values")


def _check_concat(sources, layer):
    """Shape checks of a concatenation read by ``layer``; returns each source's share in values per sample."""
    where = f"layer {layer.name!r}"
    for source in sources:
        if source.kind == "fc" and layer.kind == "conv":
            raise ConfigError(f"{where}: a convolution after the fully connected layer {source.name!r} "
                              f"is not supported")
        if layer.kind == "conv" and (source.pooled_height, source.pooled_width) != (layer.in_height, layer.in_width):
            raise ConfigError(f"{where}: input map {layer.in_height}x{layer.in_width} but concatenated layer "
                              f"{source.name!r} produces {source.pooled_height}x{source.pooled_width}")
    if layer.kind == "conv":
        values = [source.out_channels for source in sources]
    else:
        values = [source.out_channels * source.pooled_height * source.pooled_width for source in sources]
    if sum(values) != layer.in_channels:
        raise ConfigError(f"{where}: in_channels={layer.in_channels} but the concatenation of "
                          f"{', '.join(source.name for source in sources)} gives "
                          f"{' + '.join(map(str, values))} = {sum(values)}")
    return values


def _check_residual(source, layer):
    """The residual sum adds ``source``'s pooled output to ``layer``'s output before pooling."""
    given = (source.out_channels, source.pooled_height, source.pooled_width)
    wanted = (layer.out_channels, layer.out_height, layer.out_width)
    if given != wanted:
        raise ConfigError(f"layer {layer.name!r}: residual_from={source.name!r} gives {given[0]} x {given[1]}x"
                          f"{given[2]}, the layer's output is {wanted[0]} x {wanted[1]}x{wanted[2]}")


@dataclass(frozen=True)
class LayerArrays:
    """Per-layer sizes as float64 vectors of length L (for vectorised counting).

    Attributes
    ----------
    in_channels, out_channels : numpy.ndarray
        C_in and C_out (neurons for fc).
    kernel_area : numpy.ndarray
        K*K (1 for fc).
    in_area, out_area, pooled_area : numpy.ndarray
        Feature-map height*width at the input, at the output before pooling,
        and after pooling (1 for fc).
    is_conv : numpy.ndarray
        Boolean, True for convolutions.
    """

    in_channels: np.ndarray
    out_channels: np.ndarray
    kernel_area: np.ndarray
    in_area: np.ndarray
    out_area: np.ndarray
    pooled_area: np.ndarray
    is_conv: np.ndarray

    @classmethod
    def of(cls, layers):
        """Vectors for a sequence of :class:`Layer`."""
        def vector(values):
            return np.array(values, dtype=np.float64)
        return cls(
            in_channels=vector([layer.in_channels for layer in layers]),
            out_channels=vector([layer.out_channels for layer in layers]),
            kernel_area=vector([layer.kernel ** 2 for layer in layers]),
            in_area=vector([layer.in_height * layer.in_width for layer in layers]),
            out_area=vector([layer.out_height * layer.out_width for layer in layers]),
            pooled_area=vector([layer.pooled_height * layer.pooled_width for layer in layers]),
            is_conv=np.array([layer.kind == "conv" for layer in layers]),
        )


#: Fields of the common format HyPar cannot model: (field, the value it takes, what it takes).
_UNSUPPORTED = (
    ("groups", 1, "ungrouped convolutions"),
    ("pool_padding", 0, "pooling without padding"),
    ("timesteps", 1, "layers applied once (timesteps 1)"),
)


def from_spec(description, source=None):
    """Convert a :class:`trainforge.spec.network.Network` to a HyPar :class:`Network`.

    Parameters
    ----------
    description : trainforge.spec.network.Network
        The network in the common format.
    source : str, optional
        Where it came from (a file name), the start of every error message.

    Raises
    ------
    trainforge.errors.ConfigError
        One line naming the layer HyPar cannot take, or the shape link that does not hold.
    """
    source = source or f"network {description.name!r}"
    layers = []
    for index, layer in enumerate(description.layers):
        where = f"{source}: layers[{index}]"
        if layer.kind not in LAYER_KINDS:
            raise ConfigError(f"{where}.kind: HyPar takes conv and fc layers, got {layer.kind} "
                              f"(layer {layer.name!r})")
        for key, default, takes in _UNSUPPORTED:
            if getattr(layer, key) != default:
                raise ConfigError(f"{where}.{key}: HyPar takes {takes}, got {getattr(layer, key)!r} "
                                  f"(layer {layer.name!r})")
        spatial = {key: getattr(layer, key) for key in _SPATIAL_KEYS} if layer.kind == "conv" else {}
        layers.append(Layer(name=layer.name, kind=layer.kind, in_channels=layer.in_channels,
                            out_channels=layer.out_channels, input_from=layer.input_from,
                            residual_from=layer.residual_from, concat_from=layer.concat_from, **spatial))
    try:
        return Network(name=description.name, layers=tuple(layers))
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def to_spec(network):
    """The HyPar :class:`Network` in the common format (:class:`trainforge.spec.network.Network`)."""
    record = network.to_dict()
    for layer in record["layers"]:
        if not layer.get("pool_kernel"):
            layer.pop("pool_kernel", None)
            layer.pop("pool_stride", None)
    return network_format.from_dict(record, f"network {network.name!r}")


def load_network(path):
    """Read a network file in the common format (:func:`trainforge.spec.network.load`) for HyPar.

    Parameters
    ----------
    path : str or pathlib.Path
        The description file, ``.json``, ``.yaml`` or ``.yml``.

    Raises
    ------
    trainforge.errors.ConfigError
        For an unreadable file, a syntax error, a bad field, a layer HyPar
        cannot take or a shape link that does not hold (one line naming the
        file and the layer).
    """
    return from_spec(network_format.load(path), str(path))
