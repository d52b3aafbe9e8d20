"""Real tensors: a small ReLU CNN trained in numpy on scikit-learn's digits, traced for the TensorDash layer model.

Network (8 x 8 grey images, pixel values / 16):
conv1 3x3 1->8 pad 1, ReLU; conv2 3x3 8->16 pad 1, ReLU; 2x2 max-pool;
fc1 256->64, ReLU; fc2 64->10; softmax cross-entropy. Plain SGD with
momentum on mini-batches. The convolutions themselves are computed through
:func:`trainforge.golden.tensordash.layer.lower` (the same lowering the tile
runs), so the traced operands are exactly those of the training step.

Tracing (as the paper's Section IV, "Collecting Traces"): in every epoch
one randomly chosen mini-batch is traced: per layer its input activations
``A``, weights ``W`` and output gradients ``G`` (the gradient of the layer's
pre-activation output, so the ReLU and max-pool zeros show in it). The first
layer has no ``GxW`` (no input gradient is needed), as in the paper.

The network is :data:`DIGITS_CNN`, in the common network format
(:mod:`trainforge.spec.network`); :func:`layers_from_network` converts a
network to the layer model's weight shapes (it takes ungrouped ``conv`` and
``fc`` layers). The training loop itself is written for this one network
(its forward and backward passes are spelled out), so it trains no other.
"""
import numpy as np

from trainforge.errors import ConfigError
from trainforge.golden.tensordash.layer import OPERATIONS, layer_cycles, lower
from trainforge.outputs import save_figure
from trainforge.spec import network as network_format
from trainforge.progress import progress

__all__ = ["DIGITS_CNN", "layers_from_network", "LAYERS", "load_digits_data", "train_and_trace", "layer_speedups", "training_report", "plot"]

#: The traced CNN in the common network format.
DIGITS_CNN = network_format.from_dict({"name": "digits-cnn", "layers": [
    {"name": "conv1", "kind": "conv", "in_channels": 1, "out_channels": 8, "kernel": 3, "in_height": 8,
     "in_width": 8, "padding": 1, "aux": ["bias", "relu"]},
    {"name": "conv2", "kind": "conv", "in_channels": 8, "out_channels": 16, "kernel": 3, "in_height": 8,
     "in_width": 8, "padding": 1, "aux": ["bias", "relu"], "pool": "max", "pool_kernel": 2},
    {"name": "fc1", "kind": "fc", "in_channels": 256, "out_channels": 64, "aux": ["bias", "relu"]},
    {"name": "fc2", "kind": "fc", "in_channels": 64, "out_channels": 10, "aux": ["bias", "softmax"]},
]}, "tensordash digits-cnn")


def layers_from_network(description, source=None):
    """``(name, kind, weight shape)`` of every layer: ``(F, C, K, K)`` for conv, ``(outputs, inputs)`` for fc.

    Raises
    ------
    trainforge.errors.ConfigError
        For a layer the TensorDash layer model cannot take (``lstm``, grouped,
        over timesteps, or not reading the previous layer: ``input_from``,
        ``residual_from``, ``concat_from``); one line naming it.
    """
    source = source or f"network {description.name!r}"
    result = []
    for index, layer in enumerate(description.layers):
        where = f"{source}: layers[{index}]"
        if layer.kind not in ("conv", "fc"):
            raise ConfigError(f"{where}.kind: the TensorDash layer model takes conv and fc layers, got "
                              f"{layer.kind} (layer {layer.name!r})")
        for key in ("groups", "timesteps"):
            if getattr(layer, key) != 1:
                raise ConfigError(f"{where}.{key}: the TensorDash layer model takes 1, got {getattr(layer, key)} "
                                  f"(layer {layer.name!r})")
        network_format.require_chain_layer(layer, where, "the TensorDash layer model")
        shape = ((layer.out_channels, layer.in_channels, layer.kernel, layer.kernel) if layer.kind == "conv"
                 else (layer.out_channels, layer.in_channels))
        result.append((layer.name, layer.kind, shape))
    return tuple(result)


#: (name, kind, weight shape) of the network's layers with weights.
LAYERS = layers_from_network(DIGITS_CNN)


def load_digits_data(seed=0, test_fraction=0.25):
    """Digits as (N, 1, 8, 8) floats in [0, 1] and labels, split into train and test by ``seed``."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.images / 16.0)[:, None].astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(images))
    cut = int(len(images) * (1 - test_fraction))
    train, test = order[:cut], order[cut:]
    return images[train], digits.target[train], images[test], digits.target[test]


def _conv(x, weights, bias):
    lowered = lower("AxW", x, weights, np.zeros((x.shape[0], weights.shape[0]) + x.shape[2:], x.dtype), 1, 1)
    return lowered.fold(lowered.b @ lowered.a.T) + bias[None, :, None, None]


def _conv_backward(x, weights, grad, need_input):
    dw = lower("GxA", x, weights, grad, 1, 1)
    dweights = dw.fold(dw.b @ dw.a.T)
    dx = None
    if need_input:
        lowered = lower("GxW", x, weights, grad, 1, 1)
        dx = lowered.fold(lowered.b @ lowered.a.T)
    return dweights, grad.sum(axis=(0, 2, 3)), dx


class _Network:
    """Parameters, forward pass with its cache, backward pass returning gradients and the traced tensors."""

    def __init__(self, generator):
        self.params = {}
        for name, _, shape in LAYERS:
            fan_in = int(np.prod(shape[1:]))
            self.params[name] = [(generator.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32),
                                 np.zeros(shape[0], dtype=np.float32)]

    def forward(self, x):
        cache = {"conv1": x}
        h1 = np.maximum(_conv(x, *self.params["conv1"]), 0)
        cache["conv2"] = h1
        z2 = _conv(h1, *self.params["conv2"])
        h2 = np.maximum(z2, 0)
        n = len(x)
        blocks = h2.reshape(n, 16, 4, 2, 4, 2)
        pooled = blocks.max(axis=(3, 5))
        # One winner per pooling window (the first maximum), as a max-pool backward routes its gradient.
        flat = blocks.transpose(0, 1, 2, 4, 3, 5).reshape(n, 16, 4, 4, 4)
        winner = np.zeros_like(flat, dtype=bool)
        np.put_along_axis(winner, flat.argmax(axis=-1)[..., None], True, axis=-1)
        cache["fc1"] = pooled.reshape(n, 256)
        z3 = cache["fc1"] @ self.params["fc1"][0].T + self.params["fc1"][1]
        cache["fc2"] = np.maximum(z3, 0)
        logits = cache["fc2"] @ self.params["fc2"][0].T + self.params["fc2"][1]
        cache.update(z2=z2, z3=z3, winner=winner)
        return logits, cache

    def backward(self, logits, labels, cache):
        """Gradients of the mean cross-entropy, and per layer the output gradient ``G``."""
        n = len(labels)
        probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        g4 = probabilities.copy()
        g4[np.arange(n), labels] -= 1
        g4 /= n
        outputs, grads = {"fc2": g4}, {}
        grads["fc2"] = [g4.T @ cache["fc2"], g4.sum(axis=0)]
        g3 = (g4 @ self.params["fc2"][0]) * (cache["z3"] > 0)
        outputs["fc1"] = g3
        grads["fc1"] = [g3.T @ cache["fc1"], g3.sum(axis=0)]
        g_pooled = (g3 @ self.params["fc1"][0]).reshape(n, 16, 4, 4, 1)
        routed = (cache["winner"] * g_pooled).reshape(n, 16, 4, 4, 2, 2).transpose(0, 1, 2, 4, 3, 5)
        g2 = routed.reshape(n, 16, 8, 8) * (cache["z2"] > 0)
        outputs["conv2"] = g2
        dw2, db2, dh1 = _conv_backward(cache["conv2"], self.params["conv2"][0], g2, need_input=True)
        grads["conv2"] = [dw2, db2]
        g1 = dh1 * (cache["conv2"] > 0)
        outputs["conv1"] = g1
        dw1, db1, _ = _conv_backward(cache["conv1"], self.params["conv1"][0], g1, need_input=False)
        grads["conv1"] = [dw1, db1]
        return grads, outputs


def train_and_trace(epochs=6, batch=32, learning_rate=0.05, momentum=0.9, seed=0):
    """Train the CNN and trace one random mini-batch per epoch.

    Returns
    -------
    dict
        ``traces``: per epoch a dict layer -> ``{"A", "W", "G"}`` arrays;
        ``accuracy``: test accuracy after each epoch; ``loss``: mean training loss per epoch.
    """
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):  # small matrices: threads only add overhead on a shared machine
        return _train_and_trace(epochs, batch, learning_rate, momentum, seed)


def _train_and_trace(epochs, batch, learning_rate, momentum, seed):
    generator = np.random.default_rng(seed)
    train_x, train_y, test_x, test_y = load_digits_data(seed)
    network = _Network(generator)
    velocity = {name: [np.zeros_like(p) for p in params] for name, params in network.params.items()}
    traces, accuracy, losses = [], [], []
    steps = len(train_x) // batch
    for _ in progress(range(epochs), "training epochs", unit="epoch"):
        order = generator.permutation(len(train_x))
        traced_step = int(generator.integers(steps))
        total_loss = 0.0
        for step in range(steps):
            index = order[step * batch:(step + 1) * batch]
            logits, cache = network.forward(train_x[index])
            shifted = logits - logits.max(axis=1, keepdims=True)
            total_loss += float(np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(batch), train_y[index]]))
            grads, outputs = network.backward(logits, train_y[index], cache)
            if step == traced_step:
                traces.append({name: {"A": cache[name], "W": network.params[name][0].copy(), "G": outputs[name]}
                               for name, _, _ in LAYERS})
            for name in network.params:
                for k in range(2):
                    velocity[name][k] = momentum * velocity[name][k] - learning_rate * grads[name][k]
                    network.params[name][k] += velocity[name][k]
        losses.append(total_loss / steps)
        logits, _ = network.forward(test_x)
        accuracy.append(float(np.mean(logits.argmax(axis=1) == test_y)))
    return {"traces": traces, "accuracy": accuracy, "loss": losses}


def layer_speedups(trace, **tile):
    """Cycles of the three operations of every traced layer on the tile; ``tile``: :func:`layer_cycles` options."""
    rows = []
    for index, (name, kind, _) in enumerate(LAYERS):
        tensors = trace[name]
        padding = 1 if kind == "conv" else 0
        for operation in OPERATIONS:
            if operation == "GxW" and index == 0:
                continue
            lowered = lower(operation, tensors["A"], tensors["W"], tensors["G"], 1, padding)
            cycles = layer_cycles(lowered, **tile)
            rows.append({"layer": name, "operation": operation, "targeted": lowered.targeted,
                         "dense_cycles": cycles.dense, "tensordash_cycles": cycles.tensordash,
                         "speedup": cycles.speedup, "potential": cycles.potential,
                         "sparsity": 1 - cycles.effectual_fraction,
                         "ideal": min(tile.get("depth", 4), cycles.potential)})
    return rows


def _ratio(rows):
    return sum(r["dense_cycles"] for r in rows) / sum(r["tensordash_cycles"] for r in rows)


def training_report(epochs=6, batch=32, seed=0, **tile):
    """Figs. 8 and 9 analogues from the traced training run (JSON-able dict)."""
    run = train_and_trace(epochs=epochs, batch=batch, seed=seed)
    per_epoch = [layer_speedups(trace, **tile) for trace in run["traces"]]
    keys = [(r["layer"], r["operation"]) for r in per_epoch[0]]
    by_layer = []
    for layer, operation in keys:
        rows = [r for epoch in per_epoch for r in epoch if (r["layer"], r["operation"]) == (layer, operation)]
        by_layer.append({"layer": layer, "operation": operation, "speedup": _ratio(rows),
                         "potential": float(np.mean([r["potential"] for r in rows])),
                         "ideal": float(np.mean([r["ideal"] for r in rows])),
                         "sparsity": float(np.mean([r["sparsity"] for r in rows])),
                         "targeted": sorted({r["targeted"] for r in rows})})
    by_operation = {op: _ratio([r for epoch in per_epoch for r in epoch if r["operation"] == op])
                    for op in OPERATIONS}
    epochs_rows = [{"epoch": k + 1, "accuracy": run["accuracy"][k], "loss": run["loss"][k],
                    "speedup": _ratio(rows), **{op: _ratio([r for r in rows if r["operation"] == op])
                                                for op in OPERATIONS}}
                   for k, rows in enumerate(per_epoch)]
    return {
        "network": "digits CNN: conv3x3 1->8, conv3x3 8->16, maxpool2, fc 256->64, fc 64->10, ReLU",
        "tile": {"rows": 4, "cols": 4, "lanes": 4, "depth": 4, **tile},
        "batch": batch, "seed": seed,
        "overall_speedup": _ratio([r for epoch in per_epoch for r in epoch]),
        "by_operation": by_operation,
        "by_layer": by_layer,
        "by_epoch": epochs_rows,
        "per_epoch_layers": per_epoch,
        "paper": {"fig8_average_speedup": 1.95, "fig1_average_potential": 2.6},
    }


def plot(report, directory):
    """Fig. 8 analogue (per layer and operation) and Fig. 9 analogue (per epoch) PNGs; returns the file names.

    The paper's Fig. 8 gives, in its text, only the average over its models (1.95x), drawn
    as a line; its Fig. 9 gives no numbers in the text (stated in the caption).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    directory.mkdir(parents=True, exist_ok=True)
    paper = report["paper"]["fig8_average_speedup"]
    tile = report["tile"]
    shape = f"{tile['rows']}x{tile['cols']} tile, {tile['lanes']} lanes, {tile['depth']} deep"
    figure, axes = plt.subplots(figsize=(9, 5))
    rows = report["by_layer"]
    labels = [f"{r['layer']}\n{r['operation']}" for r in rows]
    x = np.arange(len(rows))
    axes.bar(x - 0.2, [r["speedup"] for r in rows], 0.4, label=f"ours: TensorDash {shape}")
    axes.bar(x + 0.2, [r["potential"] for r in rows], 0.4, label="ours: potential (all / non-zero MACs)")
    axes.axhline(tile["depth"], color="k", linestyle=":", label=f"depth bound {tile['depth']}")
    axes.axhline(paper, color="tab:red", linestyle="--",
                 label=f"paper Fig. 8: {paper}x, average over its models (text)")
    axes.set_xticks(x, labels, fontsize=7)
    axes.set_xlabel("layer and operation of the digits CNN")
    axes.set_ylabel("speedup over the dense tile (x)")
    axes.set_title(f"TensorDash Fig. 8 analogue: speedup per layer and operation, digits CNN"
                   f" (overall {report['overall_speedup']:.2f}x)", fontsize=10)
    axes.legend(fontsize=7)
    figure.text(0.01, 0.01, "ours: real ReLU CNN trained on the digits set, cycles summed over the epochs; the paper"
                " reports ImageNet-class models and quotes only their average (1.95x) in its text", fontsize=7)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    save_figure(figure, directory / "training_layers.png")
    figure, axes = plt.subplots(figsize=(10, 5))
    epochs = [r["epoch"] for r in report["by_epoch"]]
    for key in ("speedup",) + OPERATIONS:
        axes.plot(epochs, [r[key] for r in report["by_epoch"]], marker="o",
                  label=f"ours: {key}" if key != "speedup" else "ours: all operations")
    axes.axhline(paper, color="k", linestyle="--", linewidth=1,
                 label=f"paper Fig. 8 average {paper}x (no per-epoch numbers in the text)")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("training epoch")
    axes.set_ylabel("speedup over the dense tile (x)")
    axes.set_title(f"TensorDash Fig. 9 analogue: speedup as training progresses ({shape})", fontsize=10)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.grid(alpha=0.3)
    figure.text(0.01, 0.01, "ours: one traced batch per epoch of the digits CNN; the paper's Fig. 9 gives no numbers"
                " in its text, only that the speedup is stable through training", fontsize=7, wrap=True)
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    save_figure(figure, directory / "training_epochs.png")
    plt.close("all")
    return ["training_layers.png", "training_epochs.png"]
