"""The ten networks of the paper's evaluation (Section 6.1).

SFC and SCONV follow the paper's Table 3 (the extracted table is garbled; the
SCONV layer order 20, 50 (pool), 50, 10 (pool) of 5x5 valid convolutions on
28x28 MNIST is reconstructed from the prose and checked against the paper's
Data Parallelism traffic in Fig. 8, which counts only weights: 15 x 2 x 4 B x
100,500 weights = 0.0121 GB). Lenet-c and Cifar-c are Caffe's ``lenet`` and
``cifar10_quick`` (their weight counts again give Fig. 8's DP traffic, 0.0517
and 0.0174 GB). AlexNet is ref. [6] without grouping (227x227 input); the VGGs
are configurations A to E of ref. [105] at 224x224.
"""
from .network import Layer, Network


def conv(name, in_channels, out_channels, kernel, size, stride=1, padding=0, pool=0, pool_stride=0,
         input_from=None, residual_from=None, concat_from=None):
    """A square convolution whose output size is derived from the input size."""
    out = (size + 2 * padding - kernel) // stride + 1
    return Layer(name=name, kind="conv", in_channels=in_channels, out_channels=out_channels, kernel=kernel,
                 in_height=size, in_width=size, out_height=out, out_width=out, stride=stride, padding=padding,
                 pool_kernel=pool, pool_stride=pool_stride or pool, input_from=input_from,
                 residual_from=residual_from, concat_from=concat_from)


def fc(name, inputs, outputs, concat_from=None):
    """A fully connected layer (reading the concatenation ``concat_from``, if given)."""
    return Layer(name=name, kind="fc", in_channels=inputs, out_channels=outputs, concat_from=concat_from)


def sfc():
    """SFC: 784-8192-8192-8192-10, fully connected only."""
    sizes = (784, 8192, 8192, 8192, 10)
    return Network("SFC", tuple(fc(f"fc{i + 1}", a, b) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))))


def sconv():
    """SCONV: four 5x5 convolutions, no fully connected layer."""
    return Network("SCONV", (
        conv("conv1", 1, 20, 5, 28),
        conv("conv2", 20, 50, 5, 24, pool=2),
        conv("conv3", 50, 50, 5, 10),
        conv("conv4", 50, 10, 5, 6, pool=2),
    ))


def lenet_c():
    """Lenet-c (Caffe MNIST LeNet): 20@5x5, pool, 50@5x5, pool, 500, 10."""
    return Network("Lenet-c", (
        conv("conv1", 1, 20, 5, 28, pool=2),
        conv("conv2", 20, 50, 5, 12, pool=2),
        fc("fc1", 50 * 4 * 4, 500),
        fc("fc2", 500, 10),
    ))


def cifar_c():
    """Cifar-c (Caffe cifar10_quick); its 3x3/2 ceil-mode pooling is written as 2x2/2 (same sizes)."""
    return Network("Cifar-c", (
        conv("conv1", 3, 32, 5, 32, padding=2, pool=2),
        conv("conv2", 32, 32, 5, 16, padding=2, pool=2),
        conv("conv3", 32, 64, 5, 8, padding=2, pool=2),
        fc("fc1", 64 * 4 * 4, 64),
        fc("fc2", 64, 10),
    ))


def alexnet():
    """AlexNet (ref. [6], ungrouped): five convolutions, three fully connected layers."""
    return Network("AlexNet", (
        conv("conv1", 3, 96, 11, 227, stride=4, pool=3, pool_stride=2),
        conv("conv2", 96, 256, 5, 27, padding=2, pool=3, pool_stride=2),
        conv("conv3", 256, 384, 3, 13, padding=1),
        conv("conv4", 384, 384, 3, 13, padding=1),
        conv("conv5", 384, 256, 3, 13, padding=1, pool=3, pool_stride=2),
        fc("fc1", 256 * 6 * 6, 4096),
        fc("fc2", 4096, 4096),
        fc("fc3", 4096, 1000),
    ))


#: VGG stages: per stage, the output channels and the kernel of each convolution.
VGG_STAGES = {
    "A": ((64, (3,)), (128, (3,)), (256, (3, 3)), (512, (3, 3)), (512, (3, 3))),
    "B": ((64, (3, 3)), (128, (3, 3)), (256, (3, 3)), (512, (3, 3)), (512, (3, 3))),
    "C": ((64, (3, 3)), (128, (3, 3)), (256, (3, 3, 1)), (512, (3, 3, 1)), (512, (3, 3, 1))),
    "D": ((64, (3, 3)), (128, (3, 3)), (256, (3, 3, 3)), (512, (3, 3, 3)), (512, (3, 3, 3))),
    "E": ((64, (3, 3)), (128, (3, 3)), (256, (3, 3, 3, 3)), (512, (3, 3, 3, 3)), (512, (3, 3, 3, 3))),
}


def vgg(config):
    """VGG configuration ``config`` (A to E) of ref. [105], 224x224 input."""
    layers, channels, size = [], 3, 224
    for stage, (width, kernels) in enumerate(VGG_STAGES[config], start=1):
        for index, kernel in enumerate(kernels, start=1):
            last = index == len(kernels)
            layers.append(conv(f"conv{stage}_{index}", channels, width, kernel, size, padding=kernel // 2,
                               pool=2 if last else 0))
            channels = width
        size //= 2
    layers += [fc("fc1", channels * size * size, 4096), fc("fc2", 4096, 4096), fc("fc3", 4096, 1000)]
    return Network(f"VGG-{config}", tuple(layers))


#: Built-in networks by name, in the paper's order.
BUILTIN_NETWORKS = {
    "SFC": sfc,
    "SCONV": sconv,
    "Lenet-c": lenet_c,
    "Cifar-c": cifar_c,
    "AlexNet": alexnet,
    **{f"VGG-{config}": (lambda config=config: vgg(config)) for config in "ABCDE"},
}


def _resnet_stem():
    """conv1 7x7/2 on 224x224 and its 3x3/2 max pooling, written as 2x2/2 (the same 56x56 output; HyPar's
    pooling has no padding)."""
    return [conv("conv1", 3, 64, 7, 224, stride=2, padding=3, pool=2)]


def resnet18():
    """ResNet-18 (He et al. 2016, torchvision): basic blocks, 1x1/2 projections where the shape changes."""
    layers = _resnet_stem()
    last, channels, size = "conv1", 64, 56
    for stage, width in enumerate((64, 128, 256, 512), start=2):
        for block in range(2):
            stride = 2 if stage > 2 and block == 0 else 1
            prefix = f"conv{stage}_{block + 1}"
            shortcut = last
            if stride != 1 or channels != width:
                shortcut = f"{prefix}_proj"
                layers.append(conv(shortcut, channels, width, 1, size, stride=stride, input_from=last))
            layers.append(conv(f"{prefix}a", channels, width, 3, size, stride=stride, padding=1, input_from=last))
            size //= stride
            final = stage == 5 and block == 1
            layers.append(conv(f"{prefix}b", width, width, 3, size, padding=1, residual_from=shortcut,
                               pool=7 if final else 0))  # the global 7x7 average pooling, after the sum
            last, channels = f"{prefix}b", width
    layers.append(fc("fc", 512, 1000))
    return Network("ResNet-18", tuple(layers))


def resnet50():
    """ResNet-50 (torchvision, v1.5: the stride in the 3x3 convolution): bottleneck blocks, projections."""
    layers = _resnet_stem()
    last, channels, size = "conv1", 64, 56
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=2):
        for block in range(blocks):
            stride = 2 if stage > 2 and block == 0 else 1
            prefix = f"conv{stage}_{block + 1}"
            shortcut = last
            if block == 0:
                shortcut = f"{prefix}_proj"
                layers.append(conv(shortcut, channels, 4 * width, 1, size, stride=stride, input_from=last))
            layers.append(conv(f"{prefix}a", channels, width, 1, size, input_from=last))
            layers.append(conv(f"{prefix}b", width, width, 3, size, stride=stride, padding=1))
            size //= stride
            final = stage == 5 and block == blocks - 1
            layers.append(conv(f"{prefix}c", width, 4 * width, 1, size, residual_from=shortcut,
                               pool=7 if final else 0))
            last, channels = f"{prefix}c", 4 * width
    layers.append(fc("fc", 2048, 1000))
    return Network("ResNet-50", tuple(layers))


#: GoogLeNet's Inception modules (Szegedy et al., "Going deeper with convolutions", CVPR 2015, Table 1):
#: name -> (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj, max pooling after the module).
INCEPTION_MODULES = {
    "3a": (64, 96, 128, 16, 32, 32, False),
    "3b": (128, 128, 192, 32, 96, 64, True),
    "4a": (192, 96, 208, 16, 48, 64, False),
    "4b": (160, 112, 224, 24, 64, 64, False),
    "4c": (128, 128, 256, 24, 64, 64, False),
    "4d": (112, 144, 288, 32, 64, 64, False),
    "4e": (256, 160, 320, 32, 128, 128, True),
    "5a": (256, 160, 320, 32, 128, 128, False),
    "5b": (384, 192, 384, 48, 128, 128, False),
}


def googlenet():
    """GoogLeNet (Inception-v1) of Szegedy et al. 2015, Table 1, without the auxiliary classifiers.

    Each Inception module is six convolutions: ``1x1``, ``3x3_reduce`` -> ``3x3``, ``5x5_reduce`` ->
    ``5x5`` and ``pool_proj``; the four read the module's input and the next module's layers read the
    channel concatenation of ``1x1``, ``3x3``, ``5x5`` and ``pool_proj`` (``concat_from``). As for the
    ResNets, HyPar's pooling has no padding: the 3x3/2 max poolings (112 -> 56 -> 28 -> 14 -> 7) are
    written as 2x2/2 (the same output sizes); the pooling after a module is put on each of its four
    branch outputs (pooling is per channel, so it commutes with the concatenation); the 7x7 average
    pooling is folded into the last module the same way; and the 3x3/1 max pooling before
    ``pool_proj``, which keeps the map size, has no weights and splits neither the batch nor the
    channels, is left out. Local response normalisation and dropout are element-wise.
    """
    layers = [conv("conv1", 3, 64, 7, 224, stride=2, padding=3, pool=2),
              conv("conv2_reduce", 64, 64, 1, 56),
              conv("conv2", 64, 192, 3, 56, padding=1, pool=2)]
    outputs, channels, size = ["conv2"], 192, 28
    for module, (ones, reduce3, threes, reduce5, fives, proj, pooled) in INCEPTION_MODULES.items():
        last = module == "5b"
        pool = 7 if last else (2 if pooled else 0)
        reads = dict(concat_from=tuple(outputs)) if len(outputs) > 1 else dict(input_from=outputs[0])
        prefix = f"inception{module}"
        layers += [conv(f"{prefix}_1x1", channels, ones, 1, size, pool=pool, **reads),
                   conv(f"{prefix}_3x3_reduce", channels, reduce3, 1, size, **reads),
                   conv(f"{prefix}_3x3", reduce3, threes, 3, size, padding=1, pool=pool),
                   conv(f"{prefix}_5x5_reduce", channels, reduce5, 1, size, **reads),
                   conv(f"{prefix}_5x5", reduce5, fives, 5, size, padding=2, pool=pool),
                   conv(f"{prefix}_pool_proj", channels, proj, 1, size, pool=pool, **reads)]
        outputs = [f"{prefix}_{branch}" for branch in ("1x1", "3x3", "5x5", "pool_proj")]
        channels = ones + threes + fives + proj
        size = 1 if last else (size // 2 if pooled else size)
    layers.append(fc("fc", channels, 1000, concat_from=tuple(outputs)))
    return Network("GoogLeNet", tuple(layers))


#: Built-in networks with residual connections or concatenations (not in the paper's figures).
DAG_NETWORKS = {"ResNet-18": resnet18, "ResNet-50": resnet50, "GoogLeNet": googlenet}


def builtin_network(name):
    """The built-in network ``name`` (case-insensitive).

    Raises
    ------
    KeyError
        For an unknown name; the message lists the known ones.
    """
    for known, build in {**BUILTIN_NETWORKS, **DAG_NETWORKS}.items():
        if known.lower() == name.lower():
            return build()
    raise KeyError(f"unknown network {name!r}; built-ins: {', '.join([*BUILTIN_NETWORKS, *DAG_NETWORKS])}")
