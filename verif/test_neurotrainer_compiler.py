"""NeuroTrainer host compiler: program word round trips, the reference executor against numpy, rejections, CLI."""
import argparse
import json
import sys

import numpy as np
import pytest

from trainforge.errors import UsageError
from trainforge.golden.neurotrainer.mac import nt_mac
from trainforge.golden.neurotrainer.pmag import random_program
from trainforge.hw.neurotrainer.pmag import NTPMAG
from trainforge.commands.neurotrainer import cmd_compile
from trainforge.sim.neurotrainer.compiler import LAYERS, compile_layer
from trainforge.sim.neurotrainer.executor import execute, maxpool_decode
from trainforge.sim.neurotrainer.program import (PMAG_DESCRIPTOR_BYTES, PMAG_WORD_BYTES, PE_WORD_BYTES, ProgramError,
                                                 decode_pe, decode_pmag, encode_pe, encode_pmag, parse_ibuffer,
                                                 pmag_rtl_payload)

#: Exact saturating integer MACs (the executor must equal numpy bit for bit).
INTEGER = dict(frac_bits=0, frac_bits16=0, rounding="truncate")

SEEDS = range(3)


def _where(seed, **what):
    return f"seed {seed}, " + ", ".join(f"{key}={value}" for key, value in what.items())


def _assert_equal(actual, expected, where):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{where}: shape expected {expected.shape}, actual {actual.shape}"
    bad = np.argwhere(actual != expected)
    assert bad.size == 0, (f"{where}: {len(bad)} mismatches, first at {tuple(bad[0])}: "
                           f"expected {expected[tuple(bad[0])]}, actual {actual[tuple(bad[0])]}")


# ------------------------------------------------------------------------------------------------ words

@pytest.mark.parametrize("seed", SEEDS)
def test_pmag_word_round_trip(seed):
    rng = np.random.default_rng(seed)
    layout = NTPMAG(counter_bits=16).program_layout
    for _ in range(20):
        program = random_program(rng, counter_bits=16)
        program["max"] = [int(v) for v in rng.integers(0, 1 << 16, size=7)]
        word, descriptor = encode_pmag(program)
        assert (len(word), len(descriptor)) == (PMAG_WORD_BYTES, PMAG_DESCRIPTOR_BYTES) == (18, 32)
        decoded = decode_pmag(word, descriptor)
        assert decoded == program, f"seed {seed}: expected {program}, decoded {decoded}"
        view = layout.from_bits(pmag_rtl_payload(program, layout))
        rtl = {name: int(getattr(view, name)) for name in program if name not in ("max", "stride")}
        rtl["max"] = [int(view.max[i]) for i in range(7)]
        rtl["stride"] = [int(view.stride[i]) for i in range(4)]
        assert rtl == program, f"seed {seed}: RTL payload fields {rtl}, expected {program}"


def test_pmag_word_bit_layout():
    """R1 is the first 16 bits, the routing codes the last 4 bytes, little-endian."""
    program = random_program(np.random.default_rng(7))
    program.update({"max": [0x1234, 1, 2, 3, 4, 5, 0xFFFF], "s": 1, "t": 2, "u": 3, "v": 4, "a": 5, "b": 6, "c": 7,
                    "d": 8})
    word, _ = encode_pmag(program)
    expected = bytes.fromhex("3412" "0100" "0200" "0300" "0400" "0500" "ffff" "21" "43" "65" "87")
    assert word == expected, f"expected {expected.hex()}, actual {word.hex()}"


@pytest.mark.parametrize("seed", SEEDS)
def test_pe_word_round_trip(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        fields = {name: int(rng.integers(0, 2)) for name in ("op", "wide", "sr", "transpose", "accumulate", "emit",
                                                             "hold1", "hold2")}
        fields.update({name: int(rng.integers(0, 256)) for name in ("cnt2_outer", "cnt2_inner", "cnt1")})
        word = encode_pe(fields)
        assert len(word) == PE_WORD_BYTES == 4
        assert decode_pe(word) == fields, f"seed {seed}: expected {fields}, decoded {decode_pe(word)}"


@pytest.mark.parametrize("kind, dims, pes", [
    ("fc_ff", dict(h=7, k=9, n=6), 2),                      # looped body: first / accumulate / last pass
    ("conv_ff", dict(n=9, d=2, h=5, w=5, o=3, hk=2, wk=2), 2),   # a run plus a different last pass
    ("maxpool", dict(n=3, c=2, h=4, w=4, r=2), 1),
    ("partition", dict(d=2, h=4, w=4, th=2, tw=2), 4),       # PMAG records only
    ("fc_bp", dict(h=9, k=13, n=5), 3),                      # merged blocks: nested PMAG loop records
    ("conv_up", dict(n=2, d=5, h=4, w=4, o=5, hk=2, wk=2), 2),
])
def test_ibuffer_round_trip(kind, dims, pes):
    layer = compile_layer(kind, dims, pes=pes, pe=dict(lanes=2, in1_depth=64, in2_depth=32, out_depth=4))
    programs, passes = parse_ibuffer(layer.ibuffer)
    assert programs == layer.pmag_programs(), f"{kind}: PMAG programs differ after the iBuffer round trip"
    assert passes == [job.passes for job in layer.pe_jobs], f"{kind}: PE passes differ after the iBuffer round trip"
    words = sum(len(job.passes) for job in layer.pe_jobs)
    assert len(layer.ibuffer) <= 52 * len(programs) + 8 * words, f"{kind}: {len(layer.ibuffer)} B"


def _emitted_blocks(passes):
    return sum(decode_pe(word.to_bytes(4, "little"))["emit"] for word in passes)


@pytest.mark.parametrize("kind, dims, pes, blocks", [
    ("fc_ff", dict(h=13, k=9, n=6), 2, 2 * 7),       # 16-bit: 2 groups of 4 samples x 7 row bands of P = 1 per PE
    ("fc_bp", dict(h=9, k=13, n=5), 3, 3 * 5),       # 3 groups of 2 samples x 5 row bands of P = 1 (L = 8)
    ("conv_up", dict(n=2, d=5, h=4, w=4, o=5, hk=2, wk=2), 2, 3 * 3),   # 3 channel groups x 3 channels per PE
])
def test_merged_results_one_write_program_per_block_in_bus_order(kind, dims, pes, blocks):
    pe = dict(INTEGER, lanes=2, in1_depth=16 if kind != "conv_up" else 64, in2_depth=16, out_depth=4)
    layer = compile_layer(kind, dims, pes=pes, pe=pe)
    words_per_row = pe["lanes"]          # result words per row (16-bit: two elements per word)
    for job in layer.pe_jobs:
        assert job.out.vault == -1 and len(job.out.programs) == _emitted_blocks(job.passes) == blocks, \
            f"{kind} PE {job.pe}: {len(job.out.programs)} write programs for {_emitted_blocks(job.passes)} blocks"
        rows = [pass_rows for pass_rows in (decode_pe(w.to_bytes(4, "little")) for w in job.passes) if pass_rows["emit"]]
        for block, (program, word) in enumerate(zip(job.out.golden(), rows)):
            outputs = (word["cnt2_inner"] if word["transpose"] else word["cnt2_outer"]) + 1
            assert len(program["address"]) - 1 == outputs * words_per_row, \
                f"{kind} PE {job.pe} block {block}: {len(program['address']) - 1} requests for {outputs} rows"
    order = layer.merged_writes()
    assert [pe_index for pe_index, _ in order] == list(range(pes)) * blocks, f"{kind}: merge order {order}"
    for turn, (pe_index, program) in enumerate(order):
        assert program is layer.pe_jobs[pe_index].out.programs[turn // pes], f"{kind}: turn {turn}"
    common_writes = [program for unit, program in layer.pmag_programs() if unit == 0 and program["write"]]
    assert common_writes == [program for _, program in order], f"{kind}: iBuffer order is not the merge order"


def test_merge_order_matters_to_the_executor():
    """The executor writes the bus's interleaved stream with the programs in merge order: reversing the
    merge order must misplace results (so the order is tested, not just the set of programs)."""
    rng = np.random.default_rng(5)
    dims = dict(h=13, k=9, n=6)
    layer = compile_layer("fc_ff", dims, pes=2, pe=dict(INTEGER, lanes=2, in1_depth=16, in2_depth=16, out_depth=4),
                          bits=32)
    w, x = rng.integers(-8, 8, size=(13, 9)), rng.integers(-8, 8, size=(9, 6))
    _assert_equal(execute(layer, {"w": w, "x": x})["output"], w @ x, "merge order")
    order = layer.merged_writes()
    layer.merged_writes = lambda: order[::-1]
    assert not np.array_equal(execute(layer, {"w": w, "x": x})["output"], w @ x), "a reversed order went unseen"


def test_large_fc_layer_fits_the_ibuffer_with_one_program_per_block():
    """256 x 512 x 64 on 4 PEs: 128 merged write programs per PE fold into nested PMAG loop records."""
    layer = compile_layer("fc_ff", dict(h=256, k=512, n=64), pes=4)
    assert len(layer.merged_writes()) == 4 * 128
    assert len(layer.ibuffer) < 1024, f"{len(layer.ibuffer)} B"
    assert parse_ibuffer(layer.ibuffer)[0] == layer.pmag_programs()


# ------------------------------------------------------------------------------------------------ executor

def _conv_reference(x, w):
    _, _, h, wd = x.shape
    _, _, hk, wk = w.shape
    ho, wo = h - hk + 1, wd - wk + 1
    y = np.zeros((x.shape[0], w.shape[0], ho, wo), dtype=np.int64)
    for i in range(hk):
        for j in range(wk):
            y += np.einsum("ndhw,od->nohw", x[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
    return y


def _conv_dims(rng):
    h, w = (int(v) for v in rng.integers(3, 8, size=2))
    return dict(n=int(rng.integers(1, 8)), d=int(rng.integers(1, 4)), h=h, w=w, o=int(rng.integers(1, 5)),
                hk=int(rng.integers(1, 4)), wk=int(rng.integers(1, 4)))


def _setup(rng):
    return int(rng.integers(1, 4)), dict(INTEGER, lanes=int(rng.integers(1, 5)))


@pytest.mark.parametrize("bits", (16, 32))
@pytest.mark.parametrize("seed", SEEDS)
def test_conv_ff(seed, bits):
    rng = np.random.default_rng(seed)
    dims, (pes, pe) = _conv_dims(rng), _setup(rng)
    x = rng.integers(-8, 8, size=(dims["n"], dims["d"], dims["h"], dims["w"]))
    w = rng.integers(-8, 8, size=(dims["o"], dims["d"], dims["hk"], dims["wk"]))
    layer = compile_layer("conv_ff", dims, pes=pes, pe=pe, bits=bits)
    _assert_equal(execute(layer, {"x": x, "w": w})["output"], _conv_reference(x, w),
                  _where(seed, dims=dims, pes=pes, pe=pe, bits=bits))


@pytest.mark.parametrize("seed", SEEDS)
def test_conv_bp_is_full_correlation_with_transposed_kernel(seed):
    rng = np.random.default_rng(100 + seed)
    dims, (pes, pe) = _conv_dims(rng), _setup(rng)
    n, d, h, w, o, hk, wk = dims.values()
    ho, wo = h - hk + 1, w - wk + 1
    dy = rng.integers(-8, 8, size=(n, o, ho, wo))
    kernel = rng.integers(-8, 8, size=(o, d, hk, wk))
    expected = np.zeros((n, d, h, w), dtype=np.int64)   # explicit loops: dX = sum over dY positions
    for i in range(hk):
        for j in range(wk):
            expected[:, :, i:i + ho, j:j + wo] += np.einsum("nohw,od->ndhw", dy, kernel[:, :, i, j])
    dy_padded = np.pad(dy, ((0, 0), (0, 0), (hk - 1, hk - 1), (wk - 1, wk - 1)))
    layer = compile_layer("conv_bp", dims, pes=pes, pe=pe)
    _assert_equal(execute(layer, {"dy_padded": dy_padded, "w": kernel})["output"], expected,
                  _where(seed, dims=dims, pes=pes, pe=pe))


@pytest.mark.parametrize("seed", SEEDS)
def test_conv_up_lowered_to_matmul(seed):
    rng = np.random.default_rng(200 + seed)
    dims, (pes, pe) = _conv_dims(rng), _setup(rng)
    n, d, h, w, o, hk, wk = dims.values()
    ho, wo = h - hk + 1, w - wk + 1
    x = rng.integers(-8, 8, size=(n, d, h, w))
    dy = rng.integers(-8, 8, size=(n, o, ho, wo))
    # dW[o, d] = X[d] correlated with dY[o] (the "large kernel"): numpy.correlate per channel pair.
    expected = np.zeros((o, d, hk, wk), dtype=np.int64)
    for oo in range(o):
        for dd in range(d):
            for i in range(hk):
                for j in range(wk):
                    expected[oo, dd, i, j] = np.sum(dy[:, oo] * x[:, dd, i:i + ho, j:j + wo])
    layer = compile_layer("conv_up", dims, pes=pes, pe=pe)
    _assert_equal(execute(layer, {"x": x, "dy": dy})["output"], expected, _where(seed, dims=dims, pes=pes, pe=pe))


def _fc_setup(seed):
    rng = np.random.default_rng(300 + seed)
    dims = dict(h=int(rng.integers(1, 12)), k=int(rng.integers(1, 12)), n=int(rng.integers(1, 10)))
    pes = int(rng.integers(1, 4))
    # Small buffers so that rows and the reduction are split into several P x L blocks.
    pe = dict(INTEGER, lanes=int(rng.integers(1, 5)), in1_depth=16, in2_depth=8, out_depth=4)
    return rng, dims, pes, pe


@pytest.mark.parametrize("bits", (16, 32))
@pytest.mark.parametrize("seed", SEEDS)
def test_fc_ff_matmul(seed, bits):
    rng, dims, pes, pe = _fc_setup(seed)
    w = rng.integers(-8, 8, size=(dims["h"], dims["k"]))
    x = rng.integers(-8, 8, size=(dims["k"], dims["n"]))
    layer = compile_layer("fc_ff", dims, pes=pes, pe=pe, bits=bits)
    _assert_equal(execute(layer, {"w": w, "x": x})["output"], w @ x, _where(seed, dims=dims, pes=pes, pe=pe, bits=bits))


@pytest.mark.parametrize("seed", SEEDS)
def test_fc_bp_transposed_matmul(seed):
    rng, dims, pes, pe = _fc_setup(10 + seed)
    w = rng.integers(-8, 8, size=(dims["h"], dims["k"]))
    dy = rng.integers(-8, 8, size=(dims["h"], dims["n"]))
    layer = compile_layer("fc_bp", dims, pes=pes, pe=pe)
    assert all(job.passes and all(decode_pe(p.to_bytes(4, "little"))["transpose"] for p in job.passes)
               for job in layer.pe_jobs)
    _assert_equal(execute(layer, {"w": w, "dy": dy})["output"], w.T @ dy, _where(seed, dims=dims, pes=pes, pe=pe))


@pytest.mark.parametrize("seed", SEEDS)
def test_fc_up_outer_products(seed):
    rng, dims, pes, pe = _fc_setup(20 + seed)
    pe["out_depth"] = 2
    dy = rng.integers(-8, 8, size=(dims["h"], dims["n"]))
    x = rng.integers(-8, 8, size=(dims["k"], dims["n"]))
    expected = sum(np.outer(dy[:, i], x[:, i]) for i in range(dims["n"]))
    layer = compile_layer("fc_up", dims, pes=pes, pe=pe)
    _assert_equal(execute(layer, {"dy": dy, "x": x})["output"], expected, _where(seed, dims=dims, pes=pes, pe=pe))


@pytest.mark.parametrize("seed", SEEDS)
def test_maxpool_with_argmax(seed):
    rng = np.random.default_rng(400 + seed)
    radius = int(rng.integers(1, 4))
    n, c = int(rng.integers(1, 8)), int(rng.integers(1, 4))
    ho, wo = (int(v) for v in rng.integers(1, 4, size=2))
    pes, pe = _setup(rng)
    x = rng.integers(-(1 << 15), 1 << 15, size=(n, c, ho * radius, wo * radius))
    if seed == 0:
        x[..., ::2, :] = 7          # ties: the first position wins
    layer = compile_layer("maxpool", dict(n=n, c=c, h=ho * radius, w=wo * radius, r=radius), pes=pes, pe=pe)
    value, index = maxpool_decode(execute(layer, {"x": x})["output"])
    windows = x.reshape(n, c, ho, radius, wo, radius).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, ho, wo, -1)
    where = _where(seed, n=n, c=c, r=radius, pes=pes, pe=pe)
    _assert_equal(value, windows.max(axis=-1), where)
    _assert_equal(index, windows.argmax(axis=-1), where)


@pytest.mark.parametrize("seed", SEEDS)
def test_add_and_remove_pad(seed):
    rng = np.random.default_rng(500 + seed)
    d, h, w, radius = (int(v) for v in (*rng.integers(1, 6, size=3), rng.integers(0, 3)))
    x = rng.integers(-(1 << 31), 1 << 31, size=(d, h, w))
    padded = execute(compile_layer("add_pad", dict(d=d, h=h, w=w, r=radius)), {"x": x})["output"]
    expected = np.pad(x, ((0, 0), (radius, radius), (radius, radius)))
    _assert_equal(padded, expected, _where(seed, d=d, h=h, w=w, r=radius))
    back = execute(compile_layer("remove_pad", dict(d=d, h=h, w=w, r=radius)), {"x": expected})["output"]
    _assert_equal(back, x, _where(seed, d=d, h=h, w=w, r=radius))


@pytest.mark.parametrize("seed", SEEDS)
def test_partition_and_merge(seed):
    rng = np.random.default_rng(600 + seed)
    tiles_h, tiles_w = (int(v) for v in rng.integers(1, 4, size=2))
    d, tile_h, tile_w = (int(v) for v in rng.integers(1, 4, size=3))
    dims = dict(d=d, h=tiles_h * tile_h, w=tiles_w * tile_w, th=tiles_h, tw=tiles_w)
    x = rng.integers(-100, 100, size=(d, dims["h"], dims["w"]))
    where = _where(seed, **dims)
    partition = compile_layer("partition", dims, pes=tiles_h * tiles_w)
    run = execute(partition, {"x": x})
    for pe in range(tiles_h * tiles_w):   # each PE vault holds exactly its tile
        y0, x0 = (pe // tiles_w) * tile_h, (pe % tiles_w) * tile_w
        place = next(p for p in partition.tensors["y"][1] if p.vault == pe)
        tile = run["vaults"][pe][place.base:place.base + place.index.size].reshape(d, tile_h, tile_w)
        _assert_equal(tile, x[:, y0:y0 + tile_h, x0:x0 + tile_w] & 0xFFFFFFFF, f"{where}, PE {pe}")
    merged = execute(compile_layer("merge", dims, pes=tiles_h * tiles_w), {"x": x})["output"]
    _assert_equal(merged, x, where)


def test_stochastic_rounding_equals_the_golden_mac():
    """FC-FF in 32-bit SR-LO mode: the MAC row sequence through nt_mac, built from W and X directly."""
    rng = np.random.default_rng(9)
    rows, cols, n, lanes = 5, 6, 7, 3
    pe = dict(lanes=lanes, frac_bits=16, rounding="sr_lo", seed=77)
    w = rng.integers(-(1 << 18), 1 << 18, size=(rows, cols))
    x = rng.integers(-(1 << 18), 1 << 18, size=(cols, n))
    layer = compile_layer("fc_ff", dict(h=rows, k=cols, n=n), pe=pe, sr=True, bits=32)
    actual = execute(layer, {"w": w, "x": x})["output"]
    groups = -(-n // lanes)
    x_padded = np.zeros((cols, groups * lanes), dtype=np.int64)
    x_padded[:, :n] = x
    a = np.tile(w.reshape(-1), groups)                                     # order (group, row, column)
    xs = np.concatenate([np.tile(x_padded[:, g * lanes:(g + 1) * lanes], (rows, 1)) for g in range(groups)])
    step = np.tile(np.arange(cols), rows * groups)
    ones = np.ones(len(a), dtype=bool)
    words = nt_mac(a & 0xFFFFFFFF, xs & 0xFFFFFFFF, ones, ones, step == 0, step == cols - 1, lanes=lanes,
                   frac_bits=16, rounding="sr_lo", seed=77).astype(np.int64)
    words = words - ((words >> 31) << 32)
    expected = words.reshape(groups, rows, lanes).transpose(1, 0, 2).reshape(rows, -1)[:, :n]
    _assert_equal(actual, expected, "seed 9, sr_lo")
    truncated = compile_layer("fc_ff", dict(h=rows, k=cols, n=n), pe=pe, sr=False, bits=32)
    assert not np.array_equal(execute(truncated, {"w": w, "x": x})["output"], actual), "SR made no difference"


# ------------------------------------------------------------------------------------------------ rejections

@pytest.mark.parametrize("kind, dims, options, field, value, limit", [
    ("add_pad", dict(d=1, h=2, w=70000, r=1), {}, "loop 'w' (PMAG R3", 69999, 65535),
    # beyond the direct lowering's ranges and buffers: tiled (im2col copy + FC FF matmul) instead of rejected
    ("conv_ff", dict(n=1, d=1, h=3, w=3, o=300, hk=1, wk=1), dict(pe=dict(in1_depth=1024)), None, None, None),
    ("conv_ff", dict(n=1, d=4, h=5, w=5, o=8, hk=3, wk=3), {}, None, None, None),
    ("conv_bp", dict(n=1, d=1, h=4, w=4, o=9, hk=3, wk=3), dict(pe=dict(in2_depth=64)), None, None, None),
    ("fc_up", dict(h=8, k=2, n=3), dict(pe=dict(out_depth=2, in1_depth=4)), None, None, None),
    ("conv_ff", dict(n=64, d=1, h=4, w=4, o=1, hk=1, wk=1), dict(pe=dict(lanes=1), ibuffer_limit=150),
     "iBuffer image", None, 150),
    ("maxpool", dict(n=1, c=1, h=32, w=32, r=16), dict(pe=dict(index_bits=4, in2_depth=512)), "argmax", 255, 15),
])
def test_rejections_name_field_value_and_limit(kind, dims, options, field, value, limit):
    if field is None:           # a fitting layer must compile (the cases around it are just over the limits)
        compile_layer(kind, dims, **options)
        return
    with pytest.raises(ProgramError) as error:
        compile_layer(kind, dims, **options)
    assert field in error.value.field, f"expected field containing {field!r}, got {error.value.field!r}"
    if value is not None:
        assert error.value.value == value, f"expected value {value}, got {error.value.value}"
    assert error.value.limit == limit, f"expected limit {limit}, got {error.value.limit}"
    assert str(limit) in str(error.value) and error.value.field in str(error.value)


def test_dimension_errors():
    with pytest.raises(ValueError, match="takes dimensions"):
        compile_layer("fc_ff", dict(h=1, k=1))
    with pytest.raises(ValueError, match="unknown"):
        compile_layer("lstm", {})
    with pytest.raises(ValueError, match="bits = 16"):
        compile_layer("fc_bp", dict(h=1, k=1, n=1), bits=16)
    assert set(LAYERS) >= {"conv_ff", "conv_bp", "conv_up", "fc_ff", "fc_bp", "fc_up", "maxpool", "add_pad",
                           "remove_pad", "partition", "merge"}


# ------------------------------------------------------------------------------------------------ CLI

def _cli(capsys, *args):
    """``trainforge neurotrainer compile ARGS`` through this module's own parser (exit 2 on UsageError, as
    ``trainforge.cli.main``), so other families' CLI modules being edited cannot break this test."""
    parser = argparse.ArgumentParser(prog="trainforge neurotrainer")
    cmd_compile.add_commands(parser.add_subparsers(dest="command", required=True))
    parsed = parser.parse_args(["compile", *args])
    try:
        code = parsed.func(parsed)
    except UsageError as error:
        print(f"trainforge neurotrainer: {error}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_and_errors(capsys):
    code, out, err = _cli(capsys, "--layer", "conv_ff", "--dims", "n=4,d=2,h=6,w=6,o=3,hk=3,wk=3", "--pes", "2",
                          "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert all(len(bytes.fromhex(p["word"])) == 18 for p in summary["pmag"])
    assert all(len(bytes.fromhex(w)) == 4 for pe in summary["pe"] for w in pe["words"])
    assert summary["ibuffer_bytes"] > 0 and summary["bits"] == 16
    assert summary["merged_writes"] == 0
    code, out, err = _cli(capsys, "--layer", "fc_bp", "--dims", "h=3,k=5,n=2")
    assert code == 0 and "PMAG in1 0" in out and "PE 0:" in out, (code, out, err)
    code, out, err = _cli(capsys, "--layer", "fc_ff", "--dims", "h=8,k=6,n=9", "--pes", "2")
    assert code == 0 and "of which 4 merged write programs, one per result block" in out, (code, out, err)
    for args, message in ((("--layer", "conv_ff", "--dims", "n=1,d=1,h=3,w=3,o=300,hk=1,wk=1", "--pe",
                            "in1_depth=1024", "--ibuffer-bytes", "100"), "iBuffer image"),
                          (("--layer", "conv_ff", "--dims", "n=1,d=1,h=3,w=3,o=3,hk=1,wk=1,s=0"), "at least 1"),
                          (("--layer", "nope", "--dims", "a=1"), "unknown"),
                          (("--layer", "fc_ff", "--dims", "h=1,k=1"), "takes dimensions"),
                          (("--layer", "fc_ff", "--dims", "h=1,k=x,n=1"), "integer"),
                          (("--layer", "fc_ff", "--dims", "h=1,k=1,n=1", "--pe", "lanes=0"), "lanes")):
        code, out, err = _cli(capsys, *args)
        assert code == 2 and message in err, (args, code, err)
