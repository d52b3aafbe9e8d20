"""Golden cycle model of :class:`trainforge.hw.stream_stage.StreamStage`.

The model steps the stage's two registers cycle by cycle from the input's
``valid`` and the output's ``ready`` of each cycle, so it gives the exact
cycle of every transfer on both sides, not only the transactions' order.
"""
from ..spec import stream_stage as spec

__all__ = ["StageState", "step", "run"]


class StageState:
    """The stage's registers: the output and skid slots, each ``None`` when empty."""

    def __init__(self):
        self.output = None
        self.skid = None

    @property
    def input_ready(self):
        return self.skid is None

    @property
    def output_valid(self):
        return self.output is not None


def step(state, offered, output_ready):
    """One clock edge.

    Parameters
    ----------
    state : StageState
        Updated in place.
    offered : object or None
        The payload on ``i_stream`` this cycle (``valid`` high), or ``None``.
    output_ready : bool
        ``o_stream.ready`` this cycle.

    Returns
    -------
    accepted : bool
        Whether ``offered`` was transferred into the stage this cycle.
    delivered : object or None
        The payload transferred out on ``o_stream`` this cycle.
    """
    accepted = offered is not None and state.input_ready
    delivered = state.output if (state.output_valid and output_ready) else None
    if state.skid is not None:
        if output_ready:
            state.output, state.skid = state.skid, None
    elif accepted:
        if state.output is None or output_ready:
            state.output = offered
        else:
            state.skid = offered
    elif output_ready:
        state.output = None
    return accepted, delivered


def run(payloads, valid, ready, **params):
    """Transfers through the stage for given per-cycle ``valid`` and ``ready`` patterns.

    Parameters
    ----------
    payloads : sequence
        Transactions offered, in order.
    valid : sequence of bool
        Per cycle: whether the producer starts offering its next transaction
        (when it has one and offers none). An offer is held until it is taken,
        as the stream rules require.
    ready : sequence of bool
        Per cycle: the consumer's ``ready``.
    **params :
        The block's parameters (:data:`trainforge.spec.stream_stage.PARAMS`); checked, not otherwise used.

    Returns
    -------
    accepted_cycles : list of int
        Cycle of each input transfer.
    delivered : list of (int, object)
        ``(cycle, payload)`` of each output transfer.
    """
    spec.PARAMS.resolve(**params)
    state, pending, accepted_cycles, delivered = StageState(), list(payloads), [], []
    offered = None
    for cycle, (offer, take) in enumerate(zip(valid, ready)):
        if offered is None and pending and offer:
            offered = pending.pop(0)
        accepted, out = step(state, offered, bool(take))
        if accepted:
            accepted_cycles.append(cycle)
            offered = None
        if out is not None:
            delivered.append((cycle, out))
    return accepted_cycles, delivered
