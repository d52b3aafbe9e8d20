"""One SGD step of a two-layer MLP run by the iBuffer / layer sequencer: the step's layers chained by the compiler.

The layer-by-layer step (:mod:`~trainforge.sim.neurotrainer.system_training`) needs the host to
move tensors between its layers: ``act_bp`` reads ``z1`` and ``da1`` from the PE vaults, but
``fc_ff`` and ``fc_bp`` write the common vault, and the system has no vault-to-vault copy.
Here every layer reads its inputs where an earlier layer wrote them
(:func:`~trainforge.sim.neurotrainer.step_program.place_step`), so the host only loads the
weights and the inputs, supplies the loss gradient, and reads the results:

======  ========  ============================================  ==================================================
run     layer     what                                          how
======  ========  ============================================  ==================================================
1       ``ff1``   ``z1 = W1 x`` (common vault)                  ``fc_ff``, 32-bit, truncated
1       ``ff2``   ``z2 = W2 f(z1)``                             ``fc_ff``, x = ``ff1``'s output through f(x)
host              ``dz2 = (z2 - t) >> grad_shift``              written as ``dz2^T`` (common) and ``dz2`` (PEs)
2       ``bp2``   ``da1 = W2^T dz2`` (PE vaults)                ``fc_up`` form: dY := ``W2^T``, X := ``dz2^T``, SR-LO
2       ``ff1pe`` ``z1 = W1 x`` again, into the PE vaults       ``fc_up`` form: dY := ``W1``, X := ``x^T``, truncated
2       ``act1``  ``dz1 = f'(z1) da1``                          ``act_bp``, z = ``ff1pe``'s output, dx = ``bp2``'s
2       ``up2``   ``dW2 = dz2 f(z1)^T``                         ``fc_up``, x = ``ff1``'s output through f(x), SR-LO
2       ``up1``   ``dW1 = dz1 x^T``                             ``fc_up``, dy = ``act1``'s output, x = ``ff1``'s, SR-LO
host              ``W -= dW >> lr_shift``
======  ========  ============================================  ==================================================

Two layers differ from the layer-by-layer step, because of where their outputs must land:

- ``bp2`` computes ``W2^T dz2`` as an ``fc_up``-form product (the reduction over the outputs in
  the MAC accumulator, the result rows in the PE vaults), where ``act_bp`` reads it; ``fc_bp``
  would merge it into the common vault;
- ``ff1pe`` recomputes ``z1`` into the PE vaults (the system cannot copy ``ff1``'s output there).
  Both are truncated 32-bit products of the same operands, each product floored on its own, so
  ``ff1pe`` equals ``ff1`` bit for bit (:func:`sequenced_sgd_step` asserts it).

The extra layer steps every PE's LFSR (once per MAC row), so the SR-LO results after it differ
from the layer-by-layer step's: the golden step here is this program on the golden model of
the system (:func:`~trainforge.sim.neurotrainer.step_program.golden_run`), checked against
float64 by ``verif/test_nt_sgd_step.py``. The loss gradient comes from the host, so the step is
two iBuffer runs: the forward pass, then the backward pass and the weight gradients.
"""
import numpy as np

from .integration_layers import compile_for_system
from .step_program import StepLayer, golden_run, place_step
from .system_training import loss_gradient, sgd_layers, update

__all__ = ["SEQUENCED_SGD_LAYERS", "SEQUENCED_SGD_RUNS", "sequenced_sgd_program", "sgd_host_tensors",
           "sequenced_sgd_step"]

#: The step's layers: (name, kind, options, dims from (inputs, hidden, outputs, samples), links, host_before).
SEQUENCED_SGD_LAYERS = (
    ("ff1", "fc_ff", {"bits": 32}, lambda i, h, o, n: dict(h=h, k=i, n=n), {}, {}),
    ("ff2", "fc_ff", {"bits": 32, "lut": {"x": "f"}}, lambda i, h, o, n: dict(h=o, k=h, n=n),
     {"x": ("ff1", "y")}, {}),
    ("bp2", "fc_up", {"sr": True}, lambda i, h, o, n: dict(h=h, k=n, n=o), {}, {"x": 1}),
    ("ff1pe", "fc_up", {"sr": False}, lambda i, h, o, n: dict(h=h, k=n, n=i), {}, {}),
    ("act1", "act_bp", {"sr": True}, lambda i, h, o, n: dict(h=h, n=n),
     {"z": ("ff1pe", "dw"), "dx": ("bp2", "dw")}, {}),
    ("up2", "fc_up", {"sr": True, "lut": {"x": "f"}}, lambda i, h, o, n: dict(h=o, k=h, n=n),
     {"x": ("ff1", "y")}, {"dy": 1}),
    ("up1", "fc_up", {"sr": True}, lambda i, h, o, n: dict(h=h, k=i, n=n),
     {"dy": ("act1", "dz"), "x": ("ff1", "x")}, {}),
)

#: Layers per iBuffer run: the forward pass, then (after the host's loss gradient) the rest.
SEQUENCED_SGD_RUNS = (2, 5)


def sequenced_sgd_program(inputs, hidden, outputs, samples, **params):
    """The step's layers compiled for the system and placed (:class:`~.step_program.PlacedStep`).

    Raises
    ------
    ProgramError
        The LUT formats differ from the 32-bit format (as :func:`~.system_training.sgd_layers`), or the sizes
        give placements that do not chain (``samples`` must be a multiple of ``lanes``, ``hidden`` of ``pes``
        ... as :func:`~.step_program.place_step` finds them).
    """
    sgd_layers(inputs, hidden, outputs, samples, **params)        # the format check
    steps = [StepLayer(name, compile_for_system(kind, dims(inputs, hidden, outputs, samples), **options, **params),
                       links, host)
             for name, kind, options, dims, links, host in SEQUENCED_SGD_LAYERS]
    return place_step(steps, SEQUENCED_SGD_RUNS, **params)


def sgd_host_tensors(w1, w2, x, target, grad_shift):
    """The host's inputs of each run (``golden_run``'s ``host_tensors``): the weights and inputs before the
    first, the loss gradient before the second."""
    w1, w2, x = (np.asarray(a, dtype=np.int64) for a in (w1, w2, x))

    def tensors(run, outputs):
        if run == 0:
            return {("ff1", "w"): w1, ("ff1", "x"): x, ("ff2", "w"): w2, ("bp2", "dy"): w2.T,
                    ("ff1pe", "dy"): w1, ("ff1pe", "x"): x.T}
        dz2 = loss_gradient(outputs["ff2"], target, grad_shift)
        return {("bp2", "x"): dz2.T, ("up2", "dy"): dz2}
    return tensors


def sequenced_sgd_step(w1, w2, x, target, *, grad_shift=0, lr_shift=4, **params):
    """One SGD step on the golden model of the system, run as the sequencer runs it.

    Returns
    -------
    dict
        ``outputs`` (every layer's output by name), ``dz2``, ``w1``, ``w2`` (the updated weights),
        ``program`` (the :class:`~.step_program.PlacedStep`), ``finals`` (every vault after each run).

    Raises
    ------
    AssertionError
        ``ff1pe`` differs from ``ff1`` (the recomputation would not be the forward pass's ``z1``).
    """
    w1, w2, x = (np.asarray(a, dtype=np.int64) for a in (w1, w2, x))
    program = sequenced_sgd_program(w1.shape[1], w1.shape[0], w2.shape[0], x.shape[1], **params)
    run = golden_run(program, sgd_host_tensors(w1, w2, x, target, grad_shift), **params)
    outputs = run["outputs"]
    assert np.array_equal(outputs["ff1pe"], outputs["ff1"]), "z1 recomputed in the PE vaults differs from ff1's"
    return {"outputs": outputs, "dz2": loss_gradient(outputs["ff2"], target, grad_shift),
            "w1": update(w1, outputs["up1"], lr_shift), "w2": update(w2, outputs["up2"], lr_shift),
            "program": program, "finals": run["finals"]}
