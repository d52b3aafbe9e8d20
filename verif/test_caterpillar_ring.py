"""Unit tests of the ring golden model's RTL rules (buffers, chunks, schedules) in golden/caterpillar/ring.py."""
import numpy as np
import pytest

from trainforge.golden.caterpillar import core, ring


@pytest.mark.parametrize("cores,n_r,size", [(2, 2, 1), (3, 4, 13), (4, 2, 17), (2, 4, 32)])
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


@pytest.mark.parametrize("cores,n_r,size", [(2, 4, 64), (3, 2, 7), (4, 4, 100)])
def test_ring_schedule_of_collectives_is_collective_cycles(cores, n_r, size):
    cw = ring.chunk_words(size, cores, n_r)
    for op in (ring.RING_ALL_GATHER, ring.RING_REDUCE_SCATTER):
        schedule = ring.ring_schedule(op, cores=cores, n_r=n_r, words=cw)
        assert schedule.issue_cycles == ring.collective_cycles(size, cores, n_r), (cores, n_r, size)


def test_two_core_gemv_cycles_are_one_hop_after_one_core(seed):
    generator = np.random.default_rng(seed)
    weights = generator.integers(-20, 20, size=(9, 5))
    _, forward = ring.two_core_gemv_forward(weights, np.ones(9), n_r=2)
    _, backward = ring.two_core_gemv_backward(weights, np.ones(5), n_r=2)
    for op, cycles in ((core.OP_GEMV_FORWARD, forward), (core.OP_GEMV_BACKWARD, backward)):
        single = core.schedule(op, 3, 3, n_r=2)
        assert cycles == (core.COMMAND_LATENCY + single.output_offsets[-1] + ring.HOP_CYCLES
                          + ring.RING_OUTPUT_LATENCY), (op, cycles)
