"""The reference executor's batched path equals its per-pass path, value for value and cycle for cycle.

``execute(layer, inputs, pe_model="batched")`` runs the PE jobs through the batched PE model
(``golden/neurotrainer/pe_batched.py``) and reads every stream piece by piece
(``golden/neurotrainer/pmag_steps.py``, ``sim/neurotrainer/stream_cursor.py``). Here it must
give exactly what the per-pass path (``nt_pe`` pass by pass, the PMAG golden model's streams)
gives on small layers of every kind: the output, every vault word, and per PE job every key of
the ``nt_pe`` result (result words, ``last`` flags, result cycles, pass acceptance cycles, the
final BUF Output). Inputs are random words, some over the full 32-bit range so the MACs
saturate. The batches are made small (``batch_words``) so that reduction chains cross batch
boundaries. The batched PE model is also checked alone against ``nt_pe`` on the PE scenario
table's random pass sequences (stale buffer halves, holds, route, product, MAX ties, every
rounding), and the step-range PMAG model against ``nt_pmag`` on random programs.
"""
import inspect
import random
import types

import numpy as np
import pytest

from scenarios import nt_pe as pe_scenarios
from trainforge.errors import ParameterError
from trainforge.golden.neurotrainer import pe_batched, pmag_steps
from trainforge.golden.neurotrainer.pe import nt_pe
from trainforge.golden.neurotrainer.pe_batched import nt_pe_batched
from trainforge.golden.neurotrainer.pmag import nt_pmag, random_program
from trainforge.golden.neurotrainer.pmag_steps import ProgramSteps
from trainforge.sim.neurotrainer import executor, stream_cursor
from trainforge.sim.neurotrainer.compiler import compile_layer
from trainforge.sim.neurotrainer.executor import execute
from trainforge.sim.neurotrainer.integration_layers import compile_for_system
from trainforge.spec.neurotrainer.integration import PARAMS as SYSTEM_PARAMS

#: Small buffers: rows and reductions split into several blocks, reductions into chains of passes.
SMALL_PE = dict(lanes=2, in1_depth=32, in2_depth=16, out_depth=4, frac_bits=0, frac_bits16=0)
#: 32-bit fixed point with fraction bits, so rounding offsets matter.
FIXED_PE = dict(lanes=3, in1_depth=64, in2_depth=16, out_depth=8, frac_bits=6, frac_bits16=3)

LAYERS = [
    # kind, dims, options
    ("conv_ff", dict(n=4, d=2, h=6, w=6, o=3, hk=3, wk=3), dict(pes=2, bits=16)),
    ("conv_ff", dict(n=4, d=2, h=6, w=6, o=3, hk=3, wk=3), dict(pes=2, bits=32)),
    ("conv_bp", dict(n=2, d=3, h=5, w=5, o=2, hk=3, wk=2), dict(pes=2)),
    ("conv_up", dict(n=2, d=3, h=5, w=5, o=2, hk=2, wk=2), dict(pes=3)),
    ("conv_ff", dict(n=2, d=3, h=15, w=15, o=5, hk=5, wk=5, s=4, p=2), dict(pes=2, pe=SMALL_PE, bits=16)),
    ("conv_ff", dict(n=1, d=5, h=8, w=8, o=7, hk=3, wk=2, s=2, p=1), dict(pes=2, pe=SMALL_PE, bits=32)),
    ("conv_bp", dict(n=1, d=3, h=11, w=11, o=2, hk=5, wk=5, s=4, p=2), dict(pes=2, pe=SMALL_PE)),
    ("conv_up", dict(n=2, d=3, h=5, w=6, o=4, hk=3, wk=3, s=1, p=1), dict(pes=3, pe=SMALL_PE)),
    ("fc_ff", dict(h=37, k=53, n=3), dict(pes=2, pe=SMALL_PE, bits=32)),
    ("fc_ff", dict(h=11, k=19, n=5), dict(pes=3, pe=SMALL_PE, bits=16)),
    ("fc_bp", dict(h=11, k=31, n=1), dict(pes=3, pe=SMALL_PE)),
    ("fc_up", dict(h=7, k=9, n=21), dict(pes=1, pe=SMALL_PE)),          # N > L: sample blocks accumulate
    ("fc_up", dict(h=9, k=5, n=3), dict(pes=2, pe=SMALL_PE)),
    ("fc_ff", dict(h=6, k=40, n=4), dict(pe=dict(FIXED_PE, rounding="sr_lo", seed=77), sr=True, bits=32)),
    ("fc_bp", dict(h=5, k=7, n=3), dict(pe=dict(FIXED_PE, rounding="sr_full", seed=9), sr=True)),
    ("conv_up", dict(n=2, d=2, h=5, w=5, o=3, hk=3, wk=3, s=2, p=1), dict(pe=dict(FIXED_PE, rounding="nearest"))),
    ("maxpool", dict(n=4, c=3, h=4, w=6, r=2), dict(pes=2)),
    ("maxpool_bp", dict(n=4, c=2, h=4, w=4, r=2), dict(pes=2)),
    ("act_bp", dict(h=6, n=8), dict(pes=2, pe=FIXED_PE)),
    ("add_pad", dict(d=2, h=4, w=5, r=1), {}),
    ("remove_pad", dict(d=2, h=4, w=5, r=1), {}),
    ("partition", dict(d=2, h=4, w=6, th=2, tw=3), dict(pes=6)),
    ("merge", dict(d=2, h=4, w=6, th=2, tw=3), dict(pes=6)),
]


def _inputs(layer, rng):
    """Random inputs: small words, and in one input in four full-range words (the MACs saturate)."""
    inputs = {}
    for name in layer.inputs:
        shape = layer.tensors[name][0]
        scale = 1 << 31 if rng.random() < 0.25 else 1 << 12
        inputs[name] = rng.integers(-scale, scale, shape)
    return inputs


def assert_same_run(layer, inputs, where, batch_words=256, run=execute):
    """Both paths on one layer: the same output, vault words and per-job PE results (``run``: the executor)."""
    expected = execute(layer, inputs)
    actual = run(layer, inputs, pe_model="batched", batch_words=batch_words)
    np.testing.assert_array_equal(actual["output"], expected["output"], err_msg=f"{where}: output")
    assert expected["vaults"].keys() == actual["vaults"].keys(), where
    for vault, image in expected["vaults"].items():
        bad = np.flatnonzero(np.asarray(actual["vaults"][vault], dtype=np.int64) != image)
        assert not bad.size, f"{where}: vault {vault} word {bad[0]} differs ({bad.size} words)"
    assert len(actual["pe"]) == len(expected["pe"]), where
    for job, (mine, theirs) in enumerate(zip(actual["pe"], expected["pe"])):
        assert mine.keys() == theirs.keys(), where
        for key in theirs:
            np.testing.assert_array_equal(mine[key], theirs[key], err_msg=f"{where}: PE job {job} {key}")
    return expected


@pytest.mark.parametrize("kind, dims, options", LAYERS, ids=[f"{kind}-{i}" for i, (kind, _, _) in enumerate(LAYERS)])
def test_batched_executor_equals_the_per_pass_executor(kind, dims, options):
    check_layer(kind, dims, options)


def check_layer(kind, dims, options, run=execute):
    rng = np.random.default_rng(len(kind) * 1000 + sum(dims.values()))
    layer = compile_layer(kind, dims, **options)
    assert_same_run(layer, _inputs(layer, rng), f"{kind} {dims} {options}", run=run)


def test_batched_executor_equals_the_per_pass_executor_through_the_luts():
    params = SYSTEM_PARAMS.defaults
    rng = np.random.default_rng(5)
    for kind, dims, lut in (("fc_ff", dict(h=4, k=10, n=4), {"x": "f"}),
                            ("fc_bp", dict(h=6, k=4, n=2), {"dy": "df"})):
        layer = compile_for_system(kind, dims, lut=lut, **params)
        assert_same_run(layer, _inputs(layer, rng), f"{kind} LUT {lut}")


def test_an_unknown_pe_model_is_refused_naming_it():
    layer = compile_layer("fc_ff", dict(h=2, k=2, n=1))
    with pytest.raises(ParameterError, match="pe_model = 'fast'; allowed: per_pass, batched"):
        execute(layer, {"w": np.ones((2, 2)), "x": np.ones((2, 1))}, pe_model="fast")


def test_batched_pe_equals_nt_pe_on_random_pass_sequences():
    check_random_pass_sequences(nt_pe_batched)


def check_random_pass_sequences(model):
    checked = 0
    for seed in range(60):
        rng = random.Random(seed)
        params = dict(lanes=rng.choice([1, 2, 3]), in1_depth=rng.choice([8, 16, 64]), in2_depth=rng.choice([4, 8, 32]),
                      out_depth=rng.choice([2, 4, 16]), frac_bits=rng.choice([0, 3, 16]),
                      frac_bits16=rng.choice([0, 4]), rounding=rng.choice(["sr_lo", "sr_full", "truncate", "nearest"]),
                      seed=rng.randint(1, 255), index_bits=rng.choice([2, 4, 8]))
        stimulus = pe_scenarios.random_session(params, rng, rng.randint(1, 30), max_probability=0.3,
                                               route_probability=0.3, product_probability=0.3)
        words = [pe_scenarios._program_word(fields) for fields in stimulus["i_program"]]
        blocks1, blocks2 = pe_scenarios._blocks(stimulus["i_in1"]), pe_scenarios._blocks(stimulus["i_in2"])
        expected = nt_pe(words, blocks1, blocks2, **params)
        actual = model(words, blocks1, blocks2, **params, batch_words=rng.choice([1, 40, 1 << 20]))
        for key in expected:
            np.testing.assert_array_equal(actual[key], expected[key], err_msg=f"seed {seed} {params}: {key}")
        checked += len(words)
    assert checked > 500


def test_step_ranges_give_the_pmag_golden_requests():
    check_step_ranges(ProgramSteps)


def check_step_ranges(model):
    rng = np.random.default_rng(3)
    for index in range(400):
        counter_bits = int(rng.integers(2, 17))
        program = random_program(rng, counter_bits=counter_bits, max_steps=300)
        expected = nt_pmag(program, counter_bits=counter_bits)
        steps = model(program, counter_bits, inner_limit=int(rng.integers(1, 40)))
        cuts = [0, *sorted(int(c) for c in rng.integers(0, steps.steps + 1, 2)), steps.steps]
        parts = [steps.requests(start, stop) for start, stop in zip(cuts[:-1], cuts[1:])]
        np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), expected["address"][:-1].astype(np.int64),
                                      err_msg=f"program {index}: address")
        np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), expected["pad"][:-1],
                                      err_msg=f"program {index}: pad")


#: Deliberately broken batched paths: (what, module, a source line, its broken replacement). Each must fail a check.
MUTANTS = [
    ("chained passes start from BUF Output", pe_batched,
     "            if depth[group[0]] > 0:\n", "            if False:\n"),
    ("no saturation after a 32-bit step", pe_batched,
     "            y += term\n            np.clip(y, low, high, out=y)\n    else:", "            y += term\n    else:"),
    ("stale half contents read as zeros", pe_batched,
     "            out[old] = self.banks[block[old] % 2, position[old]]\n", "            pass\n"),
    ("PE idle one cycle early", pe_batched, "        idle = accept + cycles\n", "        idle = accept + cycles - 1\n"),
    ("SR-LO period 256", pe_batched, "_SR_LO_PREFIX, _SR_LO_PERIOD = 32, 255", "_SR_LO_PREFIX, _SR_LO_PERIOD = 32, 256"),
    ("BUF Output after a batch from the first writer", pe_batched,
     "    np.maximum.at(best, cover, writers)", "    np.minimum.at(best, cover, writers)"),
    ("PMAG skip window ignored", pmag_steps,
     "            return address[inside], np.zeros(int(inside.sum()), dtype=bool)",
     "            return address, np.zeros(address.size, dtype=bool)"),
    ("PMAG steps without the slow counters", pmag_steps,
     "        values = (outer[:, None] + self._table(name)[None, :]).reshape(-1)",
     "        values = (0 * outer[:, None] + self._table(name)[None, :]).reshape(-1)"),
    ("copy: the dest's pad requests take data words", executor,
     "            values[~pad] = _read_words(vaults[job.source.vault], *source.take(data))\n",
     "            values[:data] = _read_words(vaults[job.source.vault], *source.take(data))\n"),
    ("16-bit BUF1: the odd block's padding half kept", executor,
     "            words = _buf1_words(words, sizes, 16)\n", "            words = np.repeat(words, 2)[:sum(sizes)]\n"),
]


def _broken(module, line, replacement):
    """A copy of ``module`` with one source line replaced (the module itself is not touched)."""
    source = inspect.getsource(module)
    assert source.count(line) == 1, f"{module.__name__}: the line to break is not there once"
    clone = types.ModuleType(module.__name__)
    clone.__dict__.update(__package__=module.__package__, __file__=module.__file__)
    exec(compile(source.replace(line, replacement), module.__file__, "exec"), clone.__dict__)
    return clone


@pytest.mark.regress
@pytest.mark.parametrize("what, module, line, replacement", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_broken_batched_path_fails_a_check(what, module, line, replacement, monkeypatch):
    broken = _broken(module, line, replacement)
    run, model, steps = execute, nt_pe_batched, ProgramSteps
    if module is pe_batched:
        monkeypatch.setattr(executor, "nt_pe_batched", broken.nt_pe_batched)
        model = broken.nt_pe_batched
    elif module is pmag_steps:
        monkeypatch.setattr(executor, "ProgramSteps", broken.ProgramSteps)
        monkeypatch.setattr(stream_cursor, "ProgramSteps", broken.ProgramSteps)
        steps = broken.ProgramSteps
    else:
        run = broken.execute
    checks = [lambda: check_random_pass_sequences(model), lambda: check_step_ranges(steps)]
    checks += [lambda case=case: check_layer(*case, run=run) for case in LAYERS]
    for check in checks:                  # until the first check that fails
        try:
            check()
        except (AssertionError, ValueError, IndexError):
            return
    pytest.fail(f"{what}: every check passed")
