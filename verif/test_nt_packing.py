"""16-bit packing of NeuroTrainer (``spec/neurotrainer/packing.py``): two elements per 32-bit word.

The word format (first element in the low half, an odd tail padded), the compiled 16-bit streams'
request counts (two elements per request, every weight read once), and the BUF Input 1 words the
executor derives from them (each weight in both halves, an odd block's last high half dropped).
The system RTL is checked against the same images by ``verif/tb_nt_system.py``.
"""
import numpy as np
import pytest

from trainforge.golden.neurotrainer.pe import pass_shape
from trainforge.sim.neurotrainer import executor
from trainforge.sim.neurotrainer.compiler import compile_layer
from trainforge.sim.neurotrainer.program_time import program_requests
from trainforge.spec.neurotrainer.packing import pack_words, unpack_words
from trainforge.spec.neurotrainer.pe_program import decode_pe_program

PE = dict(lanes=2, in1_depth=64, in2_depth=32, out_depth=8, frac_bits=0, frac_bits16=0, rounding="truncate")


def test_word_format_first_element_in_the_low_half_and_an_odd_tail_padded_with_zero():
    assert pack_words([1, 2, 3], 16).tolist() == [0x00020001, 0x00000003]
    assert pack_words([-1, -2], 16).tolist() == [0xFFFEFFFF]
    assert unpack_words([0xFFFEFFFF], 16).tolist() == [0xFFFF, 0xFFFE]
    assert pack_words([-1, 7], 32).tolist() == [0xFFFFFFFF, 7]


def _requests(stream):
    return sum(program_requests(program) for program in stream.programs)


@pytest.mark.parametrize("kind, dims", [
    ("fc_ff", dict(h=5, k=7, n=5)),                                 # odd reduction: padded to an even block
    ("conv_ff", dict(n=3, d=1, h=4, w=4, o=3, hk=3, wk=3)),         # direct: one kernel block of 27 weights
    ("conv_ff", dict(n=2, d=2, h=5, w=5, o=3, hk=3, wk=3, s=2, p=1)),   # tiled: the matmul streams
])
def test_16_bit_streams_request_two_elements_per_word(kind, dims):
    layer = compile_layer(kind, dims, pes=2, pe=PE, bits=16)
    lanes = PE["lanes"]
    for job in layer.pe_jobs:
        outputs = sum(pass_shape(decode_pe_program(word))[2] for word in job.passes
                      if decode_pe_program(word)["emit"])
        assert _requests(job.in1) == sum(-(-w // 2) for w in job.in1_blocks), "BUF1: W / 2 words per block"
        assert _requests(job.in2) == sum(job.in2_blocks) * lanes, "BUF2: k words (2k elements) per row"
        assert _requests(job.out) == outputs * lanes, "results: k words (2k elements) per row"
    wide = compile_layer(kind, dims, pes=2, pe=PE, bits=32)
    assert sum(layer.vault_words.values()) < sum(wide.vault_words.values())


def test_vault_words_hold_the_tensors_two_per_word_low_half_first():
    layer = compile_layer("fc_ff", dict(h=5, k=7, n=5), pes=2, pe=PE, bits=16)
    rng = np.random.default_rng(5)
    inputs = {"w": rng.integers(-32768, 32768, size=(5, 7)), "x": rng.integers(-32768, 32768, size=(7, 5))}
    vaults = executor.load(layer, inputs)
    for name in layer.inputs:
        flat = inputs[name].reshape(-1)
        for place in layer.tensors[name][1]:
            assert place.base % 2 == 0, f"{name}: placement at an odd slot"
            for offset, element in enumerate(place.index):
                slot = place.base + offset
                word = int(vaults[place.vault][slot // 2])
                half = (word >> (16 * (slot % 2))) & 0xFFFF
                assert half == (int(flat[element]) & 0xFFFF if element >= 0 else 0), (name, slot)


def test_buf1_words_are_each_weight_in_both_halves_and_an_odd_block_drops_its_last_high_half():
    dims = dict(n=3, d=1, h=4, w=4, o=3, hk=3, wk=3)
    layer = compile_layer("conv_ff", dims, pes=2, pe=PE, bits=16)
    kernel = np.arange(1, 28).reshape(3, 1, 3, 3) * 101 - 1500
    vaults = executor.load(layer, {"x": np.zeros((3, 1, 4, 4), dtype=np.int64), "w": kernel})
    blocks1, _ = executor.pe_buffer_images(layer, vaults, layer.pe_jobs[0])
    weights = kernel.reshape(-1) & 0xFFFF
    assert [block.tolist() for block in blocks1] == [(weights | weights << 16).tolist()]
    assert _requests(layer.pe_jobs[0].in1) == 14


@pytest.mark.regress
def test_alexnet_fc3_ff_packed_16_bit_at_full_size_equals_numpy():
    """AlexNet FC3 FF (1000 x 4096, 5 samples) in the packed 16-bit mode through the reference executor
    (about 90 s on a loaded machine); |W x| stays below 2**15."""
    dims = dict(h=1000, k=4096, n=5)
    layer = compile_layer("fc_ff", dims, pe=dict(frac_bits=0, frac_bits16=0), bits=16)
    rng = np.random.default_rng(0)
    weights, x = rng.integers(-1, 2, (dims["h"], dims["k"])), rng.integers(-2, 3, (dims["k"], dims["n"]))
    np.testing.assert_array_equal(executor.execute(layer, {"w": weights, "x": x})["output"], weights @ x)
