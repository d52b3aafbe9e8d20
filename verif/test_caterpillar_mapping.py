"""CATERPILLAR architecture model: CP's mapping of layers onto cores, DFA's schedule, Fig. 10.

Every expected cycle count is worked by hand below from the rules of
hw/caterpillar/README.md ("Exact rules"): on ``n_r = 2`` with the bus
reduction ``R = n_r - 1 = 1``; a GEMV forward is ``Nb`` blocks of ``Mb`` MAC
cycles, a backward ``Mb`` blocks of ``Nb``; each block is followed by a gap of
``R + 1 = 2`` cycles without overlap and ``max(0, 2 - steps)`` with it, and the
last block always drains (2); UPDATE takes ``b * Mb * (Nb + 1)`` cycles plus its read-after-write drain of
``EXECUTE_LATENCY - READ_STAGE_LATENCY + UPDATE_WRITE_BACK_STAGES - 1 = 5 - 1 + 3 - 1 = 6``; every
command adds ``COMMAND_LATENCY = 1``; a ring collective of ``s`` elements over
``P`` cores takes ``(P - 1) * (ceil(ceil(s / P) / n_r) + 1)`` cycles.
"""
import pytest

from trainforge.sim.caterpillar import arch

#: Two cores (``C = 1``) of 2 x 2 PEs, bus reduction.
TINY = arch.Config("tiny", c=1, n_r=2, reduction="bus")


def test_cp_splits_three_layers_over_two_cores_in_equal_shares():
    """2-2-2-2 (three 2 x 2 layers, 12 weights) on 2 cores.

    Each core takes 6 weights in layer order: core 0 layer 1 (2 rows) and row 1
    of layer 2, core 1 row 2 of layer 2 and layer 3 (2 rows). Per core:
    - a whole 2 x 2 layer (Mb = Nb = 1) alone on its core: forward one block of
      1 MAC, which drains (2): 3; backward 3; UPDATE 1 * 1 * (1 + 1) + 6 = 8;
      3 commands: 3; no exchange: 3 + 3 + 8 + 3 = 17;
    - one row of layer 2 (Mb = Nb = 1), shared by 2 cores: 3 + 3 + 8 + 3 = 17,
      plus the exchange 2 * coll(2) + 2 * coll(2) with coll(2) = 1 * (1 + 1) = 2:
      8, so 25.
    A pipeline step is 17 + 25 = 42 cycles on both cores; 10 samples and the
    2 L = 6 steps of filling and draining: 16 * 42 = 672 cycles.
    The former rule gave each layer its own core (3 cores on a 2-core array):
    16 * 17 = 272.
    """
    timing = arch.epoch_cycles((2, 2, 2, 2), "CP", 10, TINY)
    assert timing["cycles"] == 672, timing
    # 10 samples x 3 passes x 12 weights over 672 cycles x 8 PEs
    assert timing["utilization"] == pytest.approx(360 / (672 * 8)), timing
    mapping = arch.cp_allocation(arch.layer_shapes((2, 2, 2, 2)), TINY)
    assert mapping["mapping"] == "equal shares", mapping
    assert mapping["pieces"] == [[(0, 2), (1, 1)], [(1, 1), (2, 2)]], mapping
    assert mapping["stage_cycles"] == 42, mapping


def test_cp_every_core_mapping_on_one_wide_layer():
    """One 4 x 2 layer (8 weights) on 2 cores: the three mappings by hand.

    - groups (the layer on both cores, 2 rows each, Mb = Nb = 1): 3 + 3 + 8 + 3 = 17 plus the exchange
      2 * coll(2) + 2 * coll(4) = 2 * 2 + 2 * (1 * (1 + 1)) = 8: 25;
    - equal shares: the same two panels (4 weights each): 25;
    - every core: again the same two panels: 25.
    The first of equal candidates is kept: "groups"; (10 + 2) * 25 = 300 cycles.
    """
    timing = arch.epoch_cycles((4, 2), "CP", 10, TINY)
    assert timing["cycles"] == 300, timing
    assert timing["cp_mapping"] == "groups", timing


def test_dfa_has_its_own_schedule():
    """2-4-2 on 2 cores, one sample per update. DFA per sample:
    - layer 1 (2 x 4) forward, row panels of ceil(2 / 2) = 1 row: Mb = 1, Nb = 2: 2 blocks of 1 MAC + gap 2:
      (2 - 1) * 3 + 1 + 2 = 6, + 1 command, + 2 * coll(4) = 2 * (1 * (1 + 1)) = 4: 11;
      UPDATE 1 * 1 * (2 + 1) + 6 = 9, + 1: 10;
    - layer 2 (4 x 2) forward, 2 rows per core: Mb = 1, Nb = 1: 3, + 1, + 2 * coll(2) = 4: 8; UPDATE 2 + 6 + 1 = 9;
    - the feedback of hidden layer 1, B_1^T e: e of 2 (Mb = 1), 4 outputs in column panels of 2 (Nb = 1): 3,
      + 1, + coll(4) = 2: 6.
    Sum 11 + 10 + 8 + 9 + 6 = 44 per sample: 440 for 10 samples.
    SGD per sample (forward and backward GEMV through W of every layer, then the update):
    - layer 1: forward 6; backward Mb = 1, Nb = ceil(4 / 2) / 2 = 1: 3; 2 commands; exchange
      2 * coll(4) + 2 * coll(2) = 8; UPDATE 10: 6 + 3 + 2 + 8 + 10 = 29;
    - layer 2: forward 3; backward Mb = 2, Nb = 1: 3 + 1 + 2 = 6; 2; exchange 8; UPDATE 9: 28.
    57 per sample: 570 (what DFA was timed with before).
    """
    assert arch.epoch_cycles((2, 4, 2), "DFA", 10, TINY)["cycles"] == 440
    assert arch.epoch_cycles((2, 4, 2), "SGD", 10, TINY)["cycles"] == 570


@pytest.mark.parametrize("network", list(arch.NETWORKS))
@pytest.mark.parametrize("config", list(arch.CONFIGS))
def test_cp_utilization_is_not_below_sgd(network, config):
    """SGD's mapping is one of CP's candidates (with overlapped reductions), so the mapping does not cap CP
    below SGD; checked on every network and array of the study."""
    widths = arch.NETWORKS[network]
    cp = arch.epoch_cycles(widths, "CP", 1797, arch.CONFIGS[config])["utilization"]
    sgd = arch.epoch_cycles(widths, "SGD", 1797, arch.CONFIGS[config])["utilization"]
    assert cp >= sgd, f"{network} on {config}: CP {cp:.3f} < SGD {sgd:.3f}"


def test_gflops_per_mm2_by_hand():
    """2 x 16 cores of 4 x 4 PEs: 512 PEs at 1 GHz; Table 1's area 512 * (0.0056 + 0.0617) + 32 * 1.948
    = 34.4576 + 62.336 = 96.7936 mm^2. At utilization 0.5: 256 GMAC/s / 96.7936 = 2.64480...; over the
    paper's 103.2 mm^2: 2.48062...; 2 x 4 cores of 16 x 16 (2048 PEs) at the paper's 99% over 178.9 mm^2:
    2027.52 / 178.9 = 11.3332..."""
    small, large = arch.CONFIGS["2x16-cores-4x4"], arch.CONFIGS["2x4-cores-16x16"]
    assert arch.area_mm2(small) == pytest.approx(96.7936)
    assert arch.gflops_per_mm2(0.5, small) == pytest.approx(256 / 96.7936)
    assert arch.gflops_per_mm2(0.5, small, 103.2) == pytest.approx(256 / 103.2)
    assert arch.gflops_per_mm2(0.99, large, 178.9) == pytest.approx(2027.52 / 178.9)


def test_fig10_rows_price_our_utilization_and_the_papers():
    from trainforge.commands.caterpillar import cli

    result = cli.fig10()
    rows = {(row["network"], row["config"], row["method"]): row for row in result["rows"]}
    assert len(rows) == 5 * 4, sorted(rows)
    row = rows["2500-2000-1500-1000-500-10", "2x4-cores-16x16", "CP"]
    assert row["paper_gflops_per_mm2"] == pytest.approx(2027.52 / 178.9, abs=1e-3), row
    timing = arch.epoch_cycles(arch.NETWORKS[row["network"]], "CP", 1797, arch.CONFIGS[row["config"]])
    assert row["gflops_per_mm2"] == pytest.approx(timing["utilization"] * 2048 / (2048 * 0.0673 + 8 * 1.948),
                                                  abs=1e-3), row
    assert rows["500x4-10", "2x16-cores-4x4", "SGD"]["paper_gflops_per_mm2"] is None
