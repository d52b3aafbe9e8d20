"""A training step's layers placed in the vaults and cut into iBuffer runs: the compiler's chaining.

The compiler places every layer's tensors from word 0 of each vault. For a step that the
iBuffer / layer sequencer runs without the host between its layers, :func:`place_step` moves
the layers (:func:`~trainforge.sim.neurotrainer.layer_chain.relocate`: one offset per layer and
vault) so that

- every **linked** input of a layer is read where an earlier layer wrote (or, for a shared
  input, placed) that tensor: the placements must be equal (the same vault, element order and
  shape), and the link fixes the difference of the two layers' offsets in that vault;
- no tensor is overwritten while it is still needed: every tensor is a region of a vault,
  live from its write (the host's load before its run, or the layer that writes it) to its
  last read; two regions of one vault that are live at the same time do not overlap.

Layers tied by links in one vault form a group with fixed relative offsets (a layer reading
two tensors from one program, like ``act_bp``'s ``z`` and ``dx``, ties their two producers);
each group is put at the lowest offset where none of its regions collides with a region
placed before. An input with no link is the host's: it is written before the program's first
run, or before a later run (``host_before``, e.g. the loss gradient between the forward and the
backward pass).

The runs are the iBuffer's: each run is loaded into the iBuffer and started once
(:func:`run_program`: the sequencer's queue words and layer table per run). :func:`golden_run`
runs the step on the golden model of the system: the vault images carried from layer to layer
and across the host's writes between runs, the PEs' state (SR-LO's LFSR) carried over all
layers.
"""
from dataclasses import dataclass, field

import numpy as np

from ...errors import ProgramError
from ...golden.neurotrainer.integration import nt_system
from ...spec.neurotrainer import integration as spec
from ...spec.neurotrainer.packing import elements_per_word, pack_words
from . import executor
from .compiler import COMMON
from .ibuffer_loads import sequencer_loads, system_program
from .layer_chain import prepared_layer, relocate

__all__ = ["StepLayer", "PlacedStep", "place_step", "run_program", "ibuffer_runs", "host_image_writes", "golden_run"]


@dataclass
class StepLayer:
    """One layer of a step.

    Attributes
    ----------
    name : str
    layer : CompiledLayer
        Compiled for the system (``compile_for_system``), from word 0.
    links : dict of str to tuple
        Input tensor name -> ``(earlier layer's name, its tensor name)`` (an output, or an input
        the earlier layer shares), or ``(layer, tensor, view)``: ``view`` maps the input's flat
        element indices to the tensor's (the same slots hold the same values under another
        shape, e.g. a convolution's activations as an ``act_bp`` matrix). Inputs not linked are
        written by the host.
    host_before : dict of str to int
        Per unlinked input, the run before which the host writes it (missing: 0, before the first run).
    """
    name: str
    layer: object
    links: dict = field(default_factory=dict)
    host_before: dict = field(default_factory=dict)


@dataclass
class PlacedStep:
    """:func:`place_step`'s result: the relocated layers by name, in order, the runs (lists of names), the
    offsets (per layer, per compiler vault, in words) and the host inputs (per run, ``(layer, input)``)."""
    layers: dict
    order: list
    runs: list
    offsets: dict
    host_inputs: list


def _placements(layer, name):
    shape, places = layer.tensors[name]
    return shape, sorted(places, key=lambda place: (place.vault, place.base))


class _Frames:
    """Union-find of (layer, vault) frames with the offset of each frame relative to its group's root."""

    def __init__(self):
        self.parent, self.delta = {}, {}

    def find(self, frame):
        self.parent.setdefault(frame, frame)
        self.delta.setdefault(frame, 0)
        if self.parent[frame] == frame:
            return frame, 0
        root, above = self.find(self.parent[frame])
        self.parent[frame], self.delta[frame] = root, self.delta[frame] + above
        return root, self.delta[frame]

    def tie(self, first, second, difference, label):
        """offset(second) - offset(first) = difference."""
        root1, d1 = self.find(first)
        root2, d2 = self.find(second)
        if root1 == root2:
            if d2 - d1 != difference:
                raise ProgramError(f"{label}: its links ask for two different placements of one layer")
            return
        self.parent[root2], self.delta[root2] = root1, d1 + difference - d2


def place_step(steps, runs, **params):
    """Relocate a step's layers so that they run back to back from the host's loads (see the module docstring).

    Parameters
    ----------
    steps : sequence of StepLayer
        In the order they run.
    runs : sequence of int
        The number of layers of each iBuffer run, in order (their sum is ``len(steps)``).
    **params
        The NTSystem parameters (the vault depths).

    Raises
    ------
    ProgramError
        A link to an unknown layer or tensor, linked placements that differ, layers of different
        element widths, links that ask for two offsets of one layer, or no room in a vault.
    """
    system = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    if sum(runs) != len(steps) or min(runs, default=0) < 1:
        raise ProgramError(f"runs {list(runs)} do not cut {len(steps)} layers into non-empty runs")
    if len({step.layer.bits for step in steps}) > 1:
        raise ProgramError("a step's layers must have one element width (16 or 32 bits)")
    per = elements_per_word(steps[0].layer.bits)
    index = {step.name: number for number, step in enumerate(steps)}
    run_of = [run for run, count in enumerate(runs) for _ in range(count)]
    run_start = [sum(runs[:run]) for run in range(len(runs))]
    frames = _Frames()
    last_read = {}                                    # (layer number, tensor) -> last layer that reads it
    for number, step in enumerate(steps):
        for vault in step.layer.vault_words:
            frames.find((number, vault))
        for name, link in step.links.items():
            producer, tensor = link[:2]
            view = link[2] if len(link) > 2 else None
            label = f"{step.name}.{name} <- {producer}.{tensor}"
            if producer not in index or index[producer] >= number or tensor not in steps[index[producer]].layer.tensors:
                raise ProgramError(f"{label}: no earlier layer {producer!r} with a tensor {tensor!r}")
            if name not in step.layer.inputs:
                raise ProgramError(f"{label}: {name!r} is not an input of {step.name}")
            source = steps[index[producer]].layer
            shape1, places1 = _placements(source, tensor)
            shape2, places2 = _placements(step.layer, name)
            if view is None and shape1 != shape2 or len(places1) != len(places2) or any(
                    a.vault != b.vault or not np.array_equal(a.index, _viewed(b.index, view))
                    for a, b in zip(places1, places2)):
                raise ProgramError(f"{label}: the input is not placed as the tensor it reads (another vault, "
                                   "shape or element order)")
            for a, b in zip(places1, places2):
                if a.base % per or b.base % per:
                    raise ProgramError(f"{label}: a placement does not start at a word")
                frames.tie((index[producer], a.vault), (number, b.vault), (a.base - b.base) // per, label)
            root = _owner(steps, index, (index[producer], tensor))
            last_read[root] = max(last_read.get(root, root[0]), number)
    regions = []                   # (group root, relative word start, words, vault, live from, to, label)
    for number, step in enumerate(steps):
        for name, (_, places) in step.layer.tensors.items():
            if name in step.links:
                continue                              # the same region as the tensor it reads
            if name == step.layer.output:
                born = number
            elif name in step.layer.inputs:
                before = step.host_before.get(name, 0)
                if not 0 <= before <= run_of[number]:
                    raise ProgramError(f"{step.name}: the host writes {name!r} before run {before}; the layer "
                                       f"runs in run {run_of[number]}")
                born = run_start[before] - 0.5 if before else -1
            else:
                born = number
            dies = last_read.get((number, name), number)
            for place in places:
                root, delta = frames.find((number, place.vault))
                words = -(-place.index.size // per)
                regions.append((root, delta + place.base // per, words, place.vault, born, dies,
                                f"{step.name}.{name}"))
    depth = {COMMON: system["vault_depth"], **{pe: system["pe_vault_depth"] for pe in range(system["pes"])}}
    roots = sorted({region[0] for region in regions})
    placed, absolute = [], {}
    for root in roots:
        mine = [region for region in regions if region[0] == root]
        vault = root[1]
        for number, first in enumerate(mine):
            for second in mine[number + 1:]:
                if _collide(first[1:], second[1:]):
                    raise ProgramError(f"vault {vault}: the links place {first[6]} and {second[6]} in one place "
                                       "while both are live")
        lowest = -min(region[1] for region in mine)
        for offset in range(lowest, depth[vault] + 1):
            spans = [(offset + start, words, None, born, dies) for _, start, words, _, born, dies, _ in mine]
            if max(start + words for start, words, *_ in spans) > depth[vault]:
                raise ProgramError(f"vault {vault}: no room for layer {steps[root[0]].name}'s tensors "
                                   f"({depth[vault]} words)")
            if not any(_collide(span, other) for span in spans for other in placed if other[2] == vault):
                break
        placed += [(start, words, vault, born, dies) for start, words, _, born, dies in spans]
        absolute[root] = offset
    offsets, layers = {}, {}
    for number, step in enumerate(steps):
        offsets[step.name] = {}
        for vault in step.layer.vault_words:
            root, delta = frames.find((number, vault))
            offsets[step.name][vault] = absolute.get(root, 0) + delta
        layers[step.name] = relocate(step.layer, offsets[step.name])
    host_inputs = [[(step.name, name) for step in steps for name in step.layer.inputs
                    if name not in step.links and step.host_before.get(name, 0) == run] for run in range(len(runs))]
    order = [step.name for step in steps]
    cut = [order[start:start + count] for start, count in zip(run_start, runs)]
    return PlacedStep(layers, order, cut, offsets, host_inputs)


def _viewed(index, view):
    """A placement's element indices seen through a link's ``view`` (consumer element -> producer element)."""
    if view is None:
        return index
    index = np.asarray(index, dtype=np.int64)
    return np.where(index >= 0, view(np.maximum(index, 0)), -1)


def _collide(first, second):
    """Two regions ``(start, words, vault, live from, live to)`` (vault not compared) overlap while both live."""
    start1, words1, _, born1, dies1 = first[:5]
    start2, words2, _, born2, dies2 = second[:5]
    return start1 < start2 + words2 and start2 < start1 + words1 and born1 <= dies2 and born2 <= dies1


def _owner(steps, index, key):
    """The (layer number, tensor) that owns the region ``key`` reads: follows links back to an unlinked tensor."""
    number, tensor = key
    while tensor in steps[number].links:
        producer, tensor = steps[number].links[tensor][:2]
        number = index[producer]
    return number, tensor


def run_program(placed, run, pes):
    """The iBuffer program of run ``run`` (``ibuffer_loads.sequencer_loads`` takes it)."""
    return system_program([placed.layers[name] for name in placed.runs[run]], pes)


def ibuffer_runs(placed, **params):
    """Per run, the iBuffer loads (``i_load`` payload dicts: every queue's words and the layer table) and the
    ``i_start`` value: what the host sends to run the step (``ibuffer_loads.sequencer_loads`` of each run).

    Raises
    ------
    ProgramError
        A run with more layers than ``max_layers`` or more words in a queue than ``queue_depth``.
    """
    system = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    return [sequencer_loads(system, run_program(placed, run, system["pes"])) for run in range(len(placed.runs))]


def host_image_writes(placed, run, tensors):
    """What the host writes before run ``run``: per system vault number, ``{word address: word}``.

    ``tensors``: ``{(layer name, input name): tensor}`` for every host input of the run
    (``placed.host_inputs[run]``).
    """
    writes = {}
    for name, tensor_name in placed.host_inputs[run]:
        layer = placed.layers[name]
        shape, places = layer.tensors[tensor_name]
        tensor = np.asarray(tensors[(name, tensor_name)], dtype=np.int64)
        if tensor.shape != shape:
            raise ProgramError(f"{name}: input {tensor_name!r} has shape {tensor.shape}; expected {shape}")
        flat = np.append(tensor.reshape(-1) & ((1 << layer.bits) - 1), 0)
        per = elements_per_word(layer.bits)
        for place in places:
            if place.base % per or place.index.size % per:
                raise ProgramError(f"{name}: input {tensor_name!r} does not fill whole words")
            words = pack_words(flat[place.index], layer.bits)
            target = writes.setdefault(place.vault + 1, {})
            target.update({place.base // per + number: int(word) for number, word in enumerate(words)})
    return writes


def golden_run(placed, host_tensors, **params):
    """The step on the golden model of the system, run after run, with the host's writes between runs.

    Parameters
    ----------
    placed : PlacedStep
    host_tensors : callable
        ``host_tensors(run, outputs)`` -> the host inputs of run ``run`` (:func:`host_image_writes`), from
        ``outputs`` (the output tensors of the layers run so far, by name, signed).
    **params
        The NTSystem parameters.

    Returns
    -------
    dict
        ``outputs`` (every layer's output tensor by name), ``finals`` (per run, every vault's words after the
        run, by system vault number), ``writes`` (per run, the host's writes before it).
    """
    system = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    current = {0: np.zeros(system["vault_depth"], dtype=np.int64),
               **{pe + 1: np.zeros(system["pe_vault_depth"], dtype=np.int64) for pe in range(system["pes"])}}
    prepared, outputs, finals, all_writes = [], {}, [], []
    for run, names in enumerate(placed.runs):
        writes = host_image_writes(placed, run, host_tensors(run, dict(outputs)))
        all_writes.append(writes)
        current = {vault: words.copy() for vault, words in current.items()}
        for vault, words in writes.items():
            for address, word in words.items():
                current[vault][address] = word
        for name in names:
            layer = placed.layers[name]
            prepared.append(prepared_layer(layer, current))
            current = nt_system(prepared, **system)[-1]["final"]
            outputs[name] = executor.unload(layer, {vault - 1: words for vault, words in current.items()})
        finals.append(current)
    return {"outputs": outputs, "finals": finals, "writes": all_writes}
