"""Layer lists of the networks the NeuroTrainer system reports use (AlexNet, VGG16).

Each layer is ``(name, kind, dims)`` with the ``dims`` of
:func:`trainforge.sim.neurotrainer.module.layer_pass_time` (batch filled in by
:func:`layers`). Pooling, LRN and activation layers carry no MACs and are not listed.
"""
__all__ = ["NETWORKS", "layers", "parameter_count"]


def _conv(name, cin, cout, kernel, size_in, size_out, stride=1, groups=1):
    return (name, "conv", {"in_channels": cin, "out_channels": cout, "kernel": kernel, "in_h": size_in,
                           "in_w": size_in, "out_h": size_out, "out_w": size_out, "stride": stride, "groups": groups})


def _fc(name, inputs, outputs):
    return (name, "fc", {"inputs": inputs, "outputs": outputs})


#: AlexNet as trained by Krizhevsky et al. and Caffe's bvlc_alexnet: 227x227 input, C2, C4
#: and C5 in two groups (the paper's C1 "55 x 55 x 96, kernel 11 x 11 x 3" matches).
ALEXNET = (
    _conv("C1", 3, 96, 11, 227, 55, stride=4),
    _conv("C2", 96, 256, 5, 27, 27, groups=2),
    _conv("C3", 256, 384, 3, 13, 13),
    _conv("C4", 384, 384, 3, 13, 13, groups=2),
    _conv("C5", 384, 256, 3, 13, 13, groups=2),
    _fc("FC1", 9216, 4096),
    _fc("FC2", 4096, 4096),
    _fc("FC3", 4096, 1000),
)

#: VGG16 (configuration D of Simonyan and Zisserman): 3x3 convolutions with padding 1.
VGG16 = (
    _conv("C1_1", 3, 64, 3, 224, 224), _conv("C1_2", 64, 64, 3, 224, 224),
    _conv("C2_1", 64, 128, 3, 112, 112), _conv("C2_2", 128, 128, 3, 112, 112),
    _conv("C3_1", 128, 256, 3, 56, 56), _conv("C3_2", 256, 256, 3, 56, 56), _conv("C3_3", 256, 256, 3, 56, 56),
    _conv("C4_1", 256, 512, 3, 28, 28), _conv("C4_2", 512, 512, 3, 28, 28), _conv("C4_3", 512, 512, 3, 28, 28),
    _conv("C5_1", 512, 512, 3, 14, 14), _conv("C5_2", 512, 512, 3, 14, 14), _conv("C5_3", 512, 512, 3, 14, 14),
    _fc("FC1", 25088, 4096),
    _fc("FC2", 4096, 4096),
    _fc("FC3", 4096, 1000),
)

NETWORKS = {"alexnet": ALEXNET, "vgg16": VGG16}


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
