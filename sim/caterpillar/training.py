"""The training-method study in numpy: MLPs trained by SGD, MBGD, FA, DFA and CP.

ReLU hidden layers, softmax output, cross-entropy loss, float32. Methods:

- ``SGD``: one sample, full backpropagation, update after each sample.
- ``MBGD``: minibatches of ``batch`` samples, averaged gradient.
- ``FA``: backpropagation through fixed random matrices ``B_i`` instead of ``W_i^T``.
- ``DFA``: every hidden layer gets the output error through its own fixed random ``B_i``.
- ``CP``: continuous propagation. Layer ``i`` (0-based, ``L`` layers) runs the
  forward pass of sample ``t`` at time step ``t + i`` and its backward pass at
  time step ``t + 2L - 1 - i``; within a time step the backward passes (each
  followed at once by its layer's weight update) come before the forward
  passes. So the forward pass of sample ``t`` overlaps the backward pass of
  ``t - 1`` and ``t - 2`` ..., uses weights already updated by the samples
  ahead of it, and a backward pass uses weights newer than those of its own
  forward pass. The pipeline is never drained between epochs (only at the end).
  With one layer (a pipeline depth of 1) this is exactly SGD.

Default data: scikit-learn's bundled digits (1797 8x8 images) upsampled to
28x28, so that the paper's 784-input layer sizes apply; MNIST IDX files for
users who have them (:func:`load_idx`).
"""
import gzip
import pathlib
import struct

import numpy as np

__all__ = ["load_digits_28", "load_idx", "load_dataset", "MLP", "train", "default_rate", "LEARNING_RATES",
           "RATE_GRID"]

#: Learning rates of the study, per (method, minibatch size): the best of :data:`RATE_GRID` found by
#: ``trainforge caterpillar rates`` (784-500-500-500-10, digits, 1 epoch, seed 0, criterion: the mean
#: test accuracy over the 4 evaluations of the epoch, which rewards fast and stable convergence). Every
#: best rate is inside the grid. Output: build/reports/caterpillar/rates.json; see hw/caterpillar/README.md.
LEARNING_RATES = {
    ("SGD", 1): 0.01, ("CP", 1): 0.003, ("FA", 1): 0.001, ("DFA", 1): 0.001,
    ("MBGD", 2): 0.01, ("MBGD", 4): 0.03, ("MBGD", 8): 0.03, ("MBGD", 50): 0.1, ("MBGD", 100): 0.03,
}
#: The rates the sweep tries.
RATE_GRID = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)


def default_rate(method, batch=1):
    """The study's learning rate for ``method`` with minibatch ``batch`` (:data:`LEARNING_RATES`).

    A batch size outside the table takes the rate of the nearest swept size of that method.
    """
    sizes = [size for name, size in LEARNING_RATES if name == method]
    if not sizes:
        raise ValueError(f"unknown method {method!r}; allowed: SGD, MBGD, FA, DFA, CP")
    nearest = min(sizes, key=lambda size: (abs(np.log(size) - np.log(batch)), size))
    return LEARNING_RATES[(method, nearest)]


def _upsample_to_28(images):
    """8x8 digits to 28x28: each pixel becomes 3x3 (24x24), then a 2-pixel zero border."""
    big = np.kron(images.reshape(-1, 8, 8), np.ones((3, 3)))
    return np.pad(big, ((0, 0), (2, 2), (2, 2))).reshape(len(images), 784)


def load_digits_28():
    """scikit-learn's bundled digits (1797 samples), upsampled to 28x28 and scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    return _upsample_to_28(digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)


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
    if len(raw) < 16 + count * rows * cols:
        raise ValueError(f"{images_path}: {len(raw) - 16} pixel bytes for {count} images of {rows}x{cols}")
    images = np.frombuffer(raw, dtype=np.uint8, offset=16, count=count * rows * cols)
    raw = read(labels_path)
    magic, label_count = struct.unpack(">II", raw[:8])
    if magic != 2049 or label_count != count:
        raise ValueError(f"{labels_path}: not an IDX label file for {count} images (magic {magic}, count {label_count})")
    labels = np.frombuffer(raw, dtype=np.uint8, offset=8, count=count)
    return (images.reshape(count, rows * cols) / 255.0).astype(np.float32), labels.astype(np.int64)


def load_dataset(idx=None):
    """``(x, y, source)``: the upsampled digits, or MNIST IDX files given as ``(images, labels)`` paths."""
    if idx is not None:
        images, labels = load_idx(*idx)
        return images, labels, "mnist-idx"
    images, labels = load_digits_28()
    return images, labels, "sklearn-digits-28x28"


def _relu(x):
    return np.maximum(x, 0)


def _softmax(a):
    a = a - a.max(axis=-1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=-1, keepdims=True)


class MLP:
    """ReLU MLP with a softmax output, He-initialised, with the fixed feedback matrices of FA or DFA.

    Parameters
    ----------
    widths : tuple of int
        Layer widths from the input to the classes.
    feedback : str
        ``"FA"``: ``B_i`` shaped like ``W_i`` (``m_i x n_i``); ``"DFA"``: ``B_i`` of
        ``n_L x n_i`` maps the output error to hidden layer ``i``; anything else: none.
    generator : numpy.random.Generator

    Attributes
    ----------
    weights, biases : list of numpy.ndarray
    feedback : list of numpy.ndarray or None
        Never updated by training.
    """

    def __init__(self, widths, feedback, generator):
        self.weights = [(generator.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32)
                        for m, n in zip(widths[:-1], widths[1:])]
        self.biases = [np.zeros(n, dtype=np.float32) for n in widths[1:]]
        out = widths[-1]
        self.feedback = None
        if feedback == "FA":
            self.feedback = [(generator.standard_normal(w.shape) * np.sqrt(1.0 / w.shape[1])).astype(np.float32)
                             for w in self.weights]
        elif feedback == "DFA":
            self.feedback = [(generator.standard_normal((out, n)) * np.sqrt(1.0 / out)).astype(np.float32)
                             for n in widths[1:-1]]

    def forward(self, x):
        """Activations of every layer, the input first."""
        activations = [x]
        for index, (w, b) in enumerate(zip(self.weights, self.biases)):
            a = activations[-1] @ w + b
            activations.append(_softmax(a) if index == len(self.weights) - 1 else _relu(a))
        return activations

    def predict(self, x):
        return self.forward(x)[-1].argmax(axis=1)

    def deltas(self, activations, error, method):
        """Pre-activation errors of every layer for a batch, by backpropagation, FA or DFA."""
        depth = len(self.weights)
        deltas = [None] * depth
        deltas[-1] = error
        for index in range(depth - 2, -1, -1):
            if method == "DFA":
                back = error @ self.feedback[index]
            elif method == "FA":
                back = deltas[index + 1] @ self.feedback[index + 1].T
            else:
                back = deltas[index + 1] @ self.weights[index + 1].T
            deltas[index] = back * (activations[index + 1] > 0)
        return deltas


class ContinuousPropagation:
    """The CP pipeline of one network: :meth:`tick` advances one time step (see the module docstring).

    Parameters
    ----------
    network : MLP
    rate : float
    """

    def __init__(self, network, rate):
        self.network = network
        self.rate = rate
        self.time = 0
        self.entered = 0
        self._forward_in = {}  # (layer, sample) -> input row of the layer
        self._stash = {}  # (layer, sample) -> (input of the layer, its output)
        self._backward_in = {}  # (layer, sample) -> (delta of the layer's pre-activation)
        self._targets = {}

    @property
    def in_flight(self):
        return len(self._targets)

    def tick(self, x=None, target=None):
        """One time step: backward passes with immediate updates, then forward passes; ``x`` enters layer 0."""
        weights, biases = self.network.weights, self.network.biases
        depth = len(weights)
        for layer in range(depth):
            sample = self.time - (2 * depth - 1 - layer)
            if (layer, sample) not in self._backward_in:
                continue
            delta = self._backward_in.pop((layer, sample))
            layer_input, _ = self._stash.pop((layer, sample))
            if layer > 0:
                _, below_output = self._stash[(layer - 1, sample)]
                self._backward_in[(layer - 1, sample)] = (delta @ weights[layer].T) * (below_output > 0)
            else:
                del self._targets[sample]
            weights[layer] -= np.outer(self.rate * layer_input, delta)
            biases[layer] -= self.rate * delta
        if x is not None:
            self._forward_in[(0, self.entered)] = x
            self._targets[self.entered] = target
            self.entered += 1
        for layer in range(depth):
            sample = self.time - layer
            if (layer, sample) not in self._forward_in:
                continue
            layer_input = self._forward_in.pop((layer, sample))
            a = layer_input @ weights[layer] + biases[layer]
            output = _softmax(a) if layer == depth - 1 else _relu(a)
            self._stash[(layer, sample)] = (layer_input, output)
            if layer == depth - 1:
                self._backward_in[(layer, sample)] = output - self._targets[sample]
            else:
                self._forward_in[(layer + 1, sample)] = output
        self.time += 1

    def drain(self):
        """Run bubbles until every sample has finished its backward pass."""
        while self.in_flight:
            self.tick()


def _one_hot(labels, classes):
    return np.eye(classes, dtype=np.float32)[labels]


def _minibatch_step(network, x, targets, method, rate):
    activations = network.forward(x)
    error = (activations[-1] - targets) / len(x)
    for index, delta in enumerate(network.deltas(activations, error, method)):
        network.weights[index] -= (rate * activations[index]).T @ delta
        network.biases[index] -= rate * delta.sum(axis=0)


def train(widths, method, x_train, labels_train, x_test, labels_test, *, epochs=5, batch=1, rate=None, seed=0,
          evaluations_per_epoch=1, network=None):
    """Train an MLP and return its test accuracy at evenly spaced points of training.

    Parameters
    ----------
    widths : tuple of int
        Layer widths from the input to the classes.
    method : str
        ``SGD``, ``MBGD``, ``FA``, ``DFA`` or ``CP``.
    batch : int
        Minibatch size (``MBGD``, ``FA``, ``DFA``; ``SGD`` and ``CP`` use 1).
    rate : float, optional
        Learning rate (default :func:`default_rate`).
    evaluations_per_epoch : int
        Test-set evaluations per epoch, after every ``ceil(K / evaluations_per_epoch)``
        samples (rounded up to whole minibatches); CP is evaluated with the weights of
        that moment, samples still in the pipeline included in the count.
    network : MLP, optional
        Train this network in place instead of a new one (it must match ``widths``).

    Returns
    -------
    dict
        ``samples`` (training samples consumed at each evaluation), ``accuracy``, ``rate``.
    """
    if method not in ("SGD", "MBGD", "FA", "DFA", "CP"):
        raise ValueError(f"unknown method {method!r}; allowed: SGD, MBGD, FA, DFA, CP")
    batch = 1 if method in ("SGD", "CP") else batch
    generator = np.random.default_rng(seed)
    network = MLP(widths, method, generator) if network is None else network
    rate = default_rate(method, batch) if rate is None else rate
    targets = _one_hot(labels_train, widths[-1])
    count = len(x_train)
    stride = -(-count // evaluations_per_epoch)
    stride = -(-stride // batch) * batch
    pipeline = ContinuousPropagation(network, rate) if method == "CP" else None
    samples, accuracy = [], []
    for epoch in range(epochs):
        order = generator.permutation(count)
        for start in range(0, count, stride):
            for first in range(start, min(start + stride, count), batch):
                rows = order[first:min(first + batch, start + stride, count)]
                if pipeline is not None:
                    pipeline.tick(x_train[rows[0]], targets[rows[0]])
                else:
                    _minibatch_step(network, x_train[rows], targets[rows], method, rate)
            if pipeline is not None and epoch == epochs - 1 and start + stride >= count:
                pipeline.drain()
            samples.append(epoch * count + min(start + stride, count))
            accuracy.append(float(np.mean(network.predict(x_test) == labels_test)))
    return {"samples": samples, "accuracy": accuracy, "rate": rate}
