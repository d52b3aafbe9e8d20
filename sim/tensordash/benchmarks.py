"""Workloads for the foundation's ``trainforge bench`` (timed there, never asserted here)."""
from functools import lru_cache

import numpy as np

from trainforge.golden.tensordash.layer import OPERATIONS, layer_cycles, lower

#: VGG16 conv3_2 (Simonyan and Zisserman, configuration D): 56 x 56, 256 -> 256 channels, 3 x 3, pad 1, one sample.
VGG16_CONV3_2 = {"channels": 256, "filters": 256, "size": 56, "kernel": 3, "padding": 1, "batch": 1}


@lru_cache(maxsize=1)
def _relu_tensors(channels, filters, size, kernel, padding, batch, seed=0):
    """Synthetic ReLU tensors: activations and output gradients with about half their values zero."""
    generator = np.random.default_rng(seed)
    activations = np.maximum(generator.standard_normal((batch, channels, size, size), dtype=np.float32), 0)
    weights = generator.standard_normal((filters, channels, kernel, kernel), dtype=np.float32)
    out = size + 2 * padding - kernel + 1
    gradients = generator.standard_normal((batch, filters, out, out), dtype=np.float32)
    gradients *= generator.random(gradients.shape) < 0.5
    return activations, weights, gradients


def vgg16_layer_three_operations():
    """Layer model of VGG16 conv3_2 (56x56, 256->256, 3x3, batch 1): AxW, GxW, GxA lowered and cycle-counted."""
    return [layer_cycles(lower(operation, *_relu_tensors(**VGG16_CONV3_2), 1, VGG16_CONV3_2["padding"])) for operation in OPERATIONS]


BENCHMARKS = {
    "tensordash_vgg16_conv3_2_three_operations": (
        vgg16_layer_three_operations,
        {**VGG16_CONV3_2, "operations": list(OPERATIONS), "tile": "4x4 PEs, 4 lanes, 4 deep",
         "sparsity": "synthetic: ReLU activations, gradients half zero"}),
}
