"""Golden model of :class:`trainforge.hw.neurotrainer.sequencer.NTSequencer`: which words each queue issues, per layer.

Rules (``spec/neurotrainer/sequencer.py``): the host's loads store ``data`` (its low bits, the
queue's word width) at word ``address`` of queue ``target``, or a layer table entry at entry
``address``; a later load to the same place wins; a word never loaded is 0. A run of ``L``
layers starts every queue's read pointer at word 0; layer ``l`` issues, from every queue, the
next ``counts[q]`` words of its table entry (the pointer wraps at ``queue_depth``), with the
entry's ``config`` on ``o_config``. Layers run one after the other; the words of layer ``l + 1``
are issued only after those of layer ``l`` were all taken and the system reported ``idle``.
The cycles depend on when the consumers take the words and on the system's ``idle``; they are
not modelled.
"""
from ...spec.neurotrainer import sequencer as spec

__all__ = ["nt_sequencer"]

_DEFAULTS = spec.PARAMS.defaults


def nt_sequencer(loads, runs, *, pes=_DEFAULTS["pes"], max_layers=_DEFAULTS["max_layers"],
                 queue_depth=_DEFAULTS["queue_depth"], **_):
    """The words every queue issues and each layer's config, for the host's loads and runs.

    Parameters
    ----------
    loads : sequence of dict
        ``target``, ``address``, ``data`` (``spec.load_layout``), in order.
    runs : sequence of int
        The ``i_start`` values (layer counts), one run after the other (the loads come first).
    pes, max_layers, queue_depth : int
        The block parameters.

    Returns
    -------
    dict
        ``queues``: per queue name the list of ``(run, layer, word)`` it issues, in order;
        ``configs``: per run the list of the layers' ``config`` dicts.
    """
    params = {"pes": pes, "max_layers": max_layers, "queue_depth": queue_depth}
    widths = spec.queue_widths(pes)
    names = spec.queue_names(pes)
    table_target = spec.layer_table_target(params)
    entry_bits = spec.entry_layout(params).size
    memories = [[0] * queue_depth for _ in names]
    table = [0] * max_layers
    for load in loads:
        if load["target"] == table_target:
            table[load["address"] % max_layers] = load["data"] & ((1 << entry_bits) - 1)
        elif load["target"] < len(names):
            queue = load["target"]
            memories[queue][load["address"] % queue_depth] = load["data"] & ((1 << widths[queue]) - 1)
    issued = {name: [] for name in names}
    configs = []
    for run, layers in enumerate(runs):
        pointers = [0] * len(names)
        configs.append([])
        for layer in range(layers):
            config, counts = spec.unpack_entry(params, table[layer])
            configs[-1].append(config)
            for queue, name in enumerate(names):
                for _ in range(counts[queue]):
                    issued[name].append((run, layer, memories[queue][pointers[queue]]))
                    pointers[queue] = (pointers[queue] + 1) % queue_depth
    return {"queues": issued, "configs": configs}
