"""The training-method study in numpy: MLPs trained by SGD, MBGD, FA, DFA and CP.

ReLU hidden layers, softmax output, cross-entropy loss, float32. Methods:

- ``SGD``: one sample, full backpropagation, update after each sample.
- ``MBGD``: minibatches of ``batch`` samples, averaged gradient.
- ``FA``: backpropagation through fixed random matrices ``B_i`` instead of ``W_i^T``.
- ``DFA``: every hidden layer gets the output error through its own fixed random ``B_i``.
- ``CP``: continuous propagation. Layer ``i`` runs the forward pass of sample
  ``t`` at time ``t + i`` and its backward pass at time ``t + 2L - 1 - i``;
  every layer updates its weights as soon as its backward pass is done, so a
  forward pass uses weights already updated by the samples ahead of it and
  a backward pass uses weights newer than those of its own forward pass.
"""
import gzip
import pathlib
import struct

import numpy as np

__all__ = ["load_digits_28", "synthetic_digits", "load_idx", "load_dataset", "train", "METHOD_DEFAULTS"]

#: Learning rates of the study (FA and DFA need smaller ones, Section 2.2).
METHOD_DEFAULTS = {"SGD": 0.01, "MBGD": 0.05, "FA": 0.02, "DFA": 0.02, "CP": 0.01}


def _upsample_to_28(images):
    """8x8 digits to 28x28: each pixel becomes 3x3 (24x24), then a 2-pixel zero border."""
    big = np.kron(images.reshape(-1, 8, 8), np.ones((3, 3)))
    return np.pad(big, ((0, 0), (2, 2), (2, 2))).reshape(len(images), 784)


def load_digits_28():
    """scikit-learn's bundled digits (1797 samples), upsampled to 28x28 and scaled to [0, 1].

    Raises ``ImportError`` when scikit-learn is not installed.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    return _upsample_to_28(digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)


def synthetic_digits(samples=1800, seed=0):
    """A deterministic stand-in for the digits: ten random 8x8 stroke prototypes, jittered, noised, upsampled."""
    generator = np.random.default_rng(seed)
    prototypes = (generator.random((10, 8, 8)) < 0.35).astype(np.float64)
    labels = np.arange(samples) % 10
    generator.shuffle(labels)
    images = prototypes[labels]
    shifts = generator.integers(-1, 2, size=(samples, 2))
    images = np.stack([np.roll(image, tuple(shift), axis=(0, 1)) for image, shift in zip(images, shifts)])
    images = np.clip(images + generator.normal(0, 0.35, images.shape), 0, 1)
    return _upsample_to_28(images.reshape(samples, 64)).astype(np.float32), labels.astype(np.int64)


def load_idx(images_path, labels_path):
    """MNIST IDX files (optionally gzipped): images scaled to [0, 1] as ``(N, rows * cols)``, labels."""
    def read(path):
        path = pathlib.Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            return handle.read()

    raw = read(images_path)
    if len(raw) < 16:
        raise ValueError(f"{images_path}: too short for an IDX image header")
    magic, count, rows, cols = struct.unpack(">IIII", raw[:16])
    if magic != 2051:
        raise ValueError(f"{images_path}: not an IDX image file (magic {magic}, expected 2051)")
    images = np.frombuffer(raw, dtype=np.uint8, offset=16, count=count * rows * cols)
    raw = read(labels_path)
    magic, label_count = struct.unpack(">II", raw[:8])
    if magic != 2049 or label_count != count:
        raise ValueError(f"{labels_path}: not an IDX label file for {count} images (magic {magic}, count {label_count})")
    labels = np.frombuffer(raw, dtype=np.uint8, offset=8, count=count)
    return (images.reshape(count, rows * cols) / 255.0).astype(np.float32), labels.astype(np.int64)


def load_dataset(name="digits", idx=None, seed=0):
    """``(x, y, source)``: the digits (synthetic when scikit-learn is missing) or MNIST IDX files."""
    if idx is not None:
        images, labels = load_idx(*idx)
        return images, labels, "mnist-idx"
    try:
        images, labels = load_digits_28()
        return images, labels, "sklearn-digits"
    except ImportError:
        images, labels = synthetic_digits(seed=seed)
        return images, labels, "synthetic-digits"


def _relu(x):
    return np.maximum(x, 0)


def _softmax(a):
    a = a - a.max(axis=-1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=-1, keepdims=True)


class _Network:
    def __init__(self, widths, generator, feedback):
        self.weights = [(generator.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32)
                        for m, n in zip(widths[:-1], widths[1:])]
        self.biases = [np.zeros(n, dtype=np.float32) for n in widths[1:]]
        out = widths[-1]
        # FA: B_i shaped like W_i; DFA: B_i maps the output error to layer i's outputs.
        self.feedback = None
        if feedback == "FA":
            self.feedback = [(generator.standard_normal(w.shape) * np.sqrt(1.0 / w.shape[1])).astype(np.float32)
                             for w in self.weights]
        elif feedback == "DFA":
            self.feedback = [(generator.standard_normal((out, n)) * np.sqrt(1.0 / out)).astype(np.float32)
                             for n in widths[1:-1]]

    def forward(self, x):
        activations = [x]
        for index, (w, b) in enumerate(zip(self.weights, self.biases)):
            a = activations[-1] @ w + b
            activations.append(_softmax(a) if index == len(self.weights) - 1 else _relu(a))
        return activations

    def predict(self, x):
        return self.forward(x)[-1].argmax(axis=1)


def _backward(network, activations, error, method):
    """Gradients of every layer for a batch (rows of ``activations``), by BP, FA or DFA."""
    depth = len(network.weights)
    deltas = [None] * depth
    deltas[-1] = error
    for index in range(depth - 2, -1, -1):
        if method == "DFA":
            back = error @ network.feedback[index]
        elif method == "FA":
            back = deltas[index + 1] @ network.feedback[index + 1].T
        else:
            back = deltas[index + 1] @ network.weights[index + 1].T
        deltas[index] = back * (activations[index + 1] > 0)
    return deltas


def _one_hot(labels, classes):
    return np.eye(classes, dtype=np.float32)[labels]


def _train_epoch_batched(network, x, y, method, batch, rate, order):
    for start in range(0, len(order), batch):
        rows = order[start:start + batch]
        activations = network.forward(x[rows])
        error = (activations[-1] - y[rows]) / len(rows)
        deltas = _backward(network, activations, error, method)
        for index, delta in enumerate(deltas):
            network.weights[index] -= rate * activations[index].T @ delta
            network.biases[index] -= rate * delta.sum(axis=0)


def _train_epoch_cp(network, x, y, rate, order):
    """Continuous propagation over one epoch, time step by time step (see the module docstring)."""
    depth = len(network.weights)
    forward_in = {}  # (layer, sample) -> input activation row
    stash = {}  # (layer, sample) -> (input of the layer, its output)
    backward_in = {}  # (layer, sample) -> delta of the layer's pre-activation
    count = len(order)
    for time in range(count + 2 * depth):
        # Backward passes (and immediate updates) first, then forward passes with the new weights.
        for layer in range(depth):
            sample = time - (2 * depth - 1 - layer)
            if 0 <= sample < count and (layer, sample) in backward_in:
                delta = backward_in.pop((layer, sample))
                layer_input, _ = stash.pop((layer, sample))
                if layer > 0:
                    _, below_output = stash[(layer - 1, sample)]
                    backward_in[(layer - 1, sample)] = (delta @ network.weights[layer].T) * (below_output > 0)
                network.weights[layer] -= rate * np.outer(layer_input, delta)
                network.biases[layer] -= rate * delta
        for layer in range(depth):
            sample = time - layer
            if 0 <= sample < count:
                row = order[sample]
                layer_input = x[row] if layer == 0 else forward_in.pop((layer, sample))
                a = layer_input @ network.weights[layer] + network.biases[layer]
                output = _softmax(a) if layer == depth - 1 else _relu(a)
                stash[(layer, sample)] = (layer_input, output)
                if layer == depth - 1:
                    backward_in[(layer, sample)] = output - y[row]
                else:
                    forward_in[(layer + 1, sample)] = output


def train(widths, method, x_train, labels_train, x_test, labels_test, *, epochs=5, batch=1, rate=None, seed=0):
    """Train an MLP and return the test accuracy after each epoch.

    Parameters
    ----------
    widths : tuple of int
        Layer widths from the input to the classes.
    method : str
        ``SGD``, ``MBGD``, ``FA``, ``DFA`` or ``CP``.
    batch : int
        Minibatch size (``MBGD``, ``FA``, ``DFA``; ``SGD`` and ``CP`` use 1).
    rate : float, optional
        Learning rate (default :data:`METHOD_DEFAULTS`).

    Returns
    -------
    list of float
    """
    if method not in METHOD_DEFAULTS:
        raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHOD_DEFAULTS)}")
    generator = np.random.default_rng(seed)
    network = _Network(widths, generator, method)
    rate = METHOD_DEFAULTS[method] if rate is None else rate
    targets = _one_hot(labels_train, widths[-1])
    accuracies = []
    for _ in range(epochs):
        order = generator.permutation(len(x_train))
        if method == "CP":
            _train_epoch_cp(network, x_train, targets, rate, order)
        else:
            _train_epoch_batched(network, x_train, targets, method, 1 if method == "SGD" else batch, rate, order)
        accuracies.append(float(np.mean(network.predict(x_test) == labels_test)))
    return accuracies
