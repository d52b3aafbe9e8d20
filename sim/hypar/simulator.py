"""Event-driven timeline of one training step on an accelerator array.

Every accelerator holds the same share of every layer (Algorithm 2 splits
symmetrically), so one accelerator's compute timeline and the array's network
describe the step. Tasks, per layer l:

* ``fwd l`` (compute), then ``fwd-reduce l``: mp partial sums of F_{l+1};
* ``fwd-transfer l``: the dp -> mp re-layout of F_l before ``fwd l``;
* ``bwd l`` (error E_l, skipped for the first layer) and ``grad l`` (dW_l),
  both after ``bwd-transfer l+1`` (the re-layout of E_{l+1});
* ``grad-reduce l``: dp partial sums of dW_l, which overlaps the backward
  pass of the layers below it.

Three-type partitions (AccPar's type III, :mod:`trainforge.sim.hypar.third_type`;
``choices`` as int types 0..2 with at least one 2) add, per layer,
``bwd-reduce l``: the type-III partial sums of E_l, after ``bwd l`` and
before ``bwd-transfer l`` hands the error to l's sources (listed before
``grad-reduce l``). A type-2 layer has no forward or gradient reduce: each
group computes half of the output channels from the whole input and their
weight gradients from the whole batch. Its work per accelerator is the
share (batch x C_in x C_out) the levels leave; every node model times it
(:mod:`trainforge.sim.hypar.nodes` with the C_out share rounded up).

The compute unit runs its tasks in program order (forward 0..L-1, then
bwd/grad from L-1 down to 0); the network runs one transfer at a time, in the
order they become ready. A task starts when its resource is free and its
inputs are complete, so compute and communication overlap only where the
dependences allow. A transfer's duration sums, over levels, the level's pair
traffic times the topology's per-byte time at that level.

Node compute model
------------------
:class:`RooflineNode` (the default) is the paper's HMC node, one Eyeriss-like
row-stationary unit per vault, as a roofline: ``max(MACs / (units_per_hmc x
macs_per_cycle x f), DRAM bytes / DRAM bandwidth)``. Any object with the same ``phase_seconds(work)`` method can
replace it: :mod:`trainforge.sim.hypar.nodes` plugs in the golden cycle /
throughput models of the verified blocks (TensorDash, CATERPILLAR,
NeuroTrainer), each turning a :class:`LayerWork` into per-phase seconds.
"""
from dataclasses import dataclass, field

import numpy as np

from . import third_type
from .comm import LayerTensors
from .config import ArrayConfig, EnergyConfig, NodeConfig
from .network import Network
from .partition import group_shares, traffic_of
from .topology import Topology

PHASES = ("forward", "backward", "gradient")


@dataclass(frozen=True)
class LayerWork:
    """What one accelerator does for each layer in each phase.

    Attributes
    ----------
    macs : numpy.ndarray, shape (3, L)
        Multiply-accumulates per phase (forward, backward, gradient); the
        first layer has no backward (no error is propagated to the input).
    dram_bytes : numpy.ndarray, shape (3, L)
        Local DRAM traffic per phase: each phase streams its two operands
        and its result once (F_l, W_l and F_{l+1}-sized tensors).
    network : Network
        The layers' shapes, for node models that time a layer by its shape
        (:mod:`trainforge.sim.hypar.nodes`).
    samples, in_channels : numpy.ndarray, shape (L,)
        One accelerator's share of the batch and of each layer's C_in (dp
        halves the batch, mp halves C_in); fractional where a split is uneven.
    out_channels : numpy.ndarray, shape (L,), or None
        One accelerator's share of each layer's C_out where a three-type
        partition splits it (type III); ``None``: every layer's whole C_out.
    """

    macs: np.ndarray
    dram_bytes: np.ndarray
    network: Network
    samples: np.ndarray
    in_channels: np.ndarray
    out_channels: np.ndarray = None

    @classmethod
    def of(cls, network, setup, choices):
        """Per-accelerator work of ``network`` under the partition ``choices`` (..., H, L).

        Vectorised over leading axes: ``macs`` and ``dram_bytes`` get shape (..., 3, L),
        ``samples`` and ``in_channels`` (..., L).
        """
        batch_share, in_channel_share = group_shares(np.asarray(choices, dtype=bool))
        batch_share, in_channel_share = batch_share[..., -1, :], in_channel_share[..., -1, :]
        tensors = LayerTensors.of(network, setup, batch_share, in_channel_share)
        arrays = network.arrays
        per_phase = (setup.batch * batch_share * arrays.in_channels * in_channel_share
                     * arrays.out_channels * arrays.kernel_area * arrays.out_area)
        macs = np.stack([per_phase] * 3, axis=-2)
        macs[..., 1, 0] = 0.0
        streamed = (tensors.input_map + tensors.weights + tensors.partial_sums) * setup.bytes_per_element
        dram = np.stack([streamed] * 3, axis=-2)
        dram[..., 1, 0] = 0.0
        return cls(macs=macs, dram_bytes=dram, network=network, samples=setup.batch * batch_share,
                   in_channels=arrays.in_channels * in_channel_share)

    @classmethod
    def of_types(cls, network, setup, types):
        """Per-accelerator work under the three-type partition ``types`` (..., H, L) (int, 0..2).

        As :meth:`of`, with type III halving a layer's C_out share: MACs are
        samples x C_in x C_out x K^2 x the output map of the share, and each
        phase streams the share's F_l (whole C_in under type III), W_l and
        F_{l+1} (its C_out share) once.
        """
        batch, in_channels, out_channels = (share[..., -1, :] for share in third_type.group_shares(types))
        arrays = network.arrays
        samples = setup.batch * batch
        per_phase = (samples * arrays.in_channels * in_channels * arrays.out_channels * out_channels
                     * arrays.kernel_area * arrays.out_area)
        macs = np.stack([per_phase] * 3, axis=-2)
        macs[..., 1, 0] = 0.0
        streamed = (samples * arrays.in_channels * in_channels * arrays.in_area
                    + arrays.in_channels * in_channels * arrays.out_channels * out_channels * arrays.kernel_area
                    + samples * arrays.out_channels * out_channels * arrays.out_area) * setup.bytes_per_element
        dram = np.stack([streamed] * 3, axis=-2)
        dram[..., 1, 0] = 0.0
        return cls(macs=macs, dram_bytes=dram, network=network, samples=samples,
                   in_channels=arrays.in_channels * in_channels, out_channels=arrays.out_channels * out_channels)


@dataclass(frozen=True)
class RooflineNode:
    """Default node compute model: a roofline of one accelerator (an HMC with ``node.units_per_hmc`` units).

    Parameters
    ----------
    node : NodeConfig
    """

    node: NodeConfig = field(default_factory=NodeConfig)

    def phase_seconds(self, work):
        """Seconds per phase and layer, shape (3, L)."""
        compute = work.macs / (self.node.units_per_hmc * self.node.macs_per_cycle * self.node.frequency_hz)
        memory = work.dram_bytes / self.node.dram_bytes_per_second
        return np.maximum(compute, memory)


@dataclass(frozen=True)
class Event:
    """One task on the timeline (seconds from the start of the step)."""

    name: str
    resource: str
    start: float
    end: float


@dataclass(frozen=True)
class StepResult:
    """One simulated training step.

    Attributes
    ----------
    seconds : float
        Step time.
    energy_joules : float
        Energy of the whole array for the step.
    compute_seconds, network_seconds : float
        Busy time of one compute unit and of the network.
    communication_bytes : float
        Algorithm 2's total traffic of the partition.
    events : tuple of Event
    """

    seconds: float
    energy_joules: float
    compute_seconds: float
    network_seconds: float
    communication_bytes: float
    events: tuple


def _task_graph(network, backward_reduce=False):
    """The tasks of one step, in program order: [(name, resource, (duration table, row, layer), deps)].

    ``resource`` is ``"compute"`` or ``"network"``. The duration of a task is
    ``durations[table][..., row, layer]`` for compute (row = phase) and
    ``durations[table][..., layer]`` for network tasks (row is None).
    A layer's forward transfer waits for the forward pass (and reduce) of
    every layer it reads (the one before it in a chain; every concatenated
    source and the residual sources in a DAG); its backward and gradient wait for the backward
    transfer of every layer reading it, or for its own forward reduce when
    no layer does (the last layer). With ``backward_reduce`` (three-type
    partitions) every layer gets a ``bwd-reduce`` after its ``bwd``, and its
    ``bwd-transfer`` waits for it.
    """
    layers = len(network)
    producers = [[] for _ in range(layers)]
    for source, reader, _share in network.input_edges():
        if source not in producers[reader]:
            producers[reader].append(source)
    readers = [[] for _ in range(layers)]
    for reader, sources in enumerate(producers):
        for source in sources:
            readers[source].append(reader)
    tasks = []
    for index in range(layers):
        deps = (f"fwd-transfer {index}",) if producers[index] else ()
        if producers[index]:
            tasks.append((f"fwd-transfer {index}", "network", ("forward_transfer", None, index),
                          tuple(name for source in producers[index]
                                for name in (f"fwd {source}", f"fwd-reduce {source}"))))
        tasks.append((f"fwd {index}", "compute", ("compute", 0, index), deps))
        tasks.append((f"fwd-reduce {index}", "network", ("forward_reduce", None, index), (f"fwd {index}",)))
    # the backward transfer into the producers of layer k is listed just before its last producer's backward
    transfer_before = [[] for _ in range(layers)]
    for reader, sources in enumerate(producers):
        if sources:
            transfer_before[max(sources)].append(reader)
    for index in range(layers - 1, -1, -1):
        for reader in sorted(transfer_before[index], reverse=True):
            after = (f"bwd {reader}", f"bwd-reduce {reader}") if backward_reduce else (f"bwd {reader}",)
            tasks.append((f"bwd-transfer {reader}", "network", ("backward_transfer", None, reader), after))
        if readers[index]:
            needs = tuple(f"bwd-transfer {reader}" for reader in readers[index])
        else:
            needs = (f"fwd-reduce {index}",)
        tasks.append((f"bwd {index}", "compute", ("compute", 1, index), needs))
        tasks.append((f"grad {index}", "compute", ("compute", 2, index), needs))
        if backward_reduce:
            tasks.append((f"bwd-reduce {index}", "network", ("backward_reduce", None, index), (f"bwd {index}",)))
        tasks.append((f"grad-reduce {index}", "network", ("gradient_reduce", None, index), (f"grad {index}",)))
    return tasks


def _duration(durations, key):
    table, row, layer = key
    values = durations[table]
    return values[..., row, layer] if row is not None else values[..., layer]


def _schedule(tasks):
    """List-schedule ``tasks`` [(name, resource, duration, deps)] on 'compute' (in order) and 'network'.

    The reference, one partition at a time: every step, the task that can
    start earliest is placed (ties: compute first, then the network task
    listed first). :func:`_schedule_batch` is the same rule over a batch.
    """
    finish, events = {}, []
    free = {"compute": 0.0, "network": 0.0}
    compute_queue = [task for task in tasks if task[1] == "compute"]
    network_pending = [task for task in tasks if task[1] == "network"]
    while compute_queue or network_pending:
        candidates = []
        if compute_queue and all(dep in finish for dep in compute_queue[0][3]):
            task = compute_queue[0]
            candidates.append((max([free["compute"], *(finish[dep] for dep in task[3])]), 0, task))
        for task in network_pending:
            if all(dep in finish for dep in task[3]):
                candidates.append((max([free["network"], *(finish[dep] for dep in task[3])]), 1, task))
        start, _, (name, resource, duration, _deps) = min(candidates, key=lambda item: (item[0], item[1]))
        (compute_queue.remove if resource == "compute" else network_pending.remove)((name, resource, duration,
                                                                                     _deps))
        finish[name] = start + duration
        free[resource] = finish[name]
        if duration > 0:
            events.append(Event(name, resource, start, finish[name]))
    return max(finish.values(), default=0.0), tuple(events)


def _schedule_batch(graph, durations, count):
    """:func:`_schedule`'s rule for ``count`` partitions at once; returns the step times, shape (count,).

    Parameters
    ----------
    graph : list
        :func:`_task_graph` output (the same tasks for every partition).
    durations : dict of numpy.ndarray
        Duration tables with a leading axis of length ``count``.
    count : int

    Every partition places one task per iteration, so the loop runs once per
    task; within an iteration each partition picks its own task with the same
    key as the reference: earliest start, then compute before network, then
    the network task listed first.
    """
    names = [task[0] for task in graph]
    position = {name: index for index, name in enumerate(names)}
    deps = [[position[dep] for dep in task[3]] for task in graph]
    length = np.array([np.broadcast_to(_duration(durations, task[2]), (count,)) for task in graph])  # (T, N)
    is_network = np.array([task[1] == "network" for task in graph])
    compute_order = np.flatnonzero(~is_network)
    network_tasks = np.flatnonzero(is_network)
    tasks, rows = len(graph), np.arange(count)
    finish = np.zeros((tasks, count))
    done = np.zeros((tasks, count), dtype=bool)
    free_compute, free_network = np.zeros(count), np.zeros(count)
    head = np.zeros(count, dtype=np.int64)  # position in compute_order of the next compute task
    for _ in range(tasks):
        ready = np.ones((tasks, count), dtype=bool)
        latest = np.zeros((tasks, count))
        for task, task_deps in enumerate(deps):
            for dep in task_deps:
                ready[task] &= done[dep]
                latest[task] = np.maximum(latest[task], finish[dep])
        # network candidate: the first listed task with the earliest start
        network_start = np.where(ready[network_tasks] & ~done[network_tasks],
                                 np.maximum(free_network, latest[network_tasks]), np.inf)
        best = np.argmin(network_start, axis=0)  # argmin returns the first minimum, i.e. list order
        best_network, best_network_start = network_tasks[best], network_start[best, rows]
        has_compute = head < len(compute_order)
        compute_task = compute_order[np.minimum(head, len(compute_order) - 1)]
        compute_start = np.where(has_compute & ready[compute_task, rows],
                                 np.maximum(free_compute, latest[compute_task, rows]), np.inf)
        take_compute = compute_start <= best_network_start
        chosen = np.where(take_compute, compute_task, best_network)
        start = np.where(take_compute, compute_start, best_network_start)
        if not np.isfinite(start).all():
            raise RuntimeError("task graph deadlock")  # cannot happen for _task_graph
        end = start + length[chosen, rows]
        finish[chosen, rows] = end
        done[chosen, rows] = True
        free_compute = np.where(take_compute, end, free_compute)
        free_network = np.where(take_compute, free_network, end)
        head = head + take_compute
    return finish.max(axis=0)


def _partition(network, choices):
    """(``choices`` as bool mp choices, or as int types when some layer is type III (2); whether it is)."""
    values = np.asarray(choices)
    if values.dtype == bool:
        return values, False
    types = third_type.checked_types(network, values)
    if (types == 2).any():
        return types, True
    return types == 1, False


def _durations(network, setup, choices, array, node_model, three_types=False):
    """Work, traffic and per-task durations, vectorised over leading axes of ``choices`` (..., H, L)."""
    if three_types:
        work = LayerWork.of_types(network, setup, choices)
    else:
        work = LayerWork.of(network, setup, choices)
    compute = np.asarray(node_model.phase_seconds(work), dtype=np.float64)
    if compute.shape != work.macs.shape:
        raise ValueError(f"node model returned shape {compute.shape}; expected {work.macs.shape} "
                         "(phase_seconds must broadcast over leading axes)")
    traffic = (third_type.traffic_of if three_types else traffic_of)(network, setup, choices)
    per_byte = Topology(array).seconds_per_pair_byte[:, None]

    def seconds(pair_bytes):
        return (pair_bytes * per_byte).sum(axis=-2)

    durations = {"compute": compute, "forward_reduce": seconds(traffic.forward_reduce),
                 "gradient_reduce": seconds(traffic.gradient_reduce),
                 "forward_transfer": seconds(traffic.forward_transfer),
                 "backward_transfer": seconds(traffic.backward_transfer)}
    if three_types:
        durations["backward_reduce"] = seconds(traffic.backward_reduce)
    return work, traffic, durations


def _energy_joules(work, traffic, array, energy):
    words_per_byte = 1.0 / 4.0  # the energy table is per 32-bit access
    macs = work.macs.sum(axis=(-2, -1)) * array.accelerators
    return 1e-12 * (
        macs * (energy.add_pj + energy.multiply_pj + energy.sram_accesses_per_mac * energy.sram_pj)
        + work.dram_bytes.sum(axis=(-2, -1)) * array.accelerators * words_per_byte * energy.dram_pj
        # a communicated word is read from the remote DRAM and written to the local one
        + traffic.total_bytes * words_per_byte * 2 * energy.dram_pj)


def simulate_step(network, setup, choices, array=None, node_model=None, energy=None):
    """Simulate one training step of ``network`` partitioned by ``choices``.

    Parameters
    ----------
    network : Network
    setup : TrainingSetup
    choices : numpy.ndarray of bool, shape (H, L)
        H must equal ``array.levels``; True for mp. Or int types 0 (dp), 1
        (mp), 2 (type III, :mod:`trainforge.sim.hypar.third_type`).
    array : ArrayConfig, optional
    node_model : object with ``phase_seconds(LayerWork)``, optional
        Defaults to :class:`RooflineNode`.
    energy : EnergyConfig, optional

    Returns
    -------
    StepResult
    """
    array = array or ArrayConfig()
    node_model = node_model or RooflineNode()
    energy = energy or EnergyConfig()
    choices, three_types = _partition(network, np.reshape(choices, (array.levels, len(network))))
    work, traffic, durations = _durations(network, setup, choices, array, node_model, three_types)
    tasks = [(name, resource, _duration(durations, key), deps) for name, resource, key, deps
             in _task_graph(network, backward_reduce=three_types)]
    step_seconds, events = _schedule(tasks)
    network_seconds = sum(durations[key].sum() for key in durations if key != "compute")
    return StepResult(
        seconds=step_seconds,
        energy_joules=float(_energy_joules(work, traffic, array, energy)),
        compute_seconds=float(durations["compute"].sum()),
        network_seconds=float(network_seconds),
        communication_bytes=float(traffic.total_bytes),
        events=events,
    )


@dataclass(frozen=True)
class BatchResult:
    """Many partitions of one network, simulated at once (arrays of shape (N,)).

    Attributes
    ----------
    seconds, energy_joules, communication_bytes : numpy.ndarray
        As in :class:`StepResult`, one entry per partition.
    """

    seconds: np.ndarray
    energy_joules: np.ndarray
    communication_bytes: np.ndarray


def simulate_steps(network, setup, choices, array=None, node_model=None, energy=None, chunk=16384):
    """:func:`simulate_step` for a batch of partitions ``choices`` (N, H, L), in numpy.

    Gives exactly (bit for bit) the step time, energy and traffic that
    :func:`simulate_step` gives for each partition alone; the timeline is the
    same list schedule (:func:`_schedule_batch`) run over the batch. Int
    types with some type III run every partition of the batch on the
    three-type task graph (zero-length ``bwd-reduce`` tasks where a layer is
    not type III). A custom
    ``node_model`` must broadcast ``phase_seconds`` over leading axes.
    ``chunk`` bounds the memory (about 2 x tasks x chunk floats).

    Returns
    -------
    BatchResult
    """
    array = array or ArrayConfig()
    node_model = node_model or RooflineNode()
    energy = energy or EnergyConfig()
    choices, three_types = _partition(network, np.reshape(choices, (-1, array.levels, len(network))))
    graph = _task_graph(network, backward_reduce=three_types)
    seconds, joules, traffic_bytes = [], [], []
    for first in range(0, len(choices), chunk):
        part = choices[first:first + chunk]
        work, traffic, durations = _durations(network, setup, part, array, node_model, three_types)
        seconds.append(_schedule_batch(graph, durations, len(part)))
        joules.append(_energy_joules(work, traffic, array, energy))
        traffic_bytes.append(traffic.total_bytes)
    join = (lambda parts: np.concatenate(parts)) if len(choices) else (lambda parts: np.zeros(0))
    return BatchResult(seconds=join(seconds), energy_joules=join(joules), communication_bytes=join(traffic_bytes))
