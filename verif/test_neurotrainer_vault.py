"""The vault golden model (``golden/neurotrainer/vault.py``) against a request-by-request reference."""
import numpy as np
import pytest

from trainforge.golden.neurotrainer.vault import nt_vault
from trainforge.hw.neurotrainer.vault import NTVault
from trainforge.errors import ParameterError


@pytest.mark.parametrize("depth,latency,interval", [(16, 3, 2), (2, 1, 1), (1024, 20, 5)])
def test_reads_see_the_last_earlier_write_and_leave_after_latency(depth, latency, interval):
    rng = np.random.default_rng(depth)
    count = 2000
    address = rng.integers(0, 1 << 32, count)
    write = rng.random(count) < 0.5
    data = rng.integers(0, 1 << 32, count)
    initial = rng.integers(0, 1 << 32, depth)
    result = nt_vault(address, write, data, depth=depth, latency=latency, interval=interval, memory=initial)
    memory, reads, cycles = initial.copy(), [], []
    for index, (word, is_write, value) in enumerate(zip(address % depth, write, data)):
        if is_write:
            memory[word] = value
        else:
            reads.append(memory[word])
            cycles.append(index * interval + latency)
    np.testing.assert_array_equal(result["data"], np.array(reads, dtype=np.uint64))
    np.testing.assert_array_equal(result["cycles"], cycles)
    np.testing.assert_array_equal(result["memory"], memory.astype(np.uint64))


def test_depth_must_be_a_power_of_two():
    with pytest.raises(ParameterError, match="depth"):
        NTVault(depth=48)
