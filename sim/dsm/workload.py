"""Workload description for DeepSpatialMatrix (paper Section II-A, Fig. 2).

A workload is an ordered list of :class:`Layer` objects (execution order of the
FWD pass) and a minibatch size. Each layer carries the five primary-computation
parameters of Fig. 2 except the minibatch, which is a property of the run and
therefore lives in :class:`Workload`. Built-in networks are VGG16, ResNet50 and
GNMT; any other network is read from a network file in the common format of
:mod:`trainforge.spec.network` (JSON or YAML) and converted by
:func:`workload_from_network`, which takes every layer kind of the format
(``conv``, ``fc``, ``lstm``) but no grouped convolution and no layer reading a
concatenation (``concat_from``); pooling becomes the ``maxpool``/``avgpool``
auxiliary computation (its padding is not modelled).
"""
from dataclasses import dataclass, replace
import json
import math
import pathlib

from trainforge.checks import check_range
from trainforge.errors import ConfigError, ParameterError
from trainforge.spec import network as network_format

#: Kinds of primary computation.
LAYER_KINDS = ("conv", "fc", "lstm")

#: Auxiliary computations (Section II-A) and their SFP cost per output element:
#: (operations, extra full-tensor reads from the scratchpad). Element-wise
#: operations of one layer are fused in the SFP: the output is read once and
#: written once whatever the chain, so only the extra reads are listed.
AUX_COSTS = {
    "bias": (1, 0),
    "relu": (1, 0),
    "sigmoid": (4, 0),
    "tanh": (4, 0),
    "residual": (1, 1),
    "maxpool": (1, 0),
    "avgpool": (1, 0),
    "softmax": (5, 1),
    "batchnorm": (4, 1),
}


@dataclass(frozen=True)
class Layer:
    """One primary computation (convolution, matrix multiplication or LSTM).

    Parameters
    ----------
    name : str
        Unique layer name.
    kind : str
        One of :data:`LAYER_KINDS`.
    n_in, n_out : int
        Input and output features. For an LSTM ``n_out`` is the number of
        units; the model uses ``n_in + n_out`` effective inputs and ``4 n_out``
        gate outputs (Section II-A).
    n_ij : int
        Output feature size ``N_i * N_j`` (1 for fc and lstm).
    n_kij : int
        Kernel size ``N_ki * N_kj`` (1 for fc and lstm).
    stride : int
        Convolution stride; the input feature size is ``n_ij * stride**2``.
    n_ts : int
        Timesteps (lstm, and time-distributed fc such as attention).
    bidirectional : bool
        Bidirectional LSTM: two directions, excluded from timestep pipelining.
    aux : tuple of str
        Auxiliary computations applied to the output, keys of :data:`AUX_COSTS`.
    pool_window : int
        Pooling window area ``N_ws`` (only with maxpool/avgpool).
    pool_stride : int
        Pooling stride; the stored output size is ``n_ij / pool_stride**2``.
    input_from : str or None
        Producer of this layer's input; ``None`` means the previous layer.
    residual_from : str or None
        Producer of the shortcut tensor added by ``residual``.

    Attributes
    ----------
    gemm_in, gemm_out : int
        Input and output features of the underlying matrix operation.
    """

    name: str
    kind: str
    n_in: int
    n_out: int
    n_ij: int = 1
    n_kij: int = 1
    stride: int = 1
    n_ts: int = 1
    bidirectional: bool = False
    aux: tuple = ()
    pool_window: int = 1
    pool_stride: int = 1
    input_from: str = None
    residual_from: str = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"layer name {self.name!r} must be a non-empty string")
        if self.kind not in LAYER_KINDS:
            raise ConfigError(f"layer {self.name!r}: kind={self.kind!r} is not one of {', '.join(LAYER_KINDS)}")
        check_range(f"{self.name}.n_in", self.n_in, 1)
        check_range(f"{self.name}.n_out", self.n_out, 1)
        check_range(f"{self.name}.n_ij", self.n_ij, 1)
        check_range(f"{self.name}.n_kij", self.n_kij, 1)
        check_range(f"{self.name}.stride", self.stride, 1, 8)
        check_range(f"{self.name}.n_ts", self.n_ts, 1)
        check_range(f"{self.name}.pool_window", self.pool_window, 1, 64)
        check_range(f"{self.name}.pool_stride", self.pool_stride, 1, 8)
        if self.kind != "conv" and (self.n_ij != 1 or self.n_kij != 1 or self.stride != 1):
            raise ConfigError(f"layer {self.name!r}: a {self.kind} layer needs n_ij=1, n_kij=1 and stride=1 "
                                f"(got n_ij={self.n_ij}, n_kij={self.n_kij}, stride={self.stride})")
        if self.kind == "conv" and self.n_ts != 1:
            raise ConfigError(f"layer {self.name!r}: n_ts={self.n_ts} is only allowed for fc and lstm layers, must be 1")
        if self.bidirectional and self.kind != "lstm":
            raise ConfigError(f"layer {self.name!r}: bidirectional=True is only allowed for lstm layers")
        aux = tuple(self.aux)
        object.__setattr__(self, "aux", aux)
        for op in aux:
            if op not in AUX_COSTS:
                raise ConfigError(f"layer {self.name!r}: aux {op!r} is not one of {', '.join(AUX_COSTS)}")
        pooled = any(op in ("maxpool", "avgpool") for op in aux)
        if not pooled and (self.pool_window != 1 or self.pool_stride != 1):
            raise ConfigError(f"layer {self.name!r}: pool_window/pool_stride given without maxpool or avgpool")
        if self.pool_stride > 1 and self.n_ij % (self.pool_stride ** 2):
            raise ConfigError(f"layer {self.name!r}: n_ij={self.n_ij} is not divisible by pool_stride**2={self.pool_stride ** 2}")
        if ("residual" in aux) != (self.residual_from is not None):
            raise ConfigError(f"layer {self.name!r}: aux 'residual' and residual_from={self.residual_from!r} must be given together")

    @property
    def gemm_in(self):
        return self.n_in + self.n_out if self.kind == "lstm" else self.n_in

    @property
    def gemm_out(self):
        return 4 * self.n_out if self.kind == "lstm" else self.n_out

    @property
    def directions(self):
        """Number of LSTM directions (2 for a bidirectional layer)."""
        return 2 if self.bidirectional else 1

    @property
    def input_ij(self):
        """Input feature size ``N_ij * stride**2`` (zero-padding inferred, halo ignored)."""
        return self.n_ij * self.stride ** 2

    @property
    def stored_output_ij(self):
        """Output feature size after pooling, as stored for the next layer."""
        return self.n_ij // self.pool_stride ** 2

    def macs(self, n_mb):
        """Multiply-accumulates of one pass (FWD, BWD or UPD) for ``n_mb`` samples."""
        return self.gemm_in * self.gemm_out * self.n_ij * self.n_kij * n_mb * self.n_ts * self.directions

    @property
    def weights(self):
        """Kernel elements (both directions of a bidirectional LSTM)."""
        return self.gemm_in * self.gemm_out * self.n_kij * self.directions


@dataclass(frozen=True)
class Workload:
    """A network and its minibatch.

    Parameters
    ----------
    name : str
        Network name.
    layers : tuple of Layer
        Layers in FWD execution order.
    n_mb : int
        Minibatch size ``N_mb`` (global, over the whole system).
    """

    name: str
    layers: tuple
    n_mb: int = 256

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise ConfigError(f"workload {self.name!r}: needs at least one layer")
        check_range(f"{self.name}.n_mb", self.n_mb, 1, 1 << 20)
        seen = set()
        for layer in self.layers:
            if layer.name in seen:
                raise ConfigError(f"layer {layer.name!r}: duplicate layer name")
            for ref in ("input_from", "residual_from"):
                source = getattr(layer, ref)
                if source is not None and source not in seen:
                    raise ConfigError(f"layer {layer.name!r}: {ref}={source!r} does not name an earlier layer")
            seen.add(layer.name)

    def with_minibatch(self, n_mb):
        """Return a copy with minibatch ``n_mb``."""
        return replace(self, n_mb=n_mb)

    def producer(self, index):
        """Index of the layer producing the input of layer ``index`` (``None`` for the network input)."""
        layer = self.layers[index]
        if layer.input_from is None:
            return index - 1 if index > 0 else None
        return self.index(layer.input_from)

    def index(self, name):
        """Position of the layer called ``name``."""
        for position, layer in enumerate(self.layers):
            if layer.name == name:
                return position
        raise KeyError(name)

    def macs(self):
        """MACs of one pass over all layers."""
        return sum(layer.macs(self.n_mb) for layer in self.layers)


def vgg16(n_mb=256):
    """VGG16 (Simonyan & Zisserman, configuration D) at 224x224."""
    layers = []
    plan = [(64, 2, 224), (128, 2, 112), (256, 3, 56), (512, 3, 28), (512, 3, 14)]
    channels = 3
    for block, (width, count, size) in enumerate(plan, start=1):
        for position in range(1, count + 1):
            last = position == count
            aux = ("bias", "relu") + (("maxpool",) if last else ())
            layers.append(Layer(f"CONV{block}_{position}", "conv", channels, width, size * size, 9,
                                aux=aux, pool_window=4 if last else 1, pool_stride=2 if last else 1))
            channels = width
    layers.append(Layer("FCON1", "fc", 512 * 49, 4096, aux=("bias", "relu")))
    layers.append(Layer("FCON2", "fc", 4096, 4096, aux=("bias", "relu")))
    layers.append(Layer("FCON3", "fc", 4096, 1000, aux=("bias", "softmax")))
    return Workload("vgg16", tuple(layers), n_mb)


def resnet50(n_mb=256):
    """ResNet50 (v1.5: stride on the 3x3 convolution) with its residual dependences."""
    layers = [Layer("conv1", "conv", 3, 64, 112 * 112, 49, stride=2,
                    aux=("batchnorm", "relu", "maxpool"), pool_window=9, pool_stride=2)]
    channels, size, block_input = 64, 56, "conv1"
    stages = [(64, 256, 3, 1), (128, 512, 4, 2), (256, 1024, 6, 2), (512, 2048, 3, 2)]
    for stage, (mid, out, blocks, first_stride) in enumerate(stages, start=2):
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            out_size = size // stride
            prefix = f"res{stage}{chr(ord('a') + block)}"
            shortcut = block_input
            if block == 0:
                shortcut = f"{prefix}_proj"
                layers.append(Layer(shortcut, "conv", channels, out, out_size ** 2, 1, stride=stride,
                                    aux=("batchnorm",), input_from=block_input))
            layers.append(Layer(f"{prefix}_1x1a", "conv", channels, mid, size ** 2, 1,
                                aux=("batchnorm", "relu"), input_from=block_input))
            layers.append(Layer(f"{prefix}_3x3", "conv", mid, mid, out_size ** 2, 9, stride=stride,
                                aux=("batchnorm", "relu")))
            last_aux = ("batchnorm", "residual", "relu")
            if stage == 5 and block == blocks - 1:
                last_aux += ("avgpool",)
            layers.append(Layer(f"{prefix}_1x1b", "conv", mid, out, out_size ** 2, 1, aux=last_aux,
                                residual_from=shortcut,
                                pool_window=49 if "avgpool" in last_aux else 1,
                                pool_stride=7 if "avgpool" in last_aux else 1))
            channels, size, block_input = out, out_size, f"{prefix}_1x1b"
    layers.append(Layer("fc1000", "fc", 2048, 1000, aux=("bias", "softmax")))
    return Workload("resnet50", tuple(layers), n_mb)


#: Where GNMT's bidirectional LSTM layer can be put: the paper's first decoder layer, or the first
#: encoder layer of the GNMT paper (Wu et al. 2016).
GNMT_BIDIRECTIONAL = ("dec0", "enc0")


def gnmt(n_mb=256, units=1024, timesteps=128, bidirectional="dec0"):
    """GNMT (Wu et al. 2016): 8 encoder and 8 decoder LSTM layers with attention and residuals.

    The paper's benchmark description (Section IV) reads: "GNMT has 8 decoder and
    encoder LSTM layers with the first decoder being a bidirectional LSTM", so
    ``dec0`` is bidirectional by default. GNMT itself makes its first *encoder*
    layer bidirectional (an autoregressive decoder cannot be); ``bidirectional="enc0"``
    builds that variant. The placement matters beyond the layer's own cost: a
    bidirectional layer is not timestep-pipelined, so it splits its stack's pipe
    group (``dec0``: two groups of eight layers; ``enc0``: one group of sixteen).
    Residual connections start at the third layer of each stack. Attention is a
    time-distributed fc layer combining the decoder state with the context
    (``2 units -> units``) followed by softmax; its context feeds the first decoder
    layer only. The vocabulary projection is left out (the paper does not mention it).

    Parameters
    ----------
    n_mb : int
        Minibatch.
    units : int
        LSTM units per layer.
    timesteps : int
        Sequence length.
    bidirectional : str
        The bidirectional layer, one of :data:`GNMT_BIDIRECTIONAL`.
    """
    if bidirectional not in GNMT_BIDIRECTIONAL:
        raise ConfigError(f"gnmt: bidirectional={bidirectional!r} is not one of {', '.join(GNMT_BIDIRECTIONAL)}")
    layers = []
    for position in range(8):
        residual = position >= 2
        layers.append(Layer(f"enc{position}", "lstm", units, units, n_ts=timesteps,
                            bidirectional=bidirectional == f"enc{position}",
                            aux=("sigmoid", "tanh") + (("residual",) if residual else ()),
                            residual_from=f"enc{position - 1}" if residual else None))
    for position in range(8):
        residual = position >= 2
        layers.append(Layer(f"dec{position}", "lstm", 2 * units if position == 0 else units, units,
                            n_ts=timesteps, bidirectional=bidirectional == f"dec{position}",
                            aux=("sigmoid", "tanh") + (("residual",) if residual else ()),
                            residual_from=f"dec{position - 1}" if residual else None))
        if position == 0:
            layers.append(Layer("attention", "fc", 2 * units, units, n_ts=timesteps, aux=("tanh", "softmax")))
    return Workload("gnmt", tuple(layers), n_mb)


#: Built-in workloads by name.
BUILTINS = {"vgg16": vgg16, "resnet50": resnet50, "gnmt": gnmt}

#: Auxiliary computations of a pooling layer, by the format's ``pool`` kind.
_POOL_AUX = {"max": "maxpool", "avg": "avgpool"}

#: Minibatch of a network file that gives none.
DEFAULT_MINIBATCH = 256


def workload_from_network(description, n_mb=None, source=None):
    """Convert a :class:`trainforge.spec.network.Network` to a :class:`Workload`.

    A convolution's ``n_ij`` is its output map (before pooling), ``n_kij``
    the kernel area; pooling appends ``maxpool``/``avgpool`` to ``aux`` with
    ``pool_window`` the pooling area.

    Parameters
    ----------
    description : trainforge.spec.network.Network
        The network in the common format.
    n_mb : int, optional
        Minibatch; default the network's ``minibatch``, else 256.
    source : str, optional
        Where it came from (a file name), the start of every error message.

    Raises
    ------
    trainforge.errors.ConfigError
        One line naming the field DeepSpatialMatrix cannot take (a grouped
        convolution, a layer reading a concatenation, a pooling stride that
        does not divide the output map).
    """
    source = source or f"network {description.name!r}"
    layers = []
    for index, layer in enumerate(description.layers):
        where = f"{source}: layers[{index}]"
        if layer.concat_from is not None:
            raise ConfigError(f"{where}.concat_from: DeepSpatialMatrix takes layers reading one earlier layer (the "
                              f"previous one or input_from; residual_from adds another), not a concatenation, got "
                              f"{list(layer.concat_from)!r} (layer {layer.name!r})")
        if layer.groups != 1:
            raise ConfigError(f"{where}.groups: DeepSpatialMatrix takes ungrouped convolutions, got {layer.groups} "
                              f"(layer {layer.name!r})")
        aux = layer.aux + ((_POOL_AUX[layer.pool],) if layer.pool_kernel else ())
        spatial = {}
        if layer.kind == "conv":
            spatial = dict(n_ij=layer.out_height * layer.out_width, n_kij=layer.kernel ** 2, stride=layer.stride)
            if layer.pool_kernel:
                spatial.update(pool_window=layer.pool_kernel ** 2, pool_stride=layer.pool_stride)
                if spatial["n_ij"] % layer.pool_stride ** 2:
                    raise ConfigError(
                        f"{where}.pool_stride: DeepSpatialMatrix stores n_ij / pool_stride**2 values and needs "
                        f"out_height * out_width = {spatial['n_ij']} divisible by pool_stride**2, got "
                        f"pool_stride {layer.pool_stride} (layer {layer.name!r})")
        try:
            layers.append(Layer(layer.name, layer.kind, layer.in_channels, layer.out_channels, n_ts=layer.timesteps,
                                bidirectional=layer.bidirectional, aux=aux, input_from=layer.input_from,
                                residual_from=layer.residual_from, **spatial))
        except (ConfigError, ParameterError) as error:
            raise ConfigError(f"{where}: {error}") from None
    n_mb = n_mb if n_mb is not None else (description.minibatch or DEFAULT_MINIBATCH)
    try:
        return Workload(description.name, tuple(layers), n_mb)
    except (ConfigError, ParameterError) as error:
        raise ConfigError(f"{source}: {error}") from None


def _square_side(area, what):
    side = math.isqrt(area)
    if side * side != area:
        raise ConfigError(f"{what}={area} is not a square; the network format describes square maps and kernels")
    return side


def network_from_workload(workload):
    """The :class:`Workload` in the common format (:class:`trainforge.spec.network.Network`).

    A convolution's input map is ``n_ij * stride**2`` with the padding that
    gives back its output map (``(kernel - 1) // 2``); a pooling layer gets the
    padding that stores ``n_ij / pool_stride**2`` values, as the model does.
    :func:`workload_from_network` converts it back to an equal workload.
    """
    records = []
    for layer in workload.layers:
        record = {"name": layer.name, "kind": layer.kind, "in_channels": layer.n_in, "out_channels": layer.n_out}
        pools = [op for op in layer.aux if op in _POOL_AUX.values()]
        aux = [op for op in layer.aux if op not in _POOL_AUX.values()]
        if layer.kind == "conv":
            kernel = _square_side(layer.n_kij, f"layer {layer.name!r}: n_kij")
            out = _square_side(layer.n_ij, f"layer {layer.name!r}: n_ij")
            record.update(kernel=kernel, in_height=out * layer.stride, in_width=out * layer.stride,
                          out_height=out, out_width=out, stride=layer.stride, padding=(kernel - 1) // 2)
            if pools:
                window = _square_side(layer.pool_window, f"layer {layer.name!r}: pool_window")
                stored = out // layer.pool_stride
                padding = next(p for p in range(window) if (out + 2 * p - window) // layer.pool_stride + 1 == stored)
                record.update(pool=pools[0][:3], pool_kernel=window, pool_stride=layer.pool_stride,
                              pool_padding=padding)
        if layer.n_ts != 1:
            record["timesteps"] = layer.n_ts
        if layer.bidirectional:
            record["bidirectional"] = True
        if aux:
            record["aux"] = aux
        for key in ("input_from", "residual_from"):
            if getattr(layer, key) is not None:
                record[key] = getattr(layer, key)
        records.append(record)
    return network_format.from_dict({"name": workload.name, "minibatch": workload.n_mb, "layers": records},
                                    f"workload {workload.name!r}")


def workload_from_dict(data, source="workload"):
    """Build a :class:`Workload` from a parsed network document in the common format.

    Parameters
    ----------
    data : dict
        A network file's content (:mod:`trainforge.spec.network`).
    source : str
        Where the document came from, for error messages.
    """
    return workload_from_network(network_format.from_dict(data, source), source=source)


def load_document(path):
    """Parse a JSON (``.json``) or YAML (``.yaml``, ``.yml``) file into Python objects (an architecture file)."""
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: invalid YAML ({error})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: invalid JSON at line {error.lineno} column {error.colno} ({error.msg})") from None


def load_workload(spec, n_mb=None):
    """Return a built-in workload by name or read a network file (JSON/YAML, the common format).

    Raises
    ------
    trainforge.errors.ConfigError
        For a name that is neither a built-in nor a file (listing the
        built-ins), or a bad file (naming the file and the field).
    """
    if spec in BUILTINS:
        workload = BUILTINS[spec]()
    else:
        path = pathlib.Path(spec)
        if not path.exists() and path.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise ConfigError(f"{spec!r} is neither a built-in workload nor a file; built-ins: "
                              f"{', '.join(BUILTINS)} (or a .json/.yaml network file)")
        workload = workload_from_network(network_format.load(path), source=str(path))
    return workload if n_mb is None else workload.with_minibatch(n_mb)
