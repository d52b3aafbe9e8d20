"""Training in 32-bit fixed point through the NeuroTrainer MAC's rounding (Sec. 3.3.2, Fig. 10).

A small MLP and a small Elman RNN learn the bundled digits data (``sklearn.datasets.load_digits``)
with plain SGD, once in float64 and once per MAC rounding variant in 32-bit fixed point
``Q(31-F).F``. Every multiply-accumulate of the forward pass, the backward pass and the weight
update runs through the arithmetic of the golden MAC model
(:mod:`trainforge.golden.neurotrainer.mac`): each product is added to the 32-bit accumulator
and the sum is rounded to F fraction bits (truncate, nearest, SR with a full-width generator per
lane, or SR-LO with the one shared 8-bit LFSR), then saturated.

All MACs of a run execute, in program order, on *one* ``nt_mac`` array of ``lanes`` lanes
(:class:`MacArray`): a matrix product ``C = A @ B`` is the row stream "for each row m of A, for each
tile of ``lanes`` columns of B, for k = 0 .. K-1: a = A[m, k] (broadcast), x = B[k, tile]" with
``clear`` on k = 0 and ``read`` on k = K-1. The random generators step once per row, so a run's
rounding is exactly what the hardware would produce for that row stream.

Operations that are not MACs run in float64 on the dequantized values and are requantized by
round-to-nearest with saturation (the LUT unit's tables are nearest-rounded): ReLU's and tanh's
values, tanh's derivative ``1 - h**2``, softmax and the loss gradient ``p - y``. ReLU's backward
pass is a mask (exact). The elementwise product ``dh * (1 - h**2)`` of the RNN's backward pass
is a multiply, so it runs on the MAC array too (one row per element, lane 0).
"""
import copy
import functools

import numpy as np

from trainforge.golden.neurotrainer.mac import sr_lo_words, xorshift_seeds
from trainforge.hw.neurotrainer.mac import NTMAC
from trainforge.progress import progress as progress_bar

__all__ = ["FIXED_ROUNDINGS", "ROUNDINGS", "SR_LO_PERIOD", "LATE_EPOCHS", "to_fixed", "xorshift_skip",
           "xorshift_stream", "MacArray", "FloatArithmetic", "load_data", "Mlp", "ElmanRnn", "NETWORKS", "train",
           "run_experiment"]

#: The MAC rounding variants trained in fixed point.
FIXED_ROUNDINGS = ("truncate", "nearest", "sr_full", "sr_lo")
#: Everything a run can be: float64 plus the fixed-point variants.
ROUNDINGS = ("float",) + FIXED_ROUNDINGS

_LOW32, _HIGH32 = -(1 << 31), (1 << 31) - 1
#: The SR-LO shift register is a function of the 8-bit LFSR state: it repeats every 255 rows.
SR_LO_PERIOD = 255


def to_fixed(values, frac_bits):
    """Round float values to the nearest ``Q(31-F).F`` word (int64), saturating to 32 bits."""
    scaled = np.rint(np.asarray(values, dtype=np.float64) * float(1 << frac_bits))
    return np.clip(scaled, _LOW32, _HIGH32).astype(np.int64)


def _xorshift_step32(state):
    """One xorshift32 (13, 17, 5) step of a uint32 array (the golden ``xorshift_step`` on native 32-bit words)."""
    state = state ^ (state << np.uint32(13))
    state = state ^ (state >> np.uint32(17))
    return state ^ (state << np.uint32(5))


def _apply_linear(images, states):
    """The GF(2)-linear map with basis images ``images`` (32 uint32) applied to every word of ``states``."""
    bits = (states[..., None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
    return np.bitwise_xor.reduce(np.where(bits == 1, images, np.uint32(0)), axis=-1)


@functools.lru_cache(maxsize=256)
def _xorshift_jump(steps):
    """Byte tables of ``steps`` xorshift32 steps: the state after them is ``XOR_p tables[p][byte p]``.

    xorshift is linear over GF(2): the images of the 32 basis states define the map, found by
    repeated squaring; each table holds the images of the 256 values of one state byte.
    """
    images = np.uint32(1) << np.arange(32, dtype=np.uint32)  # identity
    power = _xorshift_step32(images)  # the map of 2**j steps, squared as j grows
    while steps:
        if steps & 1:
            images = _apply_linear(power, images)
        steps >>= 1
        if steps:
            power = _apply_linear(power, power)
    values = np.arange(256, dtype=np.uint32)
    return np.stack([_apply_linear(np.concatenate([images[8 * byte:8 * byte + 8], np.zeros(24, np.uint32)]),
                                   values) for byte in range(4)])


def _apply_jump(tables, states):
    """The states after the jump whose byte tables are ``tables``."""
    result = tables[0][states & np.uint32(0xFF)]
    for byte in range(1, 4):
        result = result ^ tables[byte][(states >> np.uint32(8 * byte)) & np.uint32(0xFF)]
    return result


#: Rows each chunk of :func:`xorshift_stream` steps through one by one.
_CHUNK_ROWS = 16


def xorshift_skip(states, count):
    """The xorshift32 states ``count`` steps on (uint64 array in, uint64 array out)."""
    states = np.asarray(states, dtype=np.uint32)
    return (_apply_jump(_xorshift_jump(count), states) if count else states).astype(np.uint64)


def xorshift_stream(states, count):
    """The next ``count`` words of each lane's xorshift32 generator, and the states after them.

    Equal to :func:`~trainforge.golden.neurotrainer.mac.xorshift_words` continued from
    ``states``, but vectorised: the stream is cut into chunks of 64 rows whose start states
    are found by jump-aheads (xorshift is GF(2)-linear; the number of starts doubles per
    jump), and then all chunks step together.

    Parameters
    ----------
    states : ndarray of uint64, shape (lanes,)
        The generators' current 32-bit states (the words the next row sees).
    count : int
        Rows to generate.

    Returns
    -------
    words : ndarray of uint32, shape (count, lanes)
    states : ndarray of uint64, shape (lanes,)
    """
    states = np.asarray(states, dtype=np.uint32)
    if count == 0:
        return np.empty((0, states.size), dtype=np.uint32), states.astype(np.uint64)
    chunk = min(count, _CHUNK_ROWS)
    chunks = -(-count // chunk)
    starts = states[None, :]
    span = 1
    while span < chunks:  # doubling: starts[i + span] = jump(chunk * span) of starts[i]
        starts = np.concatenate([starts, _apply_jump(_xorshift_jump(chunk * span), starts)])
        span *= 2
    current = starts[:chunks]
    words = np.empty((chunk, chunks, states.size), dtype=np.uint32)
    for step in range(chunk):
        words[step] = current
        current = _xorshift_step32(current)
    words = words.transpose(1, 0, 2).reshape(chunks * chunk, states.size)
    final = current[-1] if count == chunks * chunk else words[count]
    return words[:count], final.astype(np.uint64)


class MacArray:
    """One ``nt_mac`` array in 32-bit mode with SR on, executing a program of MAC rows in order.

    Parameters
    ----------
    rounding : str
        One of :data:`FIXED_ROUNDINGS` (the ``nt_mac`` ``rounding`` parameter). The parameters
        are checked by ``NTMAC.PARAMS`` (``ParameterError`` naming the parameter if invalid).
    frac_bits : int
        F, the fraction bits of the 32-bit format (the ``nt_mac`` ``frac_bits`` parameter).
    lanes : int
        k, the MAC lanes.
    seed : int
        The ``nt_mac`` ``seed`` (1..255 for ``sr_lo``).

    Attributes
    ----------
    rows : int
        Rows executed so far (the random generators have stepped this many times).
    """

    def __init__(self, rounding, frac_bits=16, lanes=32, seed=0xA5):
        NTMAC.PARAMS.resolve(rounding=rounding, frac_bits=frac_bits, lanes=lanes, seed=seed)  # ParameterError if invalid
        self.rounding, self.frac_bits, self.lanes, self.seed = rounding, frac_bits, lanes, seed
        self.rows = 0
        self.one = 1 << frac_bits
        if rounding == "sr_lo":
            self._lo_words = sr_lo_words(seed, SR_LO_PERIOD).astype(np.int64)
        if rounding == "sr_full":
            self._states = xorshift_seeds(seed, lanes)

    def fork(self):
        """An independent copy (same state) that can run other rows without disturbing this one."""
        return copy.deepcopy(self)

    def _offsets(self, groups, depth, used_lanes=None):
        """Rounding offsets of ``groups * depth`` rows, shape (groups, depth, lanes or 1); advances the generators.

        With ``used_lanes``, only the first ``used_lanes`` lanes' per-lane words are generated
        (the other generators still step ``groups * depth`` times).
        """
        count = groups * depth
        frac = self.frac_bits
        if self.rounding == "truncate" or frac == 0:
            offsets = np.zeros((groups, depth, 1), dtype=np.int64)
        elif self.rounding == "nearest":
            offsets = np.full((groups, depth, 1), 1 << (frac - 1), dtype=np.int64)
        elif self.rounding == "sr_lo":
            index = (self.rows + np.arange(count)) % SR_LO_PERIOD
            offsets = (self._lo_words[index] & ((1 << frac) - 1)).reshape(groups, depth, 1)
        else:
            used = self.lanes if used_lanes is None else used_lanes
            words, used_states = xorshift_stream(self._states[:used], count)
            self._states = np.concatenate([used_states, xorshift_skip(self._states[used:], count)])
            offsets = (words & np.uint32((1 << frac) - 1)).astype(np.int64).reshape(groups, depth, used)
        self.rows += count
        return offsets

    def matmul(self, a, b):
        """``a @ b`` in fixed point with the MAC's rounding after every accumulation.

        Row stream: for m in rows of ``a``, for each tile of ``lanes`` columns of ``b``, for k:
        ``a[m, k]`` broadcast times ``b[k, tile]``; the unused lanes of a last partial tile
        still step their generators, as in the hardware.

        Since ``(y << F) + p + r >> F == y + (p + r >> F)`` for an integer accumulator ``y``,
        every product is rounded on its own and the rounded terms are summed; only if a
        partial sum leaves the 32-bit range is the saturating accumulation replayed term by term.

        Parameters
        ----------
        a : ndarray of int64, shape (M, K)
        b : ndarray of int64, shape (K, N)
            32-bit words (signed) with F fraction bits.

        Returns
        -------
        ndarray of int64, shape (M, N)
        """
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        rows, depth = a.shape
        columns = b.shape[1]
        tiles = -(-columns // self.lanes)
        offsets = self._offsets(rows * tiles, depth).reshape(rows, tiles, depth, -1)
        offsets = np.broadcast_to(offsets, (rows, tiles, depth, self.lanes))
        offsets = offsets.transpose(0, 2, 1, 3).reshape(rows, depth, tiles * self.lanes)[:, :, :columns]
        terms = (a[:, :, None] * b[None, :, :] + offsets) >> np.int64(self.frac_bits)
        partial = np.cumsum(terms, axis=1)
        if partial.min(initial=0) >= _LOW32 and partial.max(initial=0) <= _HIGH32:
            return partial[:, -1, :] if depth else np.zeros((rows, columns), dtype=np.int64)
        accumulator = np.zeros((rows, columns), dtype=np.int64)
        for k in range(depth):
            accumulator = np.clip(accumulator + terms[:, k, :], _LOW32, _HIGH32)
        return accumulator

    def multiply(self, a, b):
        """Elementwise ``a * b``: one row per element (``a`` broadcast, ``b`` in lane 0), rounded."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        offsets = self._offsets(a.size, 1, used_lanes=1)[:, 0, 0]
        terms = (a.ravel() * b.ravel() + offsets) >> np.int64(self.frac_bits)
        return np.clip(terms, _LOW32, _HIGH32).reshape(a.shape)

    def axpy(self, scale, x, y):
        """``y + scale * x`` as two MAC rows per tile of weights: ``1.0 * y`` (exact), then ``scale * x``."""
        a = np.array([[self.one, scale]], dtype=np.int64)
        b = np.stack([np.asarray(y, dtype=np.int64).ravel(), np.asarray(x, dtype=np.int64).ravel()])
        return self.matmul(a, b).reshape(np.shape(y))

    def constant(self, values):
        """Float values as words (round to nearest, saturate)."""
        return to_fixed(values, self.frac_bits)

    def to_float(self, values):
        """Words as float64."""
        return np.asarray(values, dtype=np.float64) / float(self.one)

    def apply(self, function, values):
        """A non-MAC elementwise function: float64 on the dequantized values, requantized to nearest."""
        return self.constant(function(self.to_float(values)))


class FloatArithmetic:
    """The float64 reference with the same interface as :class:`MacArray`."""

    rounding = "float"
    one = 1.0

    def fork(self):
        """Itself: float arithmetic has no state."""
        return self

    @staticmethod
    def matmul(a, b):
        """``a @ b``."""
        return np.asarray(a) @ np.asarray(b)

    @staticmethod
    def multiply(a, b):
        """``a * b``."""
        return np.asarray(a) * np.asarray(b)

    @staticmethod
    def axpy(scale, x, y):
        """``y + scale * x``."""
        return y + scale * x

    @staticmethod
    def constant(values):
        """``values`` as float64."""
        return np.asarray(values, dtype=np.float64)

    to_float = constant

    @staticmethod
    def apply(function, values):
        """``function(values)``."""
        return function(values)


def load_data(test_fraction=0.25, split_seed=0):
    """The digits data: pixels scaled to [0, 1], a fixed stratified-by-shuffle split (independent of the run seeds).

    Returns
    -------
    train_x, train_y, test_x, test_y : ndarray
        Images (n, 64) float64 and labels (n,) int.
    """
    from sklearn.datasets import load_digits
    digits = load_digits()
    order = np.random.default_rng(split_seed).permutation(len(digits.target))
    images, labels = digits.data[order] / 16.0, digits.target[order]
    cut = int(round(len(labels) * (1.0 - test_fraction)))
    return images[:cut], labels[:cut], images[cut:], labels[cut:]


def _softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=1, keepdims=True)


def _with_ones(arith, values):
    """``[values, 1]``: the bias enters each product as one more accumulation row (1.0 times the bias: exact)."""
    return np.concatenate([values, np.full((values.shape[0], 1), arith.one, dtype=values.dtype)], axis=1)


def _relu(values):
    return np.maximum(values, 0.0)


def _tanh_grad(h):
    return 1.0 - h * h


class Mlp:
    """64-``hidden``-10 perceptron, ReLU, softmax cross-entropy; biases are the last row of each weight matrix."""

    name = "mlp"

    def __init__(self, hidden=32):
        self.hidden = hidden

    def init_weights(self, generator):
        """He-normal float weights, zero biases."""
        w1 = np.vstack([generator.normal(0.0, np.sqrt(2.0 / 64), (64, self.hidden)), np.zeros((1, self.hidden))])
        w2 = np.vstack([generator.normal(0.0, np.sqrt(2.0 / self.hidden), (self.hidden, 10)), np.zeros((1, 10))])
        return [w1, w2]

    def forward(self, arith, weights, images):
        """Logits and the saved activations."""
        inputs = _with_ones(arith, images)
        hidden = arith.apply(_relu, arith.matmul(inputs, weights[0]))
        hidden_ones = _with_ones(arith, hidden)
        return arith.matmul(hidden_ones, weights[1]), (inputs, hidden, hidden_ones)

    def gradients(self, arith, weights, saved, logits_grad):
        """Summed (not averaged) weight gradients over the batch."""
        inputs, hidden, hidden_ones = saved
        grad2 = arith.matmul(hidden_ones.T, logits_grad)
        hidden_grad = arith.matmul(logits_grad, weights[1][:-1].T)
        hidden_grad = np.where(hidden > 0, hidden_grad, 0)
        return [arith.matmul(inputs.T, hidden_grad), grad2]


class ElmanRnn:
    """Elman RNN over the 8 rows of a digit (8 steps of 8 pixels), tanh, ``hidden`` units, softmax on the last state.

    Weights: ``[W_x; W_h; b]`` (8 + hidden + 1, hidden) and ``[W_o; b_o]`` (hidden + 1, 10).
    """

    name = "rnn"
    steps = 8

    def __init__(self, hidden=32):
        self.hidden = hidden

    def init_weights(self, generator):
        """Glorot-like input weights, an orthogonal recurrent matrix scaled by 0.9, zero biases."""
        w_x = generator.normal(0.0, np.sqrt(1.0 / 8), (8, self.hidden))
        w_h = 0.9 * np.linalg.qr(generator.normal(size=(self.hidden, self.hidden)))[0]
        w_o = generator.normal(0.0, np.sqrt(1.0 / self.hidden), (self.hidden, 10))
        return [np.vstack([w_x, w_h, np.zeros((1, self.hidden))]), np.vstack([w_o, np.zeros((1, 10))])]

    def forward(self, arith, weights, images):
        """Logits and the saved per-step inputs and states."""
        frames = images.reshape(-1, self.steps, 8)
        state = arith.constant(np.zeros((frames.shape[0], self.hidden)))
        concatenated, states = [], []
        for step in range(self.steps):
            inputs = _with_ones(arith, np.concatenate([frames[:, step], state], axis=1))
            state = arith.apply(np.tanh, arith.matmul(inputs, weights[0]))
            concatenated.append(inputs)
            states.append(state)
        state_ones = _with_ones(arith, state)
        return arith.matmul(state_ones, weights[1]), (concatenated, states, state_ones)

    def gradients(self, arith, weights, saved, logits_grad):
        """Back-propagation through time; the recurrent gradient sums over steps in one accumulation."""
        concatenated, states, state_ones = saved
        grad_out = arith.matmul(state_ones.T, logits_grad)
        state_grad = arith.matmul(logits_grad, weights[1][:-1].T)
        recurrent_t = weights[0][8:8 + self.hidden].T
        pre_grads = []
        for step in reversed(range(self.steps)):
            pre_grad = arith.multiply(state_grad, arith.apply(_tanh_grad, states[step]))
            pre_grads.append(pre_grad)
            if step:
                state_grad = arith.matmul(pre_grad, recurrent_t)
        pre_grads.reverse()
        grad_in = arith.matmul(np.concatenate(concatenated, axis=0).T, np.concatenate(pre_grads, axis=0))
        return [grad_in, grad_out]


#: Epochs (the last ones) averaged into ``late_accuracy_mean``.
LATE_EPOCHS = 3

#: The networks by name.
NETWORKS = {"mlp": Mlp, "rnn": ElmanRnn}


def _accuracy(network, arith, weights, images, labels, batch=256):
    correct = 0
    for start in range(0, len(labels), batch):
        logits, _ = network.forward(arith, weights, arith.constant(images[start:start + batch]))
        correct += int((np.argmax(arith.to_float(logits), axis=1) == labels[start:start + batch]).sum())
    return correct / len(labels)


def train(network, rounding, data, *, epochs=10, seed=0, frac_bits=16, learning_rate=0.25, batch=32, lanes=32):
    """Train one network with one arithmetic; returns the test accuracy after every epoch.

    The initial weights and the batch order depend only on ``seed`` (every rounding sees the
    same ones). The update is ``W <- W + (-learning_rate / batch) * G`` with ``G`` the gradient
    summed over the batch: the scale ``-learning_rate / batch`` is the MAC's broadcast operand,
    so it is itself rounded to the Q format. Test accuracy is measured on a fork of the array,
    so evaluating does not change the training's random stream.

    Parameters
    ----------
    network : Mlp or ElmanRnn
    rounding : str
        ``"float"`` or one of :data:`FIXED_ROUNDINGS`.
    data : tuple
        :func:`load_data`'s result.
    epochs, seed, frac_bits, learning_rate, batch, lanes :
        Run settings; ``frac_bits`` and ``lanes`` are the ``nt_mac`` parameters (ignored for float).

    Returns
    -------
    dict
        ``accuracy`` (after epochs 0 .. ``epochs``; entry 0 is the initial weights), ``loss``
        (mean training cross-entropy per epoch, from the arithmetic's own logits),
        ``scale`` (the update scale as actually represented), ``weights`` (the final weights as float64).
    """
    train_x, train_y, test_x, test_y = data
    generator = np.random.default_rng(seed)
    initial = network.init_weights(generator)
    orders = [generator.permutation(len(train_y)) for _ in range(epochs)]
    if rounding == "float":
        arith = FloatArithmetic()
    else:
        arith = MacArray(rounding, frac_bits=frac_bits, lanes=lanes, seed=1 + (seed * 37 + 11) % 255)
    weights = [arith.constant(w) for w in initial]
    scale = arith.constant(-learning_rate / batch)
    onehot = np.eye(10)[train_y]
    accuracy = [_accuracy(network, arith.fork(), weights, test_x, test_y)]
    losses = []
    for order in orders:
        loss_sum = 0.0
        for start in range(0, len(order), batch):
            chosen = order[start:start + batch]
            logits, saved = network.forward(arith, weights, arith.constant(train_x[chosen]))
            probabilities = _softmax(arith.to_float(logits))
            loss_sum += float(-np.log(np.maximum(probabilities[np.arange(len(chosen)), train_y[chosen]], 1e-12)).sum())
            logits_grad = arith.constant(probabilities - onehot[chosen])
            gradients = network.gradients(arith, weights, saved, logits_grad)
            weights = [arith.axpy(scale, gradient, weight) for gradient, weight in zip(gradients, weights)]
        losses.append(loss_sum / len(order))
        accuracy.append(_accuracy(network, arith.fork(), weights, test_x, test_y))
    return {"accuracy": accuracy, "loss": losses, "scale": float(arith.to_float(scale)),
            "weights": [arith.to_float(weight) for weight in weights]}


def run_experiment(*, networks=("mlp", "rnn"), roundings=ROUNDINGS, frac_bits=(16,), epochs=10, seeds=3,
                   learning_rate=0.25, batch=32, lanes=32, hidden=32, progress=None):
    """Every (network, Q format, rounding, seed) run; summary statistics of the final test accuracy.

    Returns
    -------
    dict
        ``settings`` and ``results``: one entry per (network, frac_bits, rounding) with the
        per-seed curves, the final accuracy's mean and standard deviation (ddof = 0), the same
        for each seed's mean over the last :data:`LATE_EPOCHS` epochs (less sensitive to the
        epoch-to-epoch fluctuation of small-batch SGD), and the mean curve. Float runs are
        listed once per network with ``frac_bits = None``.
    """
    data = load_data()
    results = []
    for name in networks:
        network = NETWORKS[name](hidden=hidden)
        configurations = [("float", None)] if "float" in roundings else []
        configurations += [(rounding, bits) for bits in frac_bits for rounding in roundings if rounding != "float"]
        for rounding, bits in progress_bar(configurations, f"training {name}", unit="configuration"):
            runs = [train(network, rounding, data, epochs=epochs, seed=seed, frac_bits=bits or 0,
                          learning_rate=learning_rate, batch=batch, lanes=lanes) for seed in range(seeds)]
            final = np.array([run["accuracy"][-1] for run in runs])
            late = np.array([np.mean(run["accuracy"][-LATE_EPOCHS:]) for run in runs])
            results.append({
                "network": name, "rounding": rounding, "frac_bits": bits,
                "final_accuracy_mean": float(final.mean()), "final_accuracy_std": float(final.std()),
                "final_accuracy": final.tolist(),
                "late_accuracy_mean": float(late.mean()), "late_accuracy_std": float(late.std()),
                "mean_curve": np.mean([run["accuracy"] for run in runs], axis=0).tolist(),
                "curves": [run["accuracy"] for run in runs],
                "final_loss_mean": float(np.mean([run["loss"][-1] for run in runs])) if epochs else None,
                "update_scale": runs[0]["scale"],
            })
            if progress:
                progress(results[-1])
    settings = {"networks": list(networks), "roundings": list(roundings), "frac_bits": list(frac_bits),
                "epochs": epochs, "seeds": seeds, "learning_rate": learning_rate, "batch": batch, "lanes": lanes,
                "hidden": hidden, "train_samples": len(data[1]), "test_samples": len(data[3])}
    return {"settings": settings, "results": results}
