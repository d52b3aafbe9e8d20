"""Regression tests for modelling bugs found while reproducing Figs. 12-15 of DeepSpatialMatrix."""
import subprocess
import sys

import numpy as np
import pytest

from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.explore import Optimizations, explore
from trainforge.sim.dsm.model import evaluate_pass
from trainforge.sim.dsm.workload import Layer, gnmt, vgg16


def test_pipelined_layers_keep_their_bwd_pass():
    # A pipe stage was explored as a one-layer network, whose "first layer" skipped BWD:
    # every pipelined layer lost a third of its training time.
    workload = gnmt(64)
    result = explore(workload, default_architecture(), Optimizations(True, True, False, True))
    pipelined = [layer for layer in result.layers if layer.pipelined]
    assert pipelined, "GNMT's unidirectional LSTM stacks should be pipelined at N_mb=64"
    first = workload.layers[0].name
    assert any(layer.name != first for layer in pipelined)
    for layer in pipelined:
        # The network's first layer (enc0, pipelined with its stack) has no error to propagate.
        expected = {"FWD", "UPD"} if layer.name == first else {"FWD", "BWD", "UPD"}
        assert set(layer.passes) == expected, layer.name


def test_pooled_output_written_is_the_next_layers_input():
    # The FWD WriteOut of a pooled layer carries the pooled tensor that the next layer fetches.
    workload = vgg16(256)
    producer, consumer = workload.layers[1], workload.layers[2]      # CONV1_2 (maxpool 2x2) -> CONV2_1
    assert producer.pool_stride == 2
    arch = default_architecture()
    written = evaluate_pass(producer, "FWD", "Data", arch, 256)["transfers"]["WriteOut"]
    fetched = evaluate_pass(consumer, "FWD", "Data", arch, 256)["transfers"]["FetchInp"]
    assert np.min(written) == pytest.approx(np.min(fetched), rel=1e-9)
    unpooled = Layer("p", "conv", 64, 64, 224 * 224, 9, aux=("bias", "relu"))
    full = evaluate_pass(unpooled, "FWD", "Data", arch, 256)["transfers"]["WriteOut"]
    assert np.min(full) == pytest.approx(4 * np.min(written), rel=1e-9)


def test_default_sweep_never_imports_dask(tmp_path):
    code = ("import sys\n"
            "from trainforge.cli import main\n"
            f"assert main(['dsm', 'sweep', 'inference', '--networks', 'gnmt', '--values', '1', '--out', {str(tmp_path)!r}]) == 0\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_gnmt_bidirectional_layer_is_the_first_decoder():
    # Section IV: "GNMT has 8 decoder and encoder LSTM layers with the first decoder being a
    # bidirectional LSTM". A bidirectional layer is not pipelined, so it splits the pipe groups.
    from trainforge.errors import ConfigError
    from trainforge.sim.dsm.explore import _pipe_groups
    workload = gnmt()
    assert [layer.name for layer in workload.layers if layer.bidirectional] == ["dec0"]
    groups = [[workload.layers[p].name for p in group] for group in _pipe_groups(workload)]
    assert groups == [[f"enc{k}" for k in range(8)], ["attention"] + [f"dec{k}" for k in range(1, 8)]]
    assert [layer.name for layer in gnmt(bidirectional="enc0").layers if layer.bidirectional] == ["enc0"]
    with pytest.raises(ConfigError, match="bidirectional='dec3' is not one of dec0, enc0"):
        gnmt(bidirectional="dec3")
