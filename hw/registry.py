"""The block registry: every generated block, declared once.

A :class:`Block` ties together the Amaranth component (whose ``PARAMS``
schema, declared in the family's spec, is the single source of the block's
parameters), its cocotb testbench module and the parameter sets the test
suite sweeps. The registry is part of the hardware layer and never imports a
golden model: the testbenches and the scenario tables in ``verif/`` pair each
block with its golden model. The
``trainforge`` command, the Makefile targets and the test suite iterate over
:data:`BLOCKS`.

The foundation's own block is declared below. A family of blocks lives in a
subpackage of ``trainforge.hw`` (``hw/tensordash/`` and so on) whose
``blocks.py`` module defines a tuple ``BLOCKS`` of :class:`Block` entries;
the registry imports every such module, so adding a block is one entry in
its family's ``blocks.py``.
"""
import hashlib
import json
from dataclasses import dataclass, field

from ..errors import ParameterError

__all__ = ["Block", "MutationSubset", "BLOCKS", "get_block", "params_key"]


@dataclass(frozen=True)
class MutationSubset:
    """The part of a block's cocotb testbench that ``trainforge mutate --subset`` runs on each mutant first.

    For blocks whose whole testbench is too long to run once per mutant. A mutant the subset kills is
    killed; a mutant that passes the subset is run again with the whole testbench before it is called a
    survivor, so the subset changes the run time, never a survivor's verdict.

    Parameters
    ----------
    tests : tuple of str
        Names of the testbench's cocotb tests to run (``scenario_table``, ``random_regression``...).
    transactions : int
        Checked transactions of ``random_regression`` (the testbench's ``TRAINFORGE_TRANSACTIONS``) when it
        is one of ``tests``; 0 when it is not.
    """
    tests: tuple
    transactions: int = 0

    def __post_init__(self):
        if not self.tests or not all(isinstance(test, str) and test for test in self.tests):
            raise ParameterError(f"MutationSubset 'tests' = {self.tests!r} is invalid; allowed: a non-empty tuple "
                                 f"of cocotb test names")
        wants_transactions = "random_regression" in self.tests
        if isinstance(self.transactions, bool) or not isinstance(self.transactions, int) or (
                self.transactions < 1 if wants_transactions else self.transactions != 0):
            allowed = "an integer >= 1 (random_regression is in 'tests')" if wants_transactions else \
                "0 (random_regression is not in 'tests')"
            raise ParameterError(f"MutationSubset 'transactions' = {self.transactions!r} is invalid; "
                                 f"allowed: {allowed}")


@dataclass(frozen=True)
class Block:
    """One registered block.

    Parameters
    ----------
    name : str
        Block name, used for file names (``build/verilog/<name>.v``) and on the command line.
    component : type
        ``wiring.Component`` subclass with a ``PARAMS`` :class:`~trainforge.hw.params.ParamSchema`.
    testbench : str
        Module name of the cocotb testbench in ``verif/``.
    test_params : tuple of dict
        Parameter overrides the test suite runs (each resolved against the schema).
    regress_params : tuple of dict
        Further overrides run only by ``make regress``.
    summary : str
        One line for ``trainforge list``.
    mutation_subset : MutationSubset or None
        The tests ``trainforge mutate --subset`` runs on each mutant first (None: the block has none, and
        ``--subset`` runs the whole testbench).
    probed_wires : tuple of str
        Internal wires the testbench reads by name (Yosys wire patterns, ``*`` a wildcard): ``trainforge mutate``
        keeps them through Yosys's ``opt_clean``, which would otherwise drop a name that another wire of the
        same net also has.
    """
    name: str
    component: type
    testbench: str
    summary: str
    test_params: tuple = ({},)
    regress_params: tuple = field(default=())
    mutation_subset: MutationSubset = None
    probed_wires: tuple = ()

    @property
    def schema(self):
        return self.component.PARAMS

    def resolve(self, **overrides):
        """Checked parameter dict: defaults updated by ``overrides``."""
        return self.schema.resolve(**overrides)

    def build(self, **overrides):
        """Instantiate the component; its constructor validates the parameters."""
        return self.component(**self.resolve(**overrides))


def params_key(block_name, params):
    """Short stable hash of a block and its resolved parameters (build-cache key)."""
    text = json.dumps({"block": block_name, "params": params}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _blocks():
    from .dense_pe import DensePE
    from .stream_stage import StreamStage

    return (
        Block(
            name="dense_pe",
            component=DensePE,
            testbench="tb_dense_pe",
            summary="dense baseline PE: L multiplier lanes into one accumulator (TensorDash Fig. 2)",
            test_params=(
                {},
                {"lanes": 1, "width": 4, "acc_width": 6, "signed": False},
                {"lanes": 16, "width": 16, "acc_width": 40},
                {"mac": "fp16", "partial_sums": 8},
                {"mac": "bf16", "lanes": 3, "partial_sums": 1},
            ),
            regress_params=(
                {"lanes": 64, "width": 32, "acc_width": 64},
                {"lanes": 8, "width": 32, "acc_width": 64, "signed": False},
                {"lanes": 3, "width": 2, "acc_width": 2},
                {"mac": "fp16", "lanes": 1},
                {"mac": "bf16", "lanes": 8},
                {"mac": "fp16", "partial_sums": 2},
            ),
        ),
        Block(
            name="stream_stage",
            component=StreamStage,
            testbench="tb_stream_stage",
            summary="the shared stream pipeline stage (skid buffer): full throughput, registered ready",
            test_params=({}, {"width": 1}),
            regress_params=({"width": 130},),
        ),
    )


def _family_blocks():
    from ..discover import family_modules

    for module in family_modules("trainforge.hw", "blocks"):
        yield from module.BLOCKS


def _collect():
    blocks = {}
    for block in (*_blocks(), *_family_blocks()):
        if block.name in blocks:
            raise ValueError(f"block name {block.name!r} is registered twice")
        blocks[block.name] = block
    return blocks


#: Every registered block, by name, in registration order.
BLOCKS = _collect()


def get_block(name):
    """The registered block ``name``; raises :class:`ParameterError` naming the known blocks."""
    try:
        return BLOCKS[name]
    except KeyError:
        raise ParameterError(f"unknown block '{name}'; known blocks: {', '.join(BLOCKS)}") from None
