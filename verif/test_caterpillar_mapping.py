"""CATERPILLAR architecture model: CP's mapping of layers onto cores, DFA's schedule, Fig. 10.

Every expected cycle count is worked by hand below from the rules of
hw/caterpillar/README.md ("Exact rules"): on ``n_r = 2`` with the bus
reduction ``R = n_r - 1 = 1``; a GEMV forward is ``Nb`` blocks of ``Mb`` MAC
cycles, a backward ``Mb`` blocks of ``Nb``; each block is followed by a gap of
``R + 1 = 2`` cycles without overlap and ``max(0, 2 - steps)`` with it, and the
last block always drains (2); UPDATE takes ``b * Mb * (Nb + 1)`` cycles plus its read-after-write drain of
``EXECUTE_LATENCY - READ_STAGE_LATENCY + update_write_back_stages - 1 = 5 - 1 + 3 - 1 = 6`` (fixed); every
command adds ``COMMAND_LATENCY = 1``; a ring collective of ``s`` elements over
``P`` cores takes ``(P - 2) * max(cw + 1, 3) + cw + 2`` cycles, ``cw = ceil(ceil(s / P) / n_r)``: a word lands
2 cycles after its read (the hop and the landing register), a step lasts at least 3 cycles (the next step reads
what this one landed), and the command lasts until the last step's last word has landed (it was
``(P - 1) * (cw + 1)`` before the landing register). On 2 cores of ``n_r = 2`` every collective below has
``cw = 1``: ``coll(2) = coll(4) = 0 + 1 + 2 = 3`` (was 2).

A GEMV of a layer in row panels over ``P`` cores is the ring's GEMV command (Fig. 4 on ``P`` cores), which
waits for its last output word: a core's last GEMV output leaves ``EXECUTE_LATENCY + OUTPUT_LATENCY = 5``
cycles after the end of its issue cycles (``I``); the ring adds its command cycle (1), forward the chain
of adds (``P - 1`` hops) and its output stage (1), so a forward command takes ``I + P + 7`` cycles from
acceptance to the next acceptance (the core's read stage included); backward, core ``k``'s words land ``k``
hops after core 0's, each is read the cycle after its landing (one word a cycle), crosses the buffer's read
register and the read-out register behind it (2) and enters the output stage: ``I + P + 10`` when no two words
contend for the port (every case below; ``I + P + 9`` before the read-out register). Between layers: one collective of the layer's
``n`` outputs (from the end of the chain to the cores) and one of its ``m`` backward outputs (an
all-gather, the next layer's error on every core).
"""
import pytest

from trainforge.sim.caterpillar import arch

#: Two cores (``C = 1``) of 2 x 2 PEs, bus reduction.
TINY = arch.Config("tiny", c=1, n_r=2, reduction="bus")


def test_cp_splits_three_layers_over_two_cores_in_equal_shares():
    """2-2-2-2 (three 2 x 2 layers, 12 weights) on 2 cores.

    Each core takes 6 weights in layer order: core 0 layer 1 (2 rows) and row 1
    of layer 2, core 1 row 2 of layer 2 and layer 3 (2 rows). Per core:
    - a whole 2 x 2 layer (Mb = Nb = 1) alone on its core (P = 1): forward one block of
      1 MAC, which drains (2): I = 3, command 3 + 1 + 7 = 11 (the execute pipeline's 5 stages, one of them
      the read stage); backward 3 + 1 + 10 = 14;
      UPDATE 1 * 1 * (1 + 1) + 6 = 8, + 1 command: 9; no exchange: 11 + 14 + 9 = 34;
    - one row of layer 2 (Mb = Nb = 1), shared by P = 2 cores: forward 3 + 2 + 7 = 12, backward
      3 + 2 + 10 = 15, UPDATE 9, exchange coll(2) + coll(2) with coll(2) = 1 + 2 = 3: 6; 42.
    A pipeline step is 34 + 42 = 76 cycles on both cores; 10 samples and the
    2 L = 6 steps of filling and draining: 16 * 76 = 1216 cycles.
    (Every core holding a row of each layer: 3 * 42 = 126 per step, slower.)
    """
    timing = arch.epoch_cycles((2, 2, 2, 2), "CP", 10, TINY)
    assert timing["cycles"] == 1216, timing
    # 10 samples x 3 passes x 12 weights over 1216 cycles x 8 PEs
    assert timing["utilization"] == pytest.approx(360 / (1216 * 8)), timing
    mapping = arch.cp_allocation(arch.layer_shapes((2, 2, 2, 2)), TINY)
    assert mapping["mapping"] == "equal shares", mapping
    assert mapping["pieces"] == [[(0, 2), (1, 1)], [(1, 1), (2, 2)]], mapping
    assert mapping["stage_cycles"] == 76, mapping


def test_cp_every_core_mapping_on_one_wide_layer():
    """One 4 x 2 layer (8 weights) on 2 cores: the three mappings by hand.

    - groups (the layer on both cores, 2 rows each, Mb = Nb = 1, I = 3): forward 3 + 2 + 7 = 12, backward
      3 + 2 + 10 = 15 (a GEMV's output offsets include the core's read stage), UPDATE 9, exchange
      coll(2) + coll(4) = 3 + 3 = 6: 42;
    - equal shares: the same two panels (4 weights each): 42;
    - every core: again the same two panels: 42.
    The first of equal candidates is kept: "groups"; (10 + 2) * 42 = 504 cycles.
    """
    timing = arch.epoch_cycles((4, 2), "CP", 10, TINY)
    assert timing["cycles"] == 504, timing
    assert timing["cp_mapping"] == "groups", timing


def test_dfa_has_its_own_schedule():
    """2-4-2 on 2 cores, one sample per update. DFA per sample:
    - layer 1 (2 x 4) forward, row panels of ceil(2 / 2) = 1 row: Mb = 1, Nb = 2: 2 blocks of 1 MAC + gap 2:
      I = (2 - 1) * 3 + 1 + 2 = 6, the ring command 6 + 2 + 7 = 15 (the core's read stage included),
      + coll(4) = 1 + 2 = 3: 18;
      UPDATE 1 * 1 * (2 + 1) + 6 = 9, + 1: 10;
    - layer 2 (4 x 2) forward, 2 rows per core: Mb = 1, Nb = 1: I = 3, 3 + 9 = 12, + coll(2) = 3: 15;
      UPDATE 2 + 6 + 1 = 9;
    - the feedback of hidden layer 1, B_1^T e: e of 2 (Mb = 1), 4 outputs in column panels of 2 (Nb = 1): 3,
      + 1, + coll(4) = 3: 7.
    Sum 18 + 10 + 15 + 9 + 7 = 59 per sample: 590 for 10 samples.
    SGD per sample (forward and backward ring GEMV through W of every layer, then the update):
    - layer 1: forward 15; backward Mb = 1, Nb = 2: I = 2 + 2 = 4, 4 + 2 + 10 = 16; exchange
      coll(4) + coll(2) = 6; UPDATE 10: 15 + 16 + 6 + 10 = 47;
    - layer 2: forward 12; backward Mb = Nb = 1: 3 + 12 = 15; exchange coll(2) + coll(4) = 6; UPDATE 9: 42.
    89 per sample: 890 (what DFA would be timed with on SGD's schedule).
    """
    assert arch.epoch_cycles((2, 4, 2), "DFA", 10, TINY)["cycles"] == 590
    assert arch.epoch_cycles((2, 4, 2), "SGD", 10, TINY)["cycles"] == 890


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


def test_ring_gemv_on_the_papers_arrays_by_hand():
    """SGD's forward + backward GEMV of one layer on the paper's two arrays, from the ring GEMV's rules above.

    2 x 16 cores of 4 x 4 PEs (tree, R = 2), a 500 x 500 layer: row panels of ceil(500 / 32) = 16 rows, Mb = 4,
    Nb = 125. Forward: 125 blocks of 4 MACs, gap 3, period 7: I = 124 * 7 + 4 + 3 = 875, command 875 + 32 + 7
    = 914 (the core's read stage included). Backward: 4 blocks of 125 MACs, period 128 (at least 32: no contention for the port): I = 3 * 128 +
    125 + 3 = 512, command 512 + 32 + 10 = 554. Exchange: coll(500) over 32 cores, cw = ceil(16 / 4) = 4: 30 steps
    of 4 + 1 cycles and the last until its last word lands, 4 + 2: 30 * 5 + 6 = 156, twice: 312. Total 1780.

    2 x 4 cores of 16 x 16 PEs (tree, R = 4), a 2500 x 2000 layer: ceil(2500 / 8) = 313 rows, Mb = 20, Nb = 125.
    Forward: period 20 + 5 = 25, I = 124 * 25 + 20 + 5 = 3125, command 3125 + 8 + 7 = 3140. Backward: period
    125 + 5 = 130, I = 19 * 130 + 125 + 5 = 2600, command 2600 + 8 + 10 = 2618. Exchange: coll(2000), cw =
    ceil(250 / 16) = 16: 6 * (16 + 1) + 16 + 2 = 120; coll(2500), cw = ceil(313 / 16) = 20: 6 * 21 + 22 = 148.
    Total 6026.
    """
    assert arch._gemv_cycles(500, 500, 32, arch.CONFIGS["2x16-cores-4x4"], False) == 1780
    assert arch._gemv_cycles(2500, 2000, 8, arch.CONFIGS["2x4-cores-16x16"], False) == 6026
