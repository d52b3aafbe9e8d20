"""The NeuroTrainer compiler on real-network layers: stride, padding, channel tiling, any FC size.

Every result of the reference executor (the compiled programs run through the PMAG and PE golden
models) is compared with a plain numpy convolution or matrix product written here, in integer
arithmetic (``frac_bits = 0``), so a wrong gather, tile or merge shows as a wrong number. The
AlexNet and VGG16 compile sweep (every conv and fc layer, FF, BP and UP, at full size) runs
with ``--regress``.
"""
import json

import numpy as np
import pytest

from trainforge.sim.neurotrainer.compiler import compile_layer
from trainforge.sim.neurotrainer.executor import execute
from trainforge.sim.neurotrainer.networks import BUILTIN_NETWORKS, network_passes
from trainforge.spec.neurotrainer.pe_program import decode_pe_program

#: Small buffers, so that small layers need several input- and output-channel tiles.
SMALL_PE = dict(lanes=2, in1_depth=32, in2_depth=16, out_depth=4, frac_bits=0, frac_bits16=0)


def _windows(x, hk, wk, stride, pad):
    """``(n, d, out_h, out_w, hk, wk)`` windows of the zero-padded input."""
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out_h = (padded.shape[2] - hk) // stride + 1
    out_w = (padded.shape[3] - wk) // stride + 1
    rows = (np.arange(out_h) * stride)[:, None] + np.arange(hk)[None, :]
    cols = (np.arange(out_w) * stride)[:, None] + np.arange(wk)[None, :]
    return padded[:, :, rows[:, None, :, None], cols[None, :, None, :]], padded.shape


def reference_ff(x, w, stride, pad):
    windows, _ = _windows(x, w.shape[2], w.shape[3], stride, pad)
    return np.einsum("ndyxab,odab->noyx", windows, w)


def reference_up(x, dy, hk, wk, stride, pad):
    windows, _ = _windows(x, hk, wk, stride, pad)
    return np.einsum("ndyxab,noyx->odab", windows, dy)


def reference_bp(dy, w, shape, stride, pad):
    n, d, h, width = shape
    _, _, hk, wk = w.shape
    padded = np.zeros((n, d, h + 2 * pad, width + 2 * pad), dtype=np.int64)
    for y in range(dy.shape[2]):
        for x in range(dy.shape[3]):
            padded[:, :, y * stride:y * stride + hk, x * stride:x * stride + wk] += \
                np.einsum("no,odab->ndab", dy[:, :, y, x], w)
    return padded[:, :, pad:pad + h, pad:pad + width]


def _blocks(layer):
    """(passes that start a reduction, passes that emit) of PE 0: > 1 means several tiles."""
    fields = [decode_pe_program(word) for word in layer.pe_jobs[0].passes]
    return sum(1 for f in fields if not f["accumulate"]), sum(f["emit"] for f in fields)


CONV_CASES = [
    # n, d, h, w, o, hk, wk, stride, pad, pes
    (2, 3, 15, 15, 5, 5, 5, 4, 2, 2),       # stride 4 with padding, 75-tap kernel over 8-row BUF2 blocks
    # AlexNet C1's kernel and stride, scaled down (10 s: make regress; the case above tiles a kernel over BUF2 blocks)
    pytest.param(1, 3, 23, 23, 4, 11, 11, 4, 0, 1, marks=pytest.mark.regress),
    (3, 4, 7, 9, 6, 3, 3, 1, 1, 3),         # 3x3 padding 1 (AlexNet C3-C5, VGG16), 3 PEs
    (1, 5, 8, 8, 7, 3, 2, 2, 1, 2),         # non-square kernel, stride 2
]


@pytest.mark.parametrize("n, d, h, w, o, hk, wk, stride, pad, pes", CONV_CASES)
def test_conv_ff_bp_up_equal_numpy(n, d, h, w, o, hk, wk, stride, pad, pes):
    rng = np.random.default_rng(n * 1000 + d * 100 + hk * 10 + stride)
    dims = dict(n=n, d=d, h=h, w=w, o=o, hk=hk, wk=wk, s=stride, p=pad)
    x = rng.integers(-20, 21, (n, d, h, w))
    weights = rng.integers(-20, 21, (o, d, hk, wk))
    expected_y = reference_ff(x, weights, stride, pad)
    dy = rng.integers(-20, 21, expected_y.shape)
    for bits in (32, 16):
        layer = compile_layer("conv_ff", dims, pes=pes, pe=SMALL_PE, bits=bits)
        assert layer.copy_jobs, "conv_ff: expected the tiled lowering (an im2col copy)"
        starts, emits = _blocks(layer)
        assert emits > 1 and starts < len(layer.pe_jobs[0].passes), f"conv_ff: {starts} starts, {emits} emits"
        actual = execute(layer, {"x": x, "w": weights})["output"]
        np.testing.assert_array_equal(actual, expected_y, err_msg=f"conv_ff {bits}-bit {dims} pes={pes}")
    layer = compile_layer("conv_up", dims, pes=pes, pe=SMALL_PE)
    np.testing.assert_array_equal(execute(layer, {"x": x, "dy": dy})["output"],
                                  reference_up(x, dy, hk, wk, stride, pad), err_msg=f"conv_up {dims} pes={pes}")
    layer = compile_layer("conv_bp", dims, pes=pes, pe=SMALL_PE)
    np.testing.assert_array_equal(execute(layer, {"dy": dy, "w": weights})["output"],
                                  reference_bp(dy, weights, x.shape, stride, pad),
                                  err_msg=f"conv_bp {dims} pes={pes}")


@pytest.mark.parametrize("rows, cols, n, pes", [(37, 53, 3, 2), (11, 131, 1, 3), (70, 9, 5, 1)])
def test_fc_any_size_equals_numpy(rows, cols, n, pes):
    rng = np.random.default_rng(rows * cols + n)
    weights = rng.integers(-20, 21, (rows, cols))
    x = rng.integers(-20, 21, (cols, n))
    dy = rng.integers(-20, 21, (rows, n))
    for kind, inputs, expected in (("fc_ff", {"w": weights, "x": x}, weights @ x),
                                   ("fc_bp", {"w": weights, "dy": dy}, weights.T @ dy),
                                   ("fc_up", {"dy": dy, "x": x}, dy @ x.T)):
        layer = compile_layer(kind, dict(h=rows, k=cols, n=n), pes=pes, pe=SMALL_PE, bits=32)
        np.testing.assert_array_equal(execute(layer, inputs)["output"], expected, err_msg=f"{kind} {rows}x{cols}")


def test_stride_one_unpadded_conv_that_fits_keeps_the_direct_lowering():
    layer = compile_layer("conv_ff", dict(n=2, d=2, h=5, w=5, o=3, hk=3, wk=3))
    assert not layer.copy_jobs
    same = compile_layer("conv_ff", dict(n=2, d=2, h=5, w=5, o=3, hk=3, wk=3, s=1, p=0))
    assert same.ibuffer == layer.ibuffer


def test_network_passes_keep_stride_padding_and_groups():
    rows = {(name, training_pass): (kind, dims, groups)
            for name, training_pass, kind, dims, groups in network_passes(BUILTIN_NETWORKS["alexnet"], 2)}
    assert len(rows) == 8 * 3
    assert rows["C1", "ff"] == ("conv_ff", dict(n=2, d=3, h=227, w=227, o=96, hk=11, wk=11, s=4, p=0), 1)
    assert rows["C2", "bp"] == ("conv_bp", dict(n=2, d=48, h=27, w=27, o=128, hk=5, wk=5, s=1, p=2), 2)
    assert rows["FC1", "up"] == ("fc_up", dict(h=4096, k=9216, n=2), 1)


@pytest.mark.regress
@pytest.mark.parametrize("network", ["alexnet", "vgg16"])
def test_every_layer_of_alexnet_and_vgg16_compiles_at_full_size(network):
    for name, training_pass, kind, dims, _ in network_passes(BUILTIN_NETWORKS[network], 1):
        layer = compile_layer(kind, dims)
        assert layer.pe_jobs and len(layer.ibuffer) <= 16 * 1024, (network, name, training_pass)


def test_cli_compiles_every_layer_of_a_network(tmp_path, capsys):
    from trainforge.cli import main

    path = tmp_path / "small.yaml"
    path.write_text("name: small\nlayers:\n"
                    "  - {name: c1, kind: conv, in_channels: 3, out_channels: 8, kernel: 5, in_height: 19, "
                    "in_width: 19, stride: 4, padding: 2}\n"
                    "  - {name: c2, kind: conv, in_channels: 8, out_channels: 6, kernel: 3, in_height: 5, "
                    "in_width: 5, padding: 1, groups: 2}\n"
                    "  - {name: f1, kind: fc, in_channels: 150, out_channels: 10}\n")
    assert main(["neurotrainer", "compile", "--network", str(path), "--dims", "n=2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["layers"]
    assert [(row["layer"], row["pass"]) for row in rows] == [(name, p) for name in ("c1", "c2", "f1")
                                                             for p in ("ff", "bp", "up")]
    assert rows[0]["dims"] == dict(n=2, d=3, h=19, w=19, o=8, hk=5, wk=5, s=4, p=2) and rows[0]["bits"] == 16
    assert rows[3]["groups"] == 2 and rows[3]["dims"]["d"] == 4 and rows[3]["dims"]["o"] == 3
    assert all(row["pe_passes"] > 0 and "error" not in row for row in rows)
    assert main(["neurotrainer", "compile", "--network", str(path), "--pass", "up"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 3 and lines[2].startswith("c1       up   conv_up  tiled")


#: Every AlexNet layer and pass (n = 1, 32-bit, one group), checked at full size by the reference executor with the
#: batched PE model (``execute(..., pe_model="batched")``, equal to the per-pass ``nt_pe`` path by
#: ``verif/test_nt_executor_batched.py``). Times: hw/neurotrainer/docs/compiler.md, "Full size".
FULL_SIZE = [(name, training_pass) for name in ("C1", "C2", "C3", "C4", "C5", "FC1", "FC2", "FC3")
             for training_pass in ("ff", "bp", "up")]


def full_size_case(layer_name, training_pass, seed=0):
    """``(kind, dims, inputs, expected)`` of one AlexNet layer at n = 1: random inputs in -3 .. 3 and the numpy result."""
    (kind, dims), = [(kind, dims) for name, tp, kind, dims, _ in network_passes(BUILTIN_NETWORKS["alexnet"], 1)
                     if (name, tp) == (layer_name, training_pass)]
    rng = np.random.default_rng(seed)
    if kind.startswith("fc"):
        weights = rng.integers(-3, 4, (dims["h"], dims["k"]))
        x, dy = rng.integers(-3, 4, (dims["k"], dims["n"])), rng.integers(-3, 4, (dims["h"], dims["n"]))
        inputs, expected = {"fc_ff": ({"w": weights, "x": x}, weights @ x),
                            "fc_bp": ({"w": weights, "dy": dy}, weights.T @ dy),
                            "fc_up": ({"dy": dy, "x": x}, dy @ x.T)}[kind]
    else:
        n, d, h, w, o, hk, wk, stride, pad = (dims[k] for k in ("n", "d", "h", "w", "o", "hk", "wk", "s", "p"))
        x, weights = rng.integers(-3, 4, (n, d, h, w)), rng.integers(-3, 4, (o, d, hk, wk))
        y = reference_ff(x, weights, stride, pad)
        dy = rng.integers(-3, 4, y.shape)
        inputs, expected = {"conv_ff": ({"x": x, "w": weights}, y),
                            "conv_up": ({"x": x, "dy": dy}, reference_up(x, dy, hk, wk, stride, pad)),
                            "conv_bp": ({"dy": dy, "w": weights}, reference_bp(dy, weights, x.shape, stride, pad))}[kind]
    return kind, dims, inputs, expected


@pytest.mark.regress
@pytest.mark.parametrize("layer_name, training_pass", FULL_SIZE)
def test_alexnet_layer_at_full_size_equals_numpy(layer_name, training_pass):
    kind, dims, inputs, expected = full_size_case(layer_name, training_pass)
    layer = compile_layer(kind, dims, pe=dict(frac_bits=0, frac_bits16=0), bits=32)
    actual = execute(layer, inputs, pe_model="batched")["output"]
    np.testing.assert_array_equal(actual, expected, err_msg=f"AlexNet {layer_name} {training_pass}")
