"""Unit tests of the CATERPILLAR golden models (ring, Goldschmidt, core mapping) and system models."""
import struct

import numpy as np
import pytest

from trainforge.golden.caterpillar import core, goldschmidt, ring
from trainforge.sim.caterpillar import arch, training


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
    assert ring.collective_cycles(64, 4, 4) == 3 * (4 + ring.HOP_CYCLES)
    assert ring.collective_cycles(64, 1, 4) == 0


def test_two_core_gemv(seed):
    generator = np.random.default_rng(seed)
    weights = generator.integers(-20, 20, size=(11, 7))
    x = generator.integers(-20, 20, size=11)
    e = generator.integers(-20, 20, size=7)
    y, _ = ring.two_core_gemv_forward(weights, x, n_r=2)
    d, _ = ring.two_core_gemv_backward(weights, e, n_r=2)
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


def test_idx_loader(tmp_path):
    images = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4)
    (tmp_path / "images.idx").write_bytes(struct.pack(">IIII", 2051, 2, 4, 4) + images.tobytes())
    (tmp_path / "labels.idx").write_bytes(struct.pack(">II", 2049, 2) + bytes([3, 7]))
    x, y = training.load_idx(tmp_path / "images.idx", tmp_path / "labels.idx")
    assert x.shape == (2, 16) and np.allclose(x * 255, images.reshape(2, 16)) and y.tolist() == [3, 7]
    with pytest.raises(ValueError):
        training.load_idx(tmp_path / "labels.idx", tmp_path / "labels.idx")


@pytest.mark.parametrize("method", ["SGD", "MBGD", "FA", "DFA", "CP"])
def test_training_learns(method):
    x, labels = training.synthetic_digits(samples=400, seed=1)
    accuracy = training.train((784, 32, 10), method, x[:300], labels[:300], x[300:], labels[300:],
                              epochs=4, batch=4, rate=0.05 if method in ("FA", "DFA") else None, seed=1)
    assert accuracy[-1] > 0.3, f"{method}: accuracy {accuracy} does not beat chance (0.1) clearly"


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
