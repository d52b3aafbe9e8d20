"""Unit tests of the CATERPILLAR golden models (ring, Goldschmidt, core mapping) and system models."""
import gzip
import struct

import numpy as np
import pytest

from trainforge.golden.caterpillar import core, goldschmidt, ring
from trainforge.sim.caterpillar import arch, curves, training


def test_distribution_roundtrip_and_gemv(seed):
    generator = np.random.default_rng(seed)
    for n_r in (2, 3, 4):
        weights = generator.integers(-50, 50, size=(generator.integers(1, 12), generator.integers(1, 12)))
        image = core.distribute(weights, n_r)
        mb = core.blocks(weights.shape[0], n_r)
        for (i, j), value in np.ndenumerate(weights):
            stored = image[i % n_r, j % n_r, (j // n_r) * mb + i // n_r]
            assert stored == value, f"W[{i},{j}]: expected {value} got {stored} (n_r={n_r}, seed={seed})"
        x = generator.integers(-50, 50, size=weights.shape[0])
        _, y = core.gemv_forward(weights, x, n_r=n_r)
        assert np.array_equal(y.reshape(-1)[:weights.shape[1]], x @ weights), f"forward seed={seed}"


def test_schedule_overlap_hides_reduction():
    plain = core.schedule(core.OP_GEMV_FORWARD, 8, 8, n_r=4)
    overlapped = core.schedule(core.OP_GEMV_FORWARD, 8, 8, n_r=4, overlap=True)
    assert plain.issue_cycles == 8 * (8 + 3 + 1), plain.issue_cycles
    assert overlapped.issue_cycles == 7 * 8 + 8 + 4, overlapped.issue_cycles
    assert core.reduction_cycles(16, "tree") == 4 and core.reduction_cycles(16, "bus") == 15


def test_reduce_scatter_and_all_gather(seed):
    generator = np.random.default_rng(seed)
    partials = generator.integers(-1000, 1000, size=(4, 10))
    chunks = ring.reduce_scatter(partials)
    assert np.array_equal(np.concatenate(chunks), partials.sum(axis=0)), f"seed={seed}"
    gathered = ring.all_gather(chunks)
    assert all(np.array_equal(g, partials.sum(axis=0)) for g in gathered), f"seed={seed}"
    # 64 elements on 4 cores of n_r 4: chunks of 16 elements, cw = 4 words; 3 steps: two of 4 reads + 1 cycle,
    # the last until its last word lands, 4 reads + the hop + the landing register: 5 + 5 + 6 = 16.
    assert ring.collective_cycles(64, 4, 4) == 16
    assert ring.collective_cycles(64, 1, 4) == 0


@pytest.mark.parametrize("cores", [2, 3, 8])
def test_ring_gemv(cores, seed):
    generator = np.random.default_rng(seed)
    weights = generator.integers(-20, 20, size=(11, 7))
    x = generator.integers(-20, 20, size=11)
    e = generator.integers(-20, 20, size=7)
    y, _ = ring.ring_gemv_forward(weights, x, n_r=2, cores=cores)
    d, _ = ring.ring_gemv_backward(weights, e, n_r=2, cores=cores)
    assert np.array_equal(y, x @ weights), f"forward: expected {x @ weights} got {y} seed={seed}"
    assert np.array_equal(d, weights @ e), f"backward: expected {weights @ e} got {d} seed={seed}"


def test_goldschmidt_converges():
    values = np.array([1 << 16, 3 << 16, 100 << 16, 12345, 7 << 10])
    exact = (1 << 32) / values
    for iterations, tolerance in ((0, 0.07), (1, 0.005), (2, 1e-3)):
        result = goldschmidt.goldschmidt_reciprocal(values, iterations=iterations)
        error = np.max(np.abs(result - exact) / exact)
        assert error < tolerance, f"{iterations} iterations: relative error {error} >= {tolerance}"
    with pytest.raises(ValueError):
        goldschmidt.goldschmidt_reciprocal([0])


def test_counts_and_memory_fit():
    widths = arch.NETWORKS["500-500-500-10"]
    weights = sum(m * n for m, n in arch.layer_shapes(widths))
    assert arch.epoch_counts(widths, "SGD", 10)["macs"] == 30 * weights
    assert arch.epoch_counts(widths, "CP", 10)["weight_accesses"] == 10 * weights
    assert arch.epoch_counts(widths, "MBGD", 100, 50)["weight_accesses"] == 4 * weights
    assert arch.fits(widths, arch.CONFIGS["2x16-cores-4x4"])
    large = arch.NETWORKS["2500-2000-1500-1000-500-10"]
    assert not arch.fits(large, arch.CONFIGS["2x16-cores-4x4"])
    assert arch.fits(large, arch.CONFIGS["2x4-cores-16x16"])
    timing = arch.epoch_cycles(widths, "CP", 100, arch.CONFIGS["2x16-cores-4x4"])
    assert 0 < timing["utilization"] <= 1, timing


def test_idx_loader_and_digits(tmp_path):
    images = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    (tmp_path / "images.idx").write_bytes(struct.pack(">IIII", 2051, 3, 4, 5) + images.tobytes())
    with gzip.open(tmp_path / "labels.idx.gz", "wb") as handle:
        handle.write(struct.pack(">II", 2049, 3) + bytes([3, 7, 0]))
    x, y, source = training.load_dataset(idx=(tmp_path / "images.idx", tmp_path / "labels.idx.gz"))
    assert source == "mnist-idx"
    assert x.shape == (3, 20) and np.allclose(x * 255, images.reshape(3, 20)), f"got {x * 255}"
    assert y.tolist() == [3, 7, 0], f"labels: expected [3, 7, 0] got {y.tolist()}"
    with pytest.raises(ValueError):
        training.load_idx(tmp_path / "labels.idx.gz", tmp_path / "labels.idx.gz")
    (tmp_path / "short.idx").write_bytes(struct.pack(">IIII", 2051, 3, 4, 5) + images.tobytes()[:-1])
    with pytest.raises(ValueError):
        training.load_idx(tmp_path / "short.idx", tmp_path / "labels.idx.gz")
    x, y, source = training.load_dataset()
    assert source == "sklearn-digits-28x28" and x.shape == (1797, 784) and set(y.tolist()) == set(range(10))
    # Each 8x8 pixel is a 3x3 block inside a 2-pixel zero border.
    image = x[0].reshape(28, 28)
    assert not image[:2].any() and not image[:, -2:].any(), "the border is not zero"
    assert np.array_equal(image[2:26:3, 2:26:3], image[3:27:3, 3:27:3]), "pixels are not 3x3 blocks"


def _tiny_data(seed, samples=24, inputs=6, classes=3):
    generator = np.random.default_rng(seed)
    x = generator.random((samples, inputs)).astype(np.float32)
    return x, generator.integers(0, classes, samples)


def test_cp_with_one_layer_equals_sgd(seed):
    """A one-layer network is a CP pipeline of depth 1: backward of t right after forward of t = SGD."""
    x, y = _tiny_data(seed)
    results = {}
    for method in ("SGD", "CP"):
        network = training.MLP((6, 3), method, np.random.default_rng(seed))
        training.train((6, 3), method, x, y, x, y, epochs=2, rate=0.1, seed=seed, network=network)
        results[method] = network.weights[0]
    assert np.allclose(results["CP"], results["SGD"], atol=1e-6), \
        f"seed={seed}: CP {results['CP'].ravel()[:4]} vs SGD {results['SGD'].ravel()[:4]}"


def test_cp_schedule_on_two_layers(seed):
    """CP on a 2-layer network against the hand-written event order: layer 1 runs the backward pass of
    sample t at time t + 2 and layer 0 at t + 3, each with an immediate update, before that step's forward
    passes (layer 0 of t + 2, layer 1 of t + 1), so forward passes see weights the pipeline already changed."""
    x, y = _tiny_data(seed, samples=3)
    rate = 0.2
    network = training.MLP((6, 5, 3), "CP", np.random.default_rng(seed))
    w0, w1 = (w.astype(np.float64) for w in network.weights)
    b0, b1 = (b.astype(np.float64) for b in network.biases)
    targets = np.eye(3)[y]
    hidden, output, errors = {}, {}, {}

    def forward0(s):
        hidden[s] = np.maximum(x[s] @ w0 + b0, 0)

    def forward1(s):
        a = hidden[s] @ w1 + b1
        output[s] = np.exp(a - a.max()) / np.exp(a - a.max()).sum()

    def backward1(s):
        nonlocal w1, b1
        error = output[s] - targets[s]
        errors[s] = (error @ w1.T) * (hidden[s] > 0)  # through the weights before this update
        w1 = w1 - rate * np.outer(hidden[s], error)
        b1 = b1 - rate * error

    def backward0(s):
        nonlocal w0, b0
        w0 = w0 - rate * np.outer(x[s], errors[s])
        b0 = b0 - rate * errors[s]

    events = {0: [(forward0, 0)],
              1: [(forward1, 0), (forward0, 1)],
              2: [(backward1, 0), (forward1, 1), (forward0, 2)],
              3: [(backward0, 0), (backward1, 1), (forward1, 2)],
              4: [(backward0, 1), (backward1, 2)],
              5: [(backward0, 2)]}
    for time in sorted(events):
        for event, sample in events[time]:
            event(sample)
    pipeline = training.ContinuousPropagation(network, rate)
    for sample in range(3):
        pipeline.tick(x[sample], targets[sample].astype(np.float32))
    pipeline.drain()
    assert pipeline.time == 6, f"seed={seed}: the pipeline took {pipeline.time} steps, expected 6"
    for name, expected, actual in (("W0", w0, network.weights[0]), ("W1", w1, network.weights[1]),
                                   ("b0", b0, network.biases[0]), ("b1", b1, network.biases[1])):
        assert np.allclose(actual, expected, atol=1e-5), f"seed={seed} {name}: expected {expected} got {actual}"


def test_mbgd_is_the_mean_of_per_sample_gradients(seed):
    """MBGD b=1 equals SGD; MBGD b=4 takes the mean of the 4 per-sample gradients at the same weights."""
    x, y = _tiny_data(seed)
    widths = (6, 5, 4, 3)
    final = {}
    for method, batch in (("SGD", 1), ("MBGD", 1)):
        network = training.MLP(widths, method, np.random.default_rng(seed))
        training.train(widths, method, x, y, x, y, epochs=2, batch=batch, rate=0.1, seed=seed, network=network)
        final[method] = network.weights
    for index, (sgd, mbgd) in enumerate(zip(final["SGD"], final["MBGD"])):
        assert np.array_equal(sgd, mbgd), f"seed={seed} layer {index}: MBGD b=1 differs from SGD"
    start = training.MLP(widths, "MBGD", np.random.default_rng(seed)).weights
    rows = np.arange(4)
    expected = [np.zeros(w.shape) for w in start]
    for row in rows:
        single = training.MLP(widths, "SGD", np.random.default_rng(seed))
        training.train(widths, "SGD", x[[row]], y[[row]], x, y, epochs=1, rate=1.0, seed=seed, network=single)
        for total, before, after in zip(expected, start, single.weights):
            total += (before - after) / len(rows)
    network = training.MLP(widths, "MBGD", np.random.default_rng(seed))
    training.train(widths, "MBGD", x[rows], y[rows], x, y, epochs=1, batch=4, rate=1.0, seed=seed, network=network)
    for index, (total, before, after) in enumerate(zip(expected, start, network.weights)):
        assert np.allclose(before - after, total, atol=1e-5), \
            f"seed={seed} layer {index}: expected step {total.ravel()[:3]} got {(before - after).ravel()[:3]}"


def test_dfa_backward_uses_the_fixed_random_matrices(seed):
    x, y = _tiny_data(seed, samples=8)
    widths = (6, 5, 4, 3)
    # A network whose last hidden layer has an active unit for some sample: where every unit of it is dead (the
    # ReLU's zero for all 8 samples, e.g. base seed 1852610469), both rules give zero errors there and cannot differ.
    generator = np.random.default_rng(seed)
    for _ in range(100):
        network = training.MLP(widths, "DFA", generator)
        activations = network.forward(x)
        if (activations[2] > 0).any():
            break
    assert (activations[2] > 0).any(), f"seed={seed}: no network with an active last hidden unit in 100 draws"
    feedback = [b.copy() for b in network.feedback]
    assert [b.shape for b in feedback] == [(3, 5), (3, 4)], [b.shape for b in feedback]
    error = activations[-1] - np.eye(3, dtype=np.float32)[y]
    deltas = network.deltas(activations, error, "DFA")
    for index in (0, 1):
        expected = (error @ feedback[index]) * (activations[index + 1] > 0)
        assert np.allclose(deltas[index], expected), f"seed={seed} layer {index}: not e B_{index} * relu'"
    backprop = network.deltas(activations, error, "SGD")
    assert not np.allclose(backprop[1], deltas[1]), f"seed={seed}: backpropagation gives the DFA errors"
    network.weights[2][:] = 0  # DFA never propagates through W_3: the hidden errors do not change
    again = network.deltas(activations, error, "DFA")
    assert all(np.array_equal(a, b) for a, b in zip(deltas, again)), f"seed={seed}: DFA errors depend on W_3"
    training.train(widths, "DFA", x, y, x, y, epochs=2, rate=0.1, seed=seed, network=network)
    assert all(np.array_equal(a, b) for a, b in zip(feedback, network.feedback)), f"seed={seed}: training changed B_i"


def test_section34_energy_equals_an_independent_count():
    """The paper's Section 3.4 counts (the former energy model, kept for comparison): a 4-3-2 network, K = 6
    samples, MACs and weight accesses enumerated layer by layer, pass by pass."""
    widths, samples = (4, 3, 2), 6
    config = arch.CONFIGS["2x16-cores-4x4"]
    layer_weights = [4 * 3, 3 * 2]
    fpu_pj, local_pj = 2.63e-12, 3.5e-12
    expected = {
        # forward + backward + gradient MACs per sample; weights read in the forward and the backward pass
        ("SGD", 1): (samples * sum(3 * w for w in layer_weights), samples * sum(2 * w for w in layer_weights)),
        ("MBGD", 2): (samples * sum(3 * w for w in layer_weights), samples // 2 * sum(2 * w for w in layer_weights)),
        # CP reads every weight once per sample for both passes
        ("CP", 1): (samples * sum(3 * w for w in layer_weights), samples * sum(layer_weights)),
        # DFA: forward and gradient MACs, and the backward pass through B_1 (2 outputs -> 3 hidden units),
        # which is read like the weights
        ("DFA", 1): (samples * (sum(2 * w for w in layer_weights) + 2 * 3),
                     samples * (sum(2 * w for w in layer_weights) + 2 * 3)),
    }
    for (method, batch), (macs, accesses) in expected.items():
        energy = arch.section34_energy(widths, method, samples, config, batch)
        assert energy["fpu_j"] == pytest.approx(macs * fpu_pj), f"{method}: FPU {energy['fpu_j']} != {macs} MACs"
        assert energy["memory_j"] == pytest.approx(accesses * local_pj), \
            f"{method}: memory {energy['memory_j']} != {accesses} local accesses"
    large = arch.NETWORKS["2500-2000-1500-1000-500-10"]
    weights = sum(m * n for m, n in arch.layer_shapes(large))
    no_fit = arch.section34_energy(large, "SGD", 1, config)
    assert no_fit["memory_j"] == pytest.approx(2 * weights * 16e-12), "a network that does not fit reads off-core"


def _smoothed_crossing(samples, accuracy, target):
    """The study's crossing, written out again: centred mean of 3 evaluations (2 at the ends), the first
    smoothed value at or above ``target``, interpolated from the evaluation before it."""
    smoothed = []
    for i in range(len(accuracy)):
        window = accuracy[max(0, i - 1):i + 2]
        smoothed.append(sum(window) / len(window))
    for i, value in enumerate(smoothed):
        if value >= target:
            if i == 0:
                return samples[0]
            return samples[i - 1] + (target - smoothed[i - 1]) / (value - smoothed[i - 1]) * (samples[i] - samples[i - 1])
    return None


def test_study_prices_every_method(monkeypatch):
    """The study on a slice of the digits, two seeds: every method trains on its fold, the pricing is the
    architecture model's, and the energy to an accuracy is the smoothed crossing (in epochs) times one
    epoch's energy, averaged over the seeds."""
    from trainforge.commands.caterpillar import cli

    x, y = training.load_digits_28()
    monkeypatch.setattr(training, "load_dataset", lambda idx=None: (x[:300], y[:300], "digits-slice"))
    plan = cli._run_plan(arch.METHODS, (2, 50), (1,))
    assert plan == [("SGD", 1), ("MBGD", 2), ("MBGD", 50), ("FA", 1), ("DFA", 1), ("CP", 1)], plan
    result = cli.study(["500-500-500-10"], plan, 2, 0.05, (0.25, 1.0), [0, 1], evaluations_per_epoch=2)
    assert len(result["runs"]) == len(plan) and result["seeds"] == [0, 1]
    network, config = arch.NETWORKS["500-500-500-10"], arch.CONFIGS["2x16-cores-4x4"]
    for run in result["runs"]:
        label = f"{run['method']} b={run['batch']}"
        priced = run["priced"]["2x16-cores-4x4"]
        epoch = arch.epoch_energy(network, run["method"], 240, config, run["batch"])
        assert priced["epoch_energy_j"] == pytest.approx(epoch["total_j"]), label
        for samples in run["samples_per_seed"]:
            assert samples == ([150, 240, 390, 480] if run["batch"] == 50 else [120, 240, 360, 480]), \
                f"{label}: evaluated after {samples} samples"
        assert run["accuracy"] == pytest.approx(np.mean(run["accuracy_per_seed"], axis=0), abs=1e-5), label
        energies = []
        for samples, accuracy in zip(run["samples_per_seed"], run["accuracy_per_seed"]):
            crossed = _smoothed_crossing(samples, accuracy, 0.25)
            energies.append(None if crossed is None else crossed / 240 * epoch["total_j"])
        reached = priced["to_accuracy"]["0.25"]
        assert priced["reached_seeds"]["0.25"] == sum(e is not None for e in energies), label
        if None in energies:
            assert reached is None, f"{label}: a seed never reaches 0.25, yet {reached}"
        else:
            assert reached["energy_j"] == pytest.approx(np.mean(energies), rel=1e-6), label
            assert reached["energy_j_std"] == pytest.approx(np.std(energies), rel=1e-5, abs=1e-12), label
        if run["method"] in ("SGD", "CP", "MBGD"):  # FA and DFA at their (full-size) rates learn slower
            assert reached is not None, f"{label}: accuracy {run['accuracy_per_seed']} never reaches 0.25"
    comparison = cli.compare_with_paper(result, reference=0.25)["Fig. 6"]
    energies = {cli._label(r): r["priced"]["2x16-cores-4x4"]["to_accuracy"]["0.25"] for r in result["runs"]}
    energies = {label: reached["energy_j"] for label, reached in energies.items() if reached is not None}
    assert comparison["lowest_energy"] == min(energies, key=energies.get), (comparison, energies)
    assert comparison["cp_over_sgd"] == pytest.approx(energies["CP"] / energies["SGD"], abs=1e-3), comparison


def test_smoothing_and_crossing_by_hand():
    """Accuracies 0.5, 0.9, 0.7, 0.95, 0.98 after 100, 200 ... 500 samples. Smoothed (centred mean of 3, 2 at
    the ends): 0.7, 0.7, 0.85, 0.8766.., 0.965. Target 0.8: the raw curve crosses at 200 (0.9), the smoothed
    one between 200 (0.7) and 300 (0.85): 200 + (0.8 - 0.7) / 0.15 * 100 = 266.66..; target 0.99: never."""
    samples, accuracy = [100, 200, 300, 400, 500], [0.5, 0.9, 0.7, 0.95, 0.98]
    assert curves.smooth(accuracy) == pytest.approx([0.7, 0.7, 0.85, 2.63 / 3, 0.965])
    assert curves.crossing(samples, accuracy, 0.8) == pytest.approx(200 + 100 * 0.1 / 0.15)
    assert curves.crossing(samples, accuracy, 0.6) == 100
    assert curves.crossing(samples, accuracy, 0.99) is None


def test_folds_hold_out_every_image_once():
    held = np.concatenate([curves.fold_split(1797, k)[1] for k in range(5)])
    assert sorted(held.tolist()) == list(range(1797))
    for k in range(5):
        train, test = curves.fold_split(1797, k)
        assert len(test) in (359, 360) and len(train) + len(test) == 1797
        assert not set(train.tolist()) & set(test.tolist())
    assert np.array_equal(curves.fold_split(1797, 5)[1], curves.fold_split(1797, 0)[1])


def test_orderings_count_seeds():
    """Three seeds of Fig. 6's CP-below-SGD claim: CP first (holds), SGD first (fails), CP alone (holds);
    SGD-below-DFA: SGD alone (holds), SGD first (holds), neither (undecided)."""
    from trainforge.commands.caterpillar import cli

    def run(method, energies):
        per_seed = [None if e is None else {"energy_j": e, "seconds": e} for e in energies]
        return {"network": "500-500-500-10", "method": method, "batch": 1,
                "priced": {"2x16-cores-4x4": {"to_accuracy_per_seed": {"0.9": per_seed}}}}

    results = {"seeds": [0, 1, 2], "runs": [run("CP", [1.0, 3.0, 2.0]), run("SGD", [2.0, 1.0, None]),
                                             run("DFA", [None, 5.0, None])]}
    found = {row["claim"]: row for row in cli.orderings(results)}
    cp = found["CP below SGD"]
    assert (cp["holds"], cp["fails"], cp["undecided"], cp["holds_in_every_seed"]) == (2, 1, 0, False), cp
    dfa = found["DFA needs more energy to an accuracy than SGD"]
    assert (dfa["holds"], dfa["fails"], dfa["undecided"]) == (2, 0, 1), dfa
    assert "SGD below large-minibatch MBGD (0.7x)" not in found


@pytest.mark.parametrize("method", ["SGD", "MBGD", "FA", "DFA", "CP"])
def test_training_learns(method):
    x, labels = training.load_digits_28()
    accuracy = training.train((784, 32, 10), method, x[:300], labels[:300], x[300:500], labels[300:500],
                              epochs=3, batch=4, rate=0.01 if method in ("FA", "DFA") else None, seed=1)["accuracy"]
    assert accuracy[-1] > 0.5, f"{method}: accuracy {accuracy} does not beat chance (0.1) clearly"


def test_reciprocal_unit_saturates_zero_and_matches_goldschmidt(seed):
    generator = np.random.default_rng(seed)
    values = np.concatenate(([0, 1, 1 << 16], generator.integers(1, 1 << 32, size=50)))
    result = goldschmidt.reciprocal_unit(values, frac=16, table_bits=3, iterations=2)
    assert result[0] == (1 << goldschmidt.result_width(16)) - 1, f"1/0: got {result[0]} seed={seed}"
    expected = goldschmidt.goldschmidt_reciprocal(values[1:], frac=16, table_bits=3, iterations=2)
    assert np.array_equal(result[1:], expected), f"seed={seed}"
    # Truncating shifts: 1/1.0 comes out one LSB low (65535), within two LSBs of the exact 65536.
    assert abs(int(result[2]) - (1 << 16)) <= 2, f"1/1.0: expected about {1 << 16} got {result[2]}"
    assert result.max() < 1 << goldschmidt.result_width(16), "a result overflows the output width"
    assert [goldschmidt.unit_latency(k) for k in (0, 1, 2)] == [2, 4, 6]
    assert [goldschmidt.unit_interval(k) for k in (0, 1, 2)] == [1, 3, 5]
    assert goldschmidt.result_cycles(3, iterations=1) == [4, 7, 10]
