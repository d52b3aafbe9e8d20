"""The networks the NeuroTrainer system reports use (AlexNet, VGG16), in the common network format.

Each network is a :class:`trainforge.spec.network.Network` (see
:mod:`trainforge.spec.network`); :func:`layers_from_network` converts one to
the model's layer list, ``(name, kind, dims)`` with the ``dims`` of
:func:`trainforge.sim.neurotrainer.module.layer_pass_time` (batch filled in by
:func:`layers`). NeuroTrainer takes ``conv`` (also grouped) and ``fc``
layers; pooling, LRN and activation layers carry no MACs and are dropped, so a
network file's ``pool`` and ``aux`` fields are ignored. The model runs a chain
of layers: a layer with ``input_from``, ``residual_from`` or ``concat_from``
is refused (the compiler, :func:`compiler_layer` and :func:`network_passes`,
takes any layer on its own).
"""
from trainforge.errors import ConfigError
from trainforge.spec import network as network_format

__all__ = ["BUILTIN_NETWORKS", "NETWORKS", "layers_from_network", "compiler_layer", "network_passes", "layers", "parameter_count"]


def _conv(name, cin, cout, kernel, size_in, stride=1, padding=0, groups=1, pool=0, pool_stride=0):
    record = {"name": name, "kind": "conv", "in_channels": cin, "out_channels": cout, "kernel": kernel,
              "in_height": size_in, "in_width": size_in, "stride": stride, "padding": padding, "groups": groups}
    if pool:
        record.update(pool="max", pool_kernel=pool, pool_stride=pool_stride or pool)
    return record


def _fc(name, inputs, outputs):
    return {"name": name, "kind": "fc", "in_channels": inputs, "out_channels": outputs}


#: AlexNet as trained by Krizhevsky et al. and Caffe's bvlc_alexnet: 227x227 input, C2, C4
#: and C5 in two groups (the paper's C1 "55 x 55 x 96, kernel 11 x 11 x 3" matches).
ALEXNET = network_format.from_dict({"name": "alexnet", "layers": [
    _conv("C1", 3, 96, 11, 227, stride=4, pool=3, pool_stride=2),
    _conv("C2", 96, 256, 5, 27, padding=2, groups=2, pool=3, pool_stride=2),
    _conv("C3", 256, 384, 3, 13, padding=1),
    _conv("C4", 384, 384, 3, 13, padding=1, groups=2),
    _conv("C5", 384, 256, 3, 13, padding=1, groups=2, pool=3, pool_stride=2),
    _fc("FC1", 9216, 4096),
    _fc("FC2", 4096, 4096),
    _fc("FC3", 4096, 1000),
]}, "neurotrainer alexnet")


def _vgg16():
    records, channels, size = [], 3, 224
    for stage, (width, count) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)), start=1):
        for index in range(1, count + 1):
            records.append(_conv(f"C{stage}_{index}", channels, width, 3, size, padding=1,
                                 pool=2 if index == count else 0))
            channels = width
        size //= 2
    records += [_fc("FC1", 25088, 4096), _fc("FC2", 4096, 4096), _fc("FC3", 4096, 1000)]
    return network_format.from_dict({"name": "vgg16", "layers": records}, "neurotrainer vgg16")


#: VGG16 (configuration D of Simonyan and Zisserman): 3x3 convolutions with padding 1.
VGG16 = _vgg16()

#: The built-in networks by name.
BUILTIN_NETWORKS = {"alexnet": ALEXNET, "vgg16": VGG16}


def _check_layer(layer, where):
    """Refuse a layer NeuroTrainer cannot compute: not ``conv`` or ``fc``, or applied over timesteps."""
    if layer.kind not in ("conv", "fc"):
        raise ConfigError(f"{where}.kind: NeuroTrainer takes conv and fc layers, got {layer.kind} "
                          f"(layer {layer.name!r})")
    if layer.timesteps != 1:
        raise ConfigError(f"{where}.timesteps: NeuroTrainer takes layers applied once, got {layer.timesteps} "
                          f"(layer {layer.name!r})")


def layers_from_network(description, source=None):
    """The model's ``(name, kind, dims)`` layers of a :class:`trainforge.spec.network.Network`.

    The model runs the layers as a chain (forward in order, backward in
    reverse), each reading the previous layer's output, so a layer reading
    another layer (``input_from``), adding one (``residual_from``) or
    reading a concatenation (``concat_from``) is refused.

    Raises
    ------
    trainforge.errors.ConfigError
        For an ``lstm`` layer, a timestep count other than 1 or a layer that
        does not read the previous one (one line naming the layer).
    """
    source = source or f"network {description.name!r}"
    result = []
    for index, layer in enumerate(description.layers):
        where = f"{source}: layers[{index}]"
        _check_layer(layer, where)
        network_format.require_chain_layer(layer, where, "NeuroTrainer")
        if layer.kind == "fc":
            result.append((layer.name, "fc", {"inputs": layer.in_channels, "outputs": layer.out_channels}))
        else:
            result.append((layer.name, "conv", {
                "in_channels": layer.in_channels, "out_channels": layer.out_channels, "kernel": layer.kernel,
                "in_h": layer.in_height, "in_w": layer.in_width, "out_h": layer.out_height, "out_w": layer.out_width,
                "stride": layer.stride, "groups": layer.groups}))
    return tuple(result)


def compiler_layer(description, layer_name, training_pass, batch, source=None):
    """``(kind, dims)`` of one layer of a network for :func:`trainforge.sim.neurotrainer.compiler.compile_layer`.

    The compiler's convolution has stride 1 and reads an already padded input
    (the ``add_pad`` data preparation pads it), so ``h, w`` are the padded
    input size; grouped convolutions are not compiled.

    Parameters
    ----------
    description : trainforge.spec.network.Network
        The network in the common format.
    layer_name : str
        The layer to compile.
    training_pass : str
        ``"ff"``, ``"bp"`` or ``"up"``.
    batch : int
        Samples ``n``.
    source : str, optional
        Where the network came from, the start of every error message.

    Raises
    ------
    trainforge.errors.ConfigError
        An unknown layer name, or a layer the compiler cannot take (one line naming it).
    """
    source = source or f"network {description.name!r}"
    names = [layer.name for layer in description.layers]
    if layer_name not in names:
        raise ConfigError(f"{source}: no layer {layer_name!r}; layers: {', '.join(names)}")
    index = names.index(layer_name)
    layer = description.layers[index]
    where = f"{source}: layers[{index}]"
    _check_layer(layer, where)
    if layer.kind == "fc":
        return f"fc_{training_pass}", {"h": layer.out_channels, "k": layer.in_channels, "n": batch}
    for key in ("stride", "groups"):
        if getattr(layer, key) != 1:
            raise ConfigError(f"{where}.{key}: the NeuroTrainer compiler takes 1, got {getattr(layer, key)} "
                              f"(layer {layer.name!r})")
    return f"conv_{training_pass}", {
        "n": batch, "d": layer.in_channels, "h": layer.in_height + 2 * layer.padding,
        "w": layer.in_width + 2 * layer.padding, "o": layer.out_channels, "hk": layer.kernel, "wk": layer.kernel}


#: The built-in networks as the model's layer lists.
NETWORKS = {name: layers_from_network(network) for name, network in BUILTIN_NETWORKS.items()}


def layers(network, batch):
    """The layers of ``network`` with ``batch`` in every ``dims``."""
    return [(name, kind, {**dims, "batch": batch}) for name, kind, dims in NETWORKS[network]]


def parameter_count(network):
    """Weights of ``network`` (biases are not counted)."""
    total = 0
    for _, kind, dims in NETWORKS[network]:
        if kind == "fc":
            total += dims["inputs"] * dims["outputs"]
        else:
            total += dims["out_channels"] * dims["in_channels"] // dims["groups"] * dims["kernel"] ** 2
    return total


def network_passes(description, batch, passes=("ff", "bp", "up")):
    """Every conv and fc layer of a network as compiler layers, stride and padding included.

    Unlike :func:`compiler_layer` (stride 1, a pre-padded input), a convolution keeps its
    stride ``s`` and zero padding ``p``; a grouped convolution is compiled for one group
    (``d / groups`` input and ``o / groups`` output channels) and run ``groups`` times on the
    groups' channel slices. Each layer is compiled from its own shape, so a layer reading
    another layer or a concatenation (``input_from``, ``concat_from``) is compiled as any other.

    Parameters
    ----------
    description : trainforge.spec.network.Network
    batch : int
        Samples ``n``.
    passes : sequence of str
        ``"ff"``, ``"bp"``, ``"up"``.

    Returns
    -------
    list of (str, str, str, dict, int)
        ``(layer name, pass, compiler kind, dims, groups)``.
    """
    for index, layer in enumerate(description.layers):
        _check_layer(layer, f"network {description.name!r}: layers[{index}]")
    result = []
    for layer in description.layers:
        for training_pass in passes:
            if layer.kind == "fc":
                result.append((layer.name, training_pass, f"fc_{training_pass}",
                               {"h": layer.out_channels, "k": layer.in_channels, "n": batch}, 1))
                continue
            groups = layer.groups
            result.append((layer.name, training_pass, f"conv_{training_pass}", {
                "n": batch, "d": layer.in_channels // groups, "h": layer.in_height, "w": layer.in_width,
                "o": layer.out_channels // groups, "hk": layer.kernel, "wk": layer.kernel, "s": layer.stride,
                "p": layer.padding}, groups))
    return result
