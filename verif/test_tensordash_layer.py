"""Unit tests of the TensorDash layer model, the packed cycle model and the digits CNN traces."""
import json

import numpy as np
import pytest

from trainforge.cli import main
from trainforge.golden.tensordash.core import pad_rows, run_cores
from trainforge.golden.tensordash.layer import (OPERATIONS, assemble, direct_conv, direct_input_gradient,
                                                direct_weight_gradient, lanes_stream, layer_cycles, lower,
                                                tile_program)
from trainforge.spec.tensordash import default_pattern, validate_pattern
from trainforge.golden.tensordash.pe import td_tile, td_tile_cycles
from trainforge.sim.tensordash import training


def sparse_ints(rng, shape, density):
    return rng.integers(-5, 6, size=shape) * (rng.random(shape) < density)


def conv_layer(rng, batch=2, channels=3, filters=5, size=6, kernel=3, stride=1, padding=1):
    out = (size + 2 * padding - kernel) // stride + 1
    return (sparse_ints(rng, (batch, channels, size, size), 0.5), sparse_ints(rng, (filters, channels, kernel, kernel), 1.0),
            sparse_ints(rng, (batch, filters, out, out), 0.4))


def references(acts, weights, grads, stride, padding):
    return {"AxW": direct_conv(acts, weights, stride, padding),
            "GxW": direct_input_gradient(grads, weights, acts.shape, stride, padding),
            "GxA": direct_weight_gradient(grads, acts, weights.shape[2:], stride, padding)}


@pytest.mark.parametrize("size,kernel,stride,padding", [(6, 3, 1, 1), (7, 3, 2, 1), (7, 3, 2, 0), (5, 1, 1, 0),
                                                        (8, 5, 3, 2)])
def test_lowering_equals_direct_convolution(size, kernel, stride, padding, seed):
    rng = np.random.default_rng(seed)
    acts, weights, grads = conv_layer(rng, size=size, kernel=kernel, stride=stride, padding=padding)
    expected = references(acts, weights, grads, stride, padding)
    for operation in OPERATIONS:
        lowered = lower(operation, acts, weights, grads, stride, padding)
        actual = lowered.fold(lowered.b @ lowered.a.T)
        assert np.array_equal(actual, expected[operation]), \
            f"seed {seed} {operation} stride {stride} pad {padding}: lowering differs from the direct computation"


def test_fully_connected_lowering_and_targets(seed):
    rng = np.random.default_rng(seed)
    acts, weights, grads = sparse_ints(rng, (6, 10), 0.3), sparse_ints(rng, (7, 10), 1.0), sparse_ints(rng, (6, 7), 0.9)
    expected = {"AxW": acts @ weights.T, "GxW": grads @ weights, "GxA": grads.T @ acts}
    targets = {}
    for operation in OPERATIONS:
        lowered = lower(operation, acts, weights, grads)
        assert np.array_equal(lowered.fold(lowered.b @ lowered.a.T), expected[operation]), f"seed {seed} {operation}"
        targets[operation] = lowered.targeted
    sparser = "A" if np.mean(acts == 0) > np.mean(grads == 0) else "G"
    assert targets == {"AxW": "A", "GxW": "G", "GxA": sparser}, f"seed {seed}: targets {targets}"


@pytest.mark.parametrize("rows,cols,depth,max_rows", [(4, 4, 4, 5), (2, 3, 3, 1000), (4, 4, 2, 7), (3, 2, 5, 4)])
def test_layer_cycles_equal_the_tile_models_on_the_whole_stream(rows, cols, depth, max_rows, seed):
    """The mapped operation, run as one stream through the tile golden models: values and cycles."""
    rng = np.random.default_rng(seed)
    acts, weights, grads = conv_layer(rng, stride=2, size=7)
    expected = references(acts, weights, grads, 2, 1)
    for operation in OPERATIONS:
        lowered = lower(operation, acts, weights, grads, 2, 1)
        tile = {"rows": rows, "cols": cols, "depth": depth}
        a, b, clear, read, passes = tile_program(lowered, max_rows=max_rows, **tile)
        values = td_tile(a, b, clear, read)
        assert np.array_equal(assemble(lowered, values, passes, rows, cols), expected[operation]), \
            f"seed {seed} {operation}: tile results differ from the direct computation"
        whole = td_tile_cycles(a, b, clear, read, depth=depth, record=True)
        model = layer_cycles(lowered, max_rows=max_rows, **tile)
        assert model.tensordash == whole.read_cycles[0][-1] + 1, \
            f"seed {seed} {operation}: layer model {model.tensordash} cycles, tile model {whole.read_cycles[0][-1] + 1}"
        assert model.dense == len(read), f"seed {seed} {operation}: dense {model.dense} != stream rows {len(read)}"


def test_dense_and_empty_operands_give_the_bounds():
    acts = np.ones((1, 4, 5, 5))
    weights = np.ones((6, 4, 3, 3))
    grads = np.zeros((1, 6, 5, 5))
    dense = layer_cycles(lower("AxW", acts, weights, grads, 1, 0 + 1))
    assert dense.tensordash < dense.dense, "padding zeros of the windows are skippable"
    inner = layer_cycles(lower("AxW", np.ones((1, 4, 5, 5)), weights, np.zeros((1, 6, 3, 3)), 1, 0))
    assert inner.tensordash == inner.dense, f"dense operands: expected {inner.dense} cycles, got {inner.tensordash}"
    empty = layer_cycles(lower("GxW", acts, weights, grads, 1, 1))
    rows = lanes_stream(np.zeros((1, 6 * 9)), 4).shape[1]  # 14 stream rows per dot product
    passes = empty.dense // rows
    assert empty.tensordash == passes * -(-rows // 4), f"all-zero operand: {empty.tensordash} cycles"


@pytest.mark.parametrize("rows,lanes,depth", [(1, 4, 4), (4, 4, 4), (3, 4, 5), (2, 4, 2), (4, 2, 3), (2, 5, 3)])
def test_packed_cycle_model_equals_array_model(rows, lanes, depth, seed):
    rng = np.random.default_rng(seed)
    total = pad_rows(157, depth)
    effectual = rng.random((20, rows, total, lanes)) < rng.random((20, rows, 1, 1))
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    cuts = np.sort(rng.choice(np.arange(1, total), 9, replace=False))
    clear[0], clear[cuts] = True, True
    read[cuts - 1], read[-1] = True, True
    pattern = validate_pattern(default_pattern(lanes, depth), lanes, depth)
    packed = run_cores(effectual, read, clear, pattern, depth)
    array = run_cores(effectual, read, clear, pattern, depth, record=True)
    assert np.array_equal(packed.cycles, array.cycles), f"seed {seed}: {packed.cycles} != {array.cycles}"
    assert np.array_equal(packed.macs, array.macs), f"seed {seed}: MACs {packed.macs} != {array.macs}"


def test_cnn_backward_matches_numerical_gradient(seed):
    rng = np.random.default_rng(seed)
    network = training._Network(rng)
    for params in network.params.values():
        params[0] = params[0].astype(np.float64)
        params[1] = params[1].astype(np.float64) + 0.01
    x = rng.random((3, 1, 8, 8))
    labels = rng.integers(0, 10, 3)

    def loss():
        logits, _ = network.forward(x)
        shifted = logits - logits.max(axis=1, keepdims=True)
        return np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(3), labels])

    logits, cache = network.forward(x)
    grads, _ = network.backward(logits, labels, cache)
    for name in network.params:
        weights = network.params[name][0]
        for flat in rng.choice(weights.size, 3, replace=False):
            index = np.unravel_index(flat, weights.shape)
            saved = weights[index]
            weights[index] = saved + 1e-6
            up = loss()
            weights[index] = saved - 1e-6
            down = loss()
            weights[index] = saved
            numeric = (up - down) / 2e-6
            assert abs(numeric - grads[name][0][index]) <= 1e-5 + 1e-4 * abs(numeric), \
                f"seed {seed} {name}{index}: numerical {numeric} analytic {grads[name][0][index]}"


def test_training_report_tiny(tmp_path):
    assert main(["tensordash", "training", "--epochs", "2", "--batch", "64", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "training.json").read_text())
    assert {p for p in report["plots"]} == {"training_layers.png", "training_epochs.png"}
    assert all((tmp_path / p).stat().st_size > 0 for p in report["plots"])
    assert [r["epoch"] for r in report["by_epoch"]] == [1, 2]
    assert report["by_epoch"][-1]["accuracy"] > 0.8, f"the CNN did not learn: {report['by_epoch']}"
    layers = {(r["layer"], r["operation"]) for r in report["by_layer"]}
    assert ("conv1", "GxW") not in layers and ("conv2", "GxW") in layers and len(layers) == 11
    for row in report["by_layer"]:
        assert 1.0 <= row["speedup"] <= 4.0, f"{row}: speedup outside [1, depth]"


@pytest.mark.parametrize("argv", [["training", "--epochs", "0"], ["rtl-check", "--samples", "0"],
                                  ["rtl-check", "--layer", "conv9"], ["area", "--width", "1"],
                                  ["speedup", "--rtl", "--rtl-sparsities", "0.5", "1.0"],
                                  ["speedup", "--rtl", "--rtl-samples", "0"]])
def test_usage_errors_exit_2(argv, tmp_path, capsys):
    assert main(["tensordash", *argv, "--out", str(tmp_path)]) == 2
    assert "trainforge tensordash" in capsys.readouterr().err
    assert not list(tmp_path.iterdir()), "nothing may be written on a usage error"
