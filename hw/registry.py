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
import pathlib
import re
from dataclasses import dataclass, field

from ..errors import ParameterError

__all__ = ["Block", "MutationSubset", "MutationProof", "BLOCKS", "get_block", "params_key"]


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


#: The kinds of :class:`MutationProof`.
PROOF_KINDS = ("script", "miter")

#: The folder the ``script`` of a :class:`MutationProof` is relative to (``hw/``, the ``trainforge.hw`` package).
HW_FOLDER = pathlib.Path(__file__).resolve().parent


@dataclass(frozen=True)
class MutationProof:
    """A proof that one survivor of ``trainforge mutate`` is equivalent to the original, declared by its block.

    ``trainforge mutate`` runs it on the survivor whose Verilog has the SHA-256 ``mutant_sha256`` (the exact file
    ``build/mutate/<block>-*/mutant_NNNN.v`` it was written for), and refuses it, saying so in the report, on mutant
    number ``mutant`` of the same ``count`` and ``seed`` when that file's hash is another: the design or Yosys
    changed, and the proof may not hold for the new mutant.

    Parameters
    ----------
    block : str
        The block (the :class:`Block` that declares it).
    mutant : int
        The mutant's number in ``mutate -list`` under ``count`` and ``seed`` (``trainforge mutate``'s numbering).
    kind : str
        ``"script"``: a Yosys script (``script``) run in a folder holding ``original.v`` and ``mutant.v`` (the
        mutant), proven when Yosys exits with status 0 (``equiv_status -assert``, ``sat -verify``...);
        ``"miter"``: :func:`trainforge.mutant_miter.prove` with ``top``, ``relax``, ``cases`` and ``bits``.
    mutant_sha256 : str
        SHA-256 (hex) of the mutant's Verilog as ``trainforge mutate`` writes it.
    count, seed : int
        The ``--count`` and ``--seed`` of the list that numbers ``mutant`` (``make mutate``'s: 20 and 1).
    script : str
        ``script`` kind: the script's path relative to ``hw/`` (``neurotrainer/proofs/nt_pe_mutant_11.ys``).
    script_values : tuple of (str, str)
        ``script`` kind: each ``@NAME@`` of the script replaced by its value (one script for mutants that differ
        only in, say, the submodule they sit in); every placeholder needs a value and every value a placeholder.
    top : str
        ``miter`` kind: the module proven (default: the block; a submodule is proven with its inputs free).
    relax : str
        ``miter`` kind: a register that may differ in the ``cases`` states (``mutant_miter --relax``).
    cases : tuple of dict
        ``miter`` kind: states (register name to constant; ``{}``: every state) where ``relax`` is not read.
    bits : tuple of int
        ``miter`` kind: only these bits of ``relax`` may differ (default: all).
    why : str
        One line: why the mutant is equivalent.
    """
    block: str
    mutant: int
    kind: str
    mutant_sha256: str
    count: int = 20
    seed: int = 1
    script: str = None
    script_values: tuple = ()
    top: str = None
    relax: str = None
    cases: tuple = ()
    bits: tuple = None
    why: str = ""

    def __post_init__(self):
        def refuse(name, allowed):
            raise ParameterError(f"MutationProof of {self.block!r} mutant {self.mutant!r}: {name!r} = "
                                 f"{getattr(self, name)!r} is invalid; allowed: {allowed}")
        for name in ("mutant", "count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                refuse(name, "an integer >= 1")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            refuse("seed", "an integer")
        if self.kind not in PROOF_KINDS:
            refuse("kind", " or ".join(PROOF_KINDS))
        if not isinstance(self.mutant_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", self.mutant_sha256):
            refuse("mutant_sha256", "64 lower-case hex digits (the SHA-256 of the mutant's Verilog)")
        if self.kind == "script":
            if not self.script or not (HW_FOLDER / self.script).is_file():
                refuse("script", f"a Yosys script's path relative to {HW_FOLDER}")
            if self.top or self.relax or self.cases or self.bits is not None:
                refuse("kind", "'miter' for top, relax, cases and bits")
            placeholders = set(re.findall(r"@([A-Z_]+)@", self.script_path.read_text()))
            if {name for name, _ in self.script_values} != placeholders:
                refuse("script_values", f"one (name, value) pair for each placeholder of {self.script}: "
                                        f"{sorted(placeholders) or 'none'}")
        else:
            if self.script or self.script_values:
                refuse("script", "None for a miter proof (and no script_values)")
            if (self.cases or self.bits is not None) and not self.relax:
                refuse("relax", "a register name when cases or bits are given")
            if self.relax and not self.cases:
                refuse("cases", "at least one state (a dict; {} for every state) when relax is given")

    @property
    def script_path(self):
        """The script's file (``script`` kind), else ``None``."""
        return HW_FOLDER / self.script if self.script else None

    @property
    def script_text(self):
        """The script (``script`` kind) with its ``@NAME@`` placeholders replaced by ``script_values``."""
        text = self.script_path.read_text()
        for name, value in self.script_values:
            text = text.replace(f"@{name}@", value)
        return text

    @property
    def relaxed(self):
        """The ``relaxed`` argument of :func:`trainforge.mutant_miter.prove` (``None``: every register matched)."""
        if not self.relax:
            return None
        relaxed = (self.relax, [dict(case) for case in self.cases])
        return relaxed + (list(self.bits),) if self.bits is not None else relaxed

    def describe(self):
        """A few words: ``script neurotrainer/proofs/nt_pe_mutant_11.ys`` or ``miter cp_core --relax vector_row ...``."""
        if self.kind == "script":
            values = "".join(f" {name}={value}" for name, value in self.script_values)
            return f"script {self.script}{values}"
        words = ["miter", self.top or self.block]
        if self.relax:
            words += ["--relax", self.relax]
            words += [f"--case {','.join(f'{k}={v}' for k, v in case.items()) or repr('')}" for case in self.cases]
            if self.bits is not None:
                words += ["--bits", ",".join(map(str, self.bits))]
        return " ".join(words)


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
    mutation_proofs : tuple of MutationProof
        Equivalence proofs of survivors of ``trainforge mutate`` that its own checks do not find (each for one
        mutant, checked by the hash of its Verilog).
    """
    name: str
    component: type
    testbench: str
    summary: str
    test_params: tuple = ({},)
    regress_params: tuple = field(default=())
    mutation_subset: MutationSubset = None
    probed_wires: tuple = ()
    mutation_proofs: tuple = ()

    def __post_init__(self):
        for proof in self.mutation_proofs:
            if not isinstance(proof, MutationProof) or proof.block != self.name:
                raise ParameterError(f"block {self.name!r}: mutation_proofs holds {proof!r}; allowed: "
                                     f"MutationProof entries whose block is {self.name!r}")

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
                {"mac": "fp16", "partial_sums": 8},
                {"mac": "bf16", "lanes": 3, "partial_sums": 1},
            ),
            # 16 lanes of 16 bits moved here from test_params to keep make test under 5 minutes (2026-11-29).
            regress_params=(
                {"lanes": 16, "width": 16, "acc_width": 40},
                {"lanes": 64, "width": 32, "acc_width": 64},
                {"lanes": 8, "width": 32, "acc_width": 64, "signed": False},
                {"lanes": 3, "width": 2, "acc_width": 2},
                {"mac": "fp16", "lanes": 1},
                {"mac": "bf16", "lanes": 8},
                {"mac": "fp16", "partial_sums": 2},
            ),
            # make mutate's survivor 15 (2026-11-29): tree_sum reset to 0x2000 instead of 0.
            mutation_proofs=(
                MutationProof(block="dense_pe", mutant=15, kind="miter", relax="tree_sum",
                              cases=({"accumulate_row_valid": 0},),
                              mutant_sha256="749cf876b201a617f496709a38942e0236b03242a4852d84565a6abd60b782a8",
                              why="tree_sum is read only by the accumulate stage's update and result, both taken "
                                  "while accumulate_row_valid is 1, and the reset clears that flag"),
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
