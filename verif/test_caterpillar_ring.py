"""Unit tests of the ring golden model's RTL rules (buffers, chunks, schedules) in golden/caterpillar/ring.py."""
import numpy as np
import pytest

from trainforge.golden.caterpillar import core, ring


@pytest.mark.parametrize("cores,n_r,size", [(2, 2, 1), (3, 4, 13), (4, 2, 17), (2, 4, 32), (8, 2, 37), (8, 3, 200)])
def test_buffer_collectives_match_vector_collectives(cores, n_r, size, seed):
    generator = np.random.default_rng(seed)
    cw = ring.chunk_words(size, cores, n_r)
    partials = generator.integers(-(1 << 31), 1 << 31, size=(cores, size))
    buffers = np.stack([ring.vector_words(partial, cores * cw, n_r) for partial in partials])
    scattered = ring.reduce_scatter_buffers(buffers, cw)
    expected = ring.reduce_scatter(partials, elements_per_word=n_r)
    total = (partials.sum(axis=0) + (1 << 31)) % (1 << 32) - (1 << 31)
    assert np.array_equal(np.concatenate(expected), total), \
        f"chunks of n_r={n_r} words: expected {total} got {np.concatenate(expected)} seed={seed}"
    for k, chunk in enumerate(expected):
        held = scattered[k, k * cw:(k + 1) * cw].reshape(-1)[:len(chunk)]
        assert np.array_equal(held, chunk), f"core {k}: expected {chunk} got {held} seed={seed}"
    gathered = ring.all_gather_buffers(scattered, cw)
    reduced = np.concatenate([scattered[k, k * cw:(k + 1) * cw] for k in range(cores)])
    for k in range(cores):
        assert np.array_equal(gathered[k], reduced), f"core {k} after all-gather, seed={seed}"


@pytest.mark.parametrize("cores,n_r,size", [(2, 4, 64), (3, 2, 7), (4, 4, 100), (8, 2, 100)])
def test_ring_schedule_of_collectives_is_collective_cycles(cores, n_r, size):
    cw = ring.chunk_words(size, cores, n_r)
    for op in (ring.RING_ALL_GATHER, ring.RING_REDUCE_SCATTER):
        schedule = ring.ring_schedule(op, cores=cores, n_r=n_r, words=cw)
        assert schedule.issue_cycles == ring.collective_cycles(size, cores, n_r), (cores, n_r, size)


@pytest.mark.parametrize("cores", [2, 3, 8])
def test_ring_gemv_forward_is_one_core_plus_a_hop_per_core(cores, seed):
    """The chain of adds: the last word leaves ``cores - 1`` hops after a single core's, plus the output stage."""
    generator = np.random.default_rng(seed)
    weights = generator.integers(-20, 20, size=(9 * cores, 5))
    _, forward = ring.ring_gemv_forward(weights, np.ones(9 * cores), n_r=2, cores=cores)
    single = core.schedule(core.OP_GEMV_FORWARD, -(-core.blocks(9 * cores, 2) // cores), 3, n_r=2)
    assert forward == (core.COMMAND_LATENCY + single.output_offsets[-1] + (cores - 1) * ring.HOP_CYCLES
                       + ring.RING_OUTPUT_LATENCY), (cores, forward)


@pytest.mark.parametrize("cores", [2, 4, 8])
def test_ring_gemv_backward_words_without_contention(cores):
    """A core period of at least ``cores`` cycles (nb = cores blocks, no overlap): word ``b`` of core ``k`` lands
    ``k`` hops after core 0's, is read the cycle after (1), crosses the buffer's read register and the read-out
    register behind it (2), enters the output stage and is on ``o_data`` one cycle later (1): landing + 4."""
    mb, nb = 3, cores
    single = core.schedule(core.OP_GEMV_BACKWARD, mb, nb, n_r=2)
    schedule = ring.ring_schedule(ring.RING_GEMV_BACKWARD, mb=mb, nb=nb, cores=cores, n_r=2)
    expected = [core.COMMAND_LATENCY + int(single.output_offsets[b]) + k * ring.HOP_CYCLES + 4
                for b in range(mb) for k in range(cores)]
    assert schedule.output_offsets.tolist() == expected, cores


@pytest.mark.parametrize("cores,words", [(2, 3), (3, 1), (8, 4)])
def test_ring_read_words_and_spacing(cores, words):
    """READ of ``words`` per core: the first read one cycle after acceptance, two cycles in the buffer's read
    register and the read-out register, one in the output stage: word ``j`` on ``o_data`` at ``A + 4 + j``; the
    next command is accepted in the cycle the last word is on ``o_data``: spacing ``cores * words + 3``."""
    schedule = ring.ring_schedule(ring.RING_READ, cores=cores, n_r=2, words=words)
    assert schedule.output_offsets.tolist() == [4 + j for j in range(cores * words)], (cores, words)
    assert schedule.issue_cycles + core.COMMAND_LATENCY == cores * words + 3, (cores, words)


def test_ring_gemv_backward_words_contend_for_the_port():
    """Eight cores producing a word every 2 cycles (nb 1, overlap, bus reduction of 2 PEs): after the first
    word, o_data carries one word every cycle."""
    schedule = ring.ring_schedule(ring.RING_GEMV_BACKWARD, mb=4, nb=1, cores=8, n_r=2, overlap=True)
    offsets = schedule.output_offsets
    assert offsets.tolist() == list(range(offsets[0], offsets[0] + 32)), offsets.tolist()
