"""Design-space exploration with the four switchable optimizations (Sections II-E and III).

Per layer, the exploration state is the parallelism type and the DySM factor
(shared by FWD, BWD and UPD so that kernels and features keep one layout);
the CoreD split is chosen per pass. Because memory reuse and re-layout only
couple adjacent layers, the best sequence of states is found exactly by
dynamic programming (Viterbi) over layers, and each state's CoreD splits are
scored in one vectorised call. Timestep pipelining and weight preloading are
evaluated on top, and are kept only where they help.
"""
from dataclasses import dataclass, field, replace
import math
import time

import numpy as np

from trainforge.sim.dsm.arch import asymmetric
from trainforge.sim.dsm.model import (IN, OUT, PARALLELISMS, PassContext, chip_work, core_splits,
                                      evaluate_pass, relayout_cycles)

DYSM_FACTORS = (1, 2, 4, 8)
CATEGORIES = ("compute", "array_underuse", "visible_overlapped", "non_overlapped", "auxiliary")


@dataclass(frozen=True)
class Optimizations:
    """The four optimizations of Section III, each switchable.

    Parameters
    ----------
    hybrid : bool
        Asymmetric torus (75 % of the per-chip bandwidth on X, as the paper's
        120/40) and the DataXModelY / ModelXDataY parallelisms.
    memory_reuse : bool
        Activation/error reuse across layers (UPD before BWD), kernel reuse
        across LSTM timesteps and, for inference, weight preloading.
    dysm : bool
        Dynamic spatial minibatching (factor chosen per layer from :data:`DYSM_FACTORS`).
    timestep_pipelining : bool
        Pipe groups of consecutive non-bidirectional recurrent layers, each stage a band of
        whole torus rows given by OPS, with the other switches applying inside the stage.
    """

    hybrid: bool = False
    memory_reuse: bool = False
    dysm: bool = False
    timestep_pipelining: bool = False

    @classmethod
    def cumulative(cls, count):
        """The first ``count`` optimizations in the paper's stacking order (Fig. 11)."""
        flags = [True] * count + [False] * (4 - count)
        return cls(*flags)


@dataclass
class LayerChoice:
    """The configuration chosen for one layer.

    Attributes
    ----------
    name : str
    parallelism : str
    dysm : int
    passes : dict
        Per pass: ``split`` (CoreD counts in/out/ij/kij/mb), ``cycles`` and the
        ``categories`` of Fig. 13 (cycles), ``input_resident``.
    pipelined : bool
        Executed in a timestep-pipelining group (then ``chips`` says how many).
    """

    name: str
    parallelism: str
    dysm: int
    passes: dict = field(default_factory=dict)
    pipelined: bool = False
    chips: int = 0


@dataclass
class ExplorationResult:
    """Outcome of :func:`explore`.

    Attributes
    ----------
    cycles : float
        Total cycles for one minibatch (training: FWD+BWD+UPD; inference: FWD).
    ideal_cycles : float
        MACs over the peak MAC rate.
    layers : list of LayerChoice
    points : int
        Core-split configurations evaluated by the performance model.
    seconds : float
        Wall time of the exploration.
    """

    cycles: float
    ideal_cycles: float
    layers: list
    points: int
    seconds: float

    @property
    def utilization(self):
        return self.ideal_cycles / self.cycles

    def to_dict(self):
        return {
            "cycles": self.cycles, "utilization": self.utilization, "points_evaluated": self.points,
            "seconds": self.seconds, "points_per_second": self.points / max(self.seconds, 1e-9),
            "layers": [{"name": c.name, "parallelism": c.parallelism, "dysm": c.dysm, "pipelined": c.pipelined,
                        "chips": c.chips,
                        "passes": {p: {"split": [int(x) for x in v["split"]], "cycles": float(v["cycles"]),
                                       "input_resident": bool(v["input_resident"]),
                                       "categories": {k: float(x) for k, x in v["categories"].items()}}
                                   for p, v in c.passes.items()}} for c in self.layers],
        }


def _categories(result, index):
    total = result["total"][index]
    ideal = result["ideal"][index]
    pri = result["pri"][index]
    busy = result["busy"][index]
    aux = result["aux"][index]
    nonovl = result["nonovl"][index]
    return {"compute": ideal, "array_underuse": pri - ideal, "visible_overlapped": busy - pri,
            "non_overlapped": nonovl, "auxiliary": aux, "check": total}


class _Explorer:
    """One exploration: caches pass evaluations and counts model points."""

    def __init__(self, workload, arch, optimizations, training, held_bytes=0.0, preloaded=frozenset(),
                 first_layer_bwd=False, write_held_shortcuts=True):
        self.workload = workload
        # Inference writes every output read by more than one layer, also when each of them holds
        # it in the scratchpads (a residual shortcut). False: such an output is not written
        # (the counterfactual of sim/dsm/feature_reuse.py).
        self.write_held_shortcuts = write_held_shortcuts
        # The network's first layer needs no BWD pass (no error to propagate to the input). A layer
        # explored on its own (a pipe stage) is not the network's first layer: keep its BWD.
        self.first_layer_bwd = first_layer_bwd
        self.arch = asymmetric(arch) if optimizations.hybrid else arch
        self.opts = optimizations
        self.training = training
        self.held = held_bytes
        self.preloaded = preloaded
        self.splits = core_splits(self.arch.chip.cores)
        self.points = 0
        self.usable = self.arch.core.scratchpad_bytes * (1 - self.arch.core.stream_buffer_fraction) - held_bytes
        parallelisms = PARALLELISMS if optimizations.hybrid else PARALLELISMS[:2]
        if self.arch.system.chips == 1:
            parallelisms = PARALLELISMS[:1]
        self.states = [(p, f) for p in parallelisms for f in (DYSM_FACTORS if optimizations.dysm else (1,))
                       if f == 1 or math.ceil(workload.n_mb / np.prod(self._mb_chips(p))) >= f]
        self.passes = ("FWD", "BWD", "UPD") if training else ("FWD",)
        consumers = {}
        for position in range(len(workload.layers)):
            producer = workload.producer(position)
            if producer is not None:
                consumers.setdefault(producer, []).append(position)
        for position, layer in enumerate(workload.layers):
            if layer.residual_from is not None:
                consumers.setdefault(workload.index(layer.residual_from), []).append(position)
        self.consumers = consumers

    def _mb_chips(self, parallelism):
        from trainforge.sim.dsm.model import chip_grid
        mb_x, mb_y, _, _ = chip_grid(parallelism, self.arch.system)
        return mb_x, mb_y

    def resident_bytes(self, position, state):
        """Per-core bytes of layer ``position``'s input feature tensor (whole sequence, one spatial minibatch)."""
        layer = self.workload.layers[position]
        chipd = chip_work(layer, self.workload.n_mb, state[0], self.arch.system, state[1])
        elements = chipd[IN] * chipd[4] * layer.input_ij * layer.n_ts * layer.directions
        return elements * self.arch.bytes_per_element / self.arch.chip.cores

    def best(self, position, pass_name, state, context):
        layer = self.workload.layers[position]
        result = evaluate_pass(layer, pass_name, state[0], self.arch, self.workload.n_mb, state[1], context, self.splits)
        self.points += len(self.splits)
        index = int(np.argmin(result["total"]))
        return result, index

    def layer_cost(self, position, state, fwd_resident=False, producer_split=None, err_in=False, drop_bwd_write=False,
                   drop_fwd_write=False, carried_write=0.0):
        """Cost of all passes of one layer in one state; returns (cycles, per-pass records).

        ``carried_write`` is the producer's FWD output (bytes per chip) that this
        layer's FWD writes back while it computes (training with memory reuse).
        """
        layer = self.workload.layers[position]
        keep_kernel = self.opts.memory_reuse and layer.n_ts > 1
        weight_fetches = 0 if layer.name in self.preloaded else None
        records = {}
        total = 0.0
        for pass_name in self.passes:
            if pass_name == "BWD" and position == 0 and not self.first_layer_bwd:
                continue
            if pass_name == "FWD":
                context = PassContext(input_resident=fwd_resident, producer_split=producer_split, held_bytes=self.held,
                                      weight_fetches=weight_fetches, keep_kernel=keep_kernel,
                                      drop_write=drop_fwd_write, shortcut_resident=self._shortcut_resident(position, state),
                                      carried_write_bytes=carried_write)
            else:
                context = PassContext(input_resident=err_in, held_bytes=self.held, keep_kernel=keep_kernel,
                                      drop_write=drop_bwd_write and pass_name == "BWD")
            cycles, records[pass_name] = self.pass_record(position, pass_name, state, context)
            total += cycles
        return total, records

    def pass_record(self, position, pass_name, state, context):
        """Best split of one pass under ``context``; returns (cycles, record)."""
        result, index = self.best(position, pass_name, state, context)
        return result["total"][index], {
            "split": result["splits"][index], "cycles": result["total"][index],
            "input_resident": context.input_resident, "categories": _categories(result, index),
            "once": result["once"][index], "write_bytes": float(result["write_bytes"][index]),
            "transfers": {name: float(np.broadcast_to(value, result["total"].shape)[index])
                          for name, value in result["transfers"].items()},
            "context": context}

    def _shortcut_resident(self, position, state):
        layer = self.workload.layers[position]
        if not self.opts.memory_reuse or layer.residual_from is None:
            return False
        return 2 * self.resident_bytes(position, state) <= self.usable

    def _held_by_all_consumers(self, producer, reader, state):
        """Whether, in inference without ``write_held_shortcuts``, no layer reads ``producer``'s output from memory.

        ``reader`` is the consumer known to read it from the scratchpads (or ``None``); every
        other consumer must take it as a resident residual shortcut.
        """
        if self.write_held_shortcuts or self.training:
            return False
        others = [c for c in self.consumers.get(producer, []) if c != reader]
        if not others and reader is None:
            return False
        return all(self.workload.layers[c].residual_from == self.workload.layers[producer].name
                   and self._shortcut_resident(c, state) for c in others)

    def can_reuse(self, producer, consumer, state, producer_input_resident=False):
        """Whether ``consumer`` can read ``producer``'s output from the scratchpads in ``state``.

        When the producer itself computes from a resident input, that input and the
        output being held coexist in the scratchpads until the producer finishes.
        """
        if not self.opts.memory_reuse or producer is None:
            return False
        need = self.resident_bytes(consumer, state)
        if consumer - producer > 1:
            need *= 2          # retained across the layers in between
        elif producer_input_resident:
            need += self.resident_bytes(producer, state)
        return need <= self.usable

    def run(self):
        workload = self.workload
        n_layers = len(workload.layers)
        # Viterbi over states. best[s] = (cycles, path-records)
        previous = None
        for position in range(n_layers):
            producer = workload.producer(position)
            current = {}
            for state in self.states:
                held_output = self._held_by_all_consumers(position, None, state)
                base_cost, base_records = self.layer_cost(position, state, drop_fwd_write=held_output)
                options = []
                if previous is None:
                    options.append((base_cost, None, base_records, None))
                for prev_state, (prev_cost, prev_path, _) in (previous or {}).items():
                    cost, records = base_cost, base_records
                    prev_records = prev_path[-1][2]
                    if prev_state == state and producer is not None and self.can_reuse(
                            producer, position, state, prev_records["FWD"]["input_resident"] and producer == position - 1):
                        # The producer's output stays in the scratchpads for this layer. When the producer
                        # ran just before, its passes are re-timed: FWD no longer writes the output (inference:
                        # discarded; training: written back by this layer's FWD while it computes, Section
                        # III-B), BWD/UPD read this layer's errors from the scratchpads (training).
                        single = (len(self.consumers.get(producer, [])) == 1
                                  or self._held_by_all_consumers(producer, position, state))
                        fwd_split, carried, delta, new_records = None, 0.0, 0.0, None
                        if producer == position - 1 and (self.training or single):
                            drop = replace(prev_records["FWD"]["context"], drop_write=True)
                            p_cost, p_fwd = self.pass_record(producer, "FWD", prev_state, drop)
                            new_records = {"FWD": p_fwd}
                            old = prev_records["FWD"]["cycles"]
                            if self.training:
                                carried = p_fwd["write_bytes"]
                                old += sum(prev_records[p]["cycles"] for p in ("BWD", "UPD") if p in prev_records)
                                e_cost, e_records = self._producer_with_resident_error(producer, state)
                                p_cost += e_cost
                                new_records.update(e_records)
                            delta = p_cost - old
                            fwd_split = p_fwd["split"]
                        elif producer == position - 1:
                            fwd_split = prev_records["FWD"]["split"]
                        cost, records = self.layer_cost(position, state, fwd_resident=True, producer_split=fwd_split,
                                                        drop_bwd_write=self.training, carried_write=carried,
                                                        drop_fwd_write=held_output)
                        cost = cost + delta
                        options.append((prev_cost + cost, prev_state, records,
                                        (producer, new_records) if new_records is not None else None))
                    else:
                        extra = 0.0
                        if prev_state[0] != state[0] and producer is not None:
                            tensor = self._boundary_elements(position)
                            extra = relayout_cycles(tensor, self.arch)[0] * (2 if self.training and position > 0 else 1)
                        options.append((prev_cost + base_cost + extra, prev_state, base_records, None))
                total, prev_state, records, producer_update = min(options, key=lambda item: item[0])
                path = [] if prev_state is None else list(previous[prev_state][1])
                if producer_update is not None:
                    p_pos, p_records = producer_update
                    name, p_state, old_records = path[-1]
                    merged = dict(old_records)
                    merged.update(p_records)
                    path[-1] = (name, p_state, merged)
                path.append((workload.layers[position].name, state, records))
                current[state] = (total, path, records)
            previous = current
        total, path, _ = min(previous.values(), key=lambda item: item[0])
        return total, path

    def _producer_with_resident_error(self, producer, state):
        cost, records = 0.0, {}
        for pass_name in ("BWD", "UPD"):
            if pass_name == "BWD" and producer == 0 and not self.first_layer_bwd:
                continue
            layer = self.workload.layers[producer]
            context = PassContext(input_resident=True, held_bytes=self.held, keep_kernel=self.opts.memory_reuse and layer.n_ts > 1)
            cycles, records[pass_name] = self.pass_record(producer, pass_name, state, context)
            cost += cycles
        return cost, records

    def _boundary_elements(self, position):
        layer = self.workload.layers[position]
        return layer.n_in * layer.input_ij * self.workload.n_mb * layer.n_ts


def _pipe_groups(workload):
    """Runs of consecutive recurrent layers (n_ts > 1, not bidirectional) with at least two layers."""
    groups, run = [], []
    for position, layer in enumerate(workload.layers):
        if layer.n_ts > 1 and not layer.bidirectional:
            run.append(position)
        else:
            if len(run) > 1:
                groups.append(run)
            run = []
    if len(run) > 1:
        groups.append(run)
    return groups


def allocate_chips(macs, chips):
    """Units (chips, or rows of chips) per layer proportional to OPS, at least one each, summing to ``chips``."""
    macs = np.asarray(macs, dtype=float)
    share = np.maximum(1, np.floor(chips * macs / macs.sum())).astype(int)
    while share.sum() > chips:
        share[np.argmax(share)] -= 1
    while share.sum() < chips:
        share[np.argmax(macs / share)] += 1
    return share


def _pipe_chunks(group, count):
    """Split a pipe group into ``count`` consecutive chunks of layers, as even as possible."""
    count = max(1, min(count, len(group)))
    size, extra = divmod(len(group), count)
    chunks, start = [], 0
    for index in range(count):
        stop = start + size + (1 if index < extra else 0)
        chunks.append(group[start:stop])
        start = stop
    return chunks


def _chunk_counts(layers, rows):
    """Chunk counts to try for a pipe group: the fewest that give every layer a row, then doubling.

    Each chunk is pipelined on the whole torus, one chunk after the other; fewer,
    longer chunks give each stage fewer rows. Counts stop where a chunk would
    have fewer than two layers (nothing left to pipeline).
    """
    count = -(-layers // rows)
    counts = []
    while -(-layers // count) >= 2:
        counts.append(count)
        count *= 2
    return counts


def _sub_torus(arch, rows):
    """The sub-torus of a pipe stage: ``rows`` whole rows of the torus (all ``chips_x`` chips of each).

    A whole row keeps its X ring, and a band of whole rows is itself an
    ``chips_x x rows`` torus on which every parallelism type, the hybrid ones
    included, maps as on the full system.
    """
    return arch.with_changes(**{"system.chips_y": int(rows)})


class _StageCache:
    """Single-layer explorations of pipe-stage layers, by layer shape and rows of the sub-torus."""

    def __init__(self, workload, arch, optimizations, training):
        self.workload, self.arch, self.training = workload, arch, training
        # Inside a stage every switch but pipelining applies, hybrid parallelism included.
        self.optimizations = replace(optimizations, timestep_pipelining=False)
        self.results = {}
        self.points = 0

    def get(self, position, rows):
        """(state, per-pass records) of layer ``position`` alone on ``rows`` whole rows."""
        layer = self.workload.layers[position]
        # Evaluated alone on its chips; the shortcut add of a residual layer is kept
        # as an element-wise auxiliary cost via the fused SFP chain. Layers of the same
        # shape share one exploration.
        alone = replace(layer, name="stage", input_from=None, residual_from=None,
                        aux=tuple(op for op in layer.aux if op != "residual"))
        key = (alone, int(rows), position > 0)
        if key not in self.results:
            sub = _sub_torus(self.arch, rows)
            single = type(self.workload)(layer.name, (alone,), self.workload.n_mb)
            explorer = _Explorer(single, sub, self.optimizations, self.training, first_layer_bwd=position > 0)
            explorer.arch = sub          # already asymmetric if hybrid is on
            _, path = explorer.run()
            self.points += explorer.points
            self.results[key] = path[0][1:]
        return self.results[key]


def _pipelined_cycles(workload, arch, cache, chunks):
    """Cycles of a pipe group run as ``chunks`` one after the other, and each layer's (state, records, chips)."""
    rows_total = arch.system.chips_y
    cycles, choices = 0.0, {}
    for chunk in chunks:
        members = [workload.layers[p] for p in chunk]
        rows = allocate_chips([m.macs(1) for m in members], rows_total)
        stage, once = {}, 0.0
        for position, layer, count in zip(chunk, members, rows):
            state, records = cache.get(position, count)
            chips = int(count) * arch.system.chips_x
            choices[position] = (state, records, chips)
            handoff = (layer.n_out * workload.n_mb * arch.bytes_per_element / chips / arch.system.link_bw_x
                       * arch.frequency)
            for pass_name, passed in records.items():
                per_step = (passed["cycles"] - passed["once"]) / layer.n_ts + handoff
                stage[pass_name] = max(stage.get(pass_name, 0.0), per_step)
                once = max(once, passed["once"])
        n_ts = members[0].n_ts
        cycles += sum((n_ts + len(members) - 1) * step for step in stage.values()) + once
    return cycles, choices


def _apply_pipelining(workload, arch, optimizations, training, layers, total, points):
    """Replace each pipe group by its timestep-pipelined schedule when that is faster.

    Stages are whole sub-tori: the torus's rows go to the layers of a chunk by
    OPS (at least one row each), so that every stage is a ``chips_x x rows``
    torus and keeps the hybrid parallelisms. A group is pipelined in consecutive
    chunks, one after the other, over the whole torus; the chunk count is
    searched (:func:`_chunk_counts`) and the fastest kept.
    """
    cache = _StageCache(workload, arch, optimizations, training)
    rows_total = arch.system.chips_y
    for group in _pipe_groups(workload):
        uni = sum(sum(r["cycles"] for r in layers[p].passes.values()) for p in group)
        best = None
        for count in _chunk_counts(len(group), rows_total):
            trial = _pipelined_cycles(workload, arch, cache, _pipe_chunks(group, count))
            if best is None or trial[0] < best[0]:
                best = trial
        if best is not None and best[0] < uni:
            total = total - uni + best[0]
            for position, (state, records, chips) in best[1].items():
                layers[position] = LayerChoice(workload.layers[position].name, state[0], state[1], records,
                                               pipelined=True, chips=chips)
    return total, points + cache.points


def explore(workload, arch, optimizations=Optimizations(), training=True):
    """Find the best configuration of every layer and pass.

    Parameters
    ----------
    workload : Workload
    arch : Architecture
    optimizations : Optimizations
    training : bool
        FWD+BWD+UPD when True, FWD only (inference) when False.

    Returns
    -------
    ExplorationResult
    """
    start = time.perf_counter()
    explorer = _Explorer(workload, arch, optimizations, training)
    total, path = explorer.run()
    points = explorer.points
    if optimizations.memory_reuse and not training:
        total, path, points = _with_preloading(workload, arch, optimizations, total, path, points)
    passes = 3 if training else 1
    ideal = passes * workload.macs() / (explorer.arch.macs_per_core * explorer.arch.chip.cores * explorer.arch.system.chips)
    if training:  # no BWD for the first layer
        ideal -= workload.layers[0].macs(workload.n_mb) / (explorer.arch.macs_per_core * explorer.arch.chip.cores * explorer.arch.system.chips)
    layers = [LayerChoice(name, state[0], state[1], records) for name, state, records in path]
    if optimizations.timestep_pipelining:
        total, points = _apply_pipelining(workload, explorer.arch, optimizations, training, layers, total, points)
    return ExplorationResult(float(total), float(ideal), layers, points, time.perf_counter() - start)


def _with_preloading(workload, arch, optimizations, total, path, points):
    """Weight preloading for inference: preload the most fetch-sensitive kernels first, sweep how many."""
    probe = _Explorer(workload, arch, optimizations, False)
    bpe = probe.arch.bytes_per_element
    gains = []
    for position, (name, state, records) in enumerate(path):
        layer = workload.layers[position]
        # Kernel share of one core, assuming the preloaded layer's split partitions the kernel.
        kernel_per_core = layer.weights * bpe / (probe.arch.chip.cores * (1 if state[0] == "Data" else probe.arch.system.chips))
        context = PassContext(weight_fetches=0)
        result, index = probe.best(position, "FWD", state, context)
        gains.append(((records["FWD"]["cycles"] - result["total"][index]) / kernel_per_core, name, kernel_per_core))
    points += probe.points
    gains.sort(reverse=True)
    best = (total, path)
    held, chosen = 0.0, set()
    capacity = probe.arch.core.scratchpad_bytes * (1 - probe.arch.core.stream_buffer_fraction)
    for gain, name, size in gains:
        if gain <= 0 or held + size > capacity:
            continue
        held += size
        chosen.add(name)
        trial = _Explorer(workload, arch, optimizations, False, held_bytes=held, preloaded=frozenset(chosen))
        trial_total, trial_path = trial.run()
        points += trial.points
        if trial_total < best[0]:
            best = (trial_total, trial_path)
    return best[0], best[1], points
