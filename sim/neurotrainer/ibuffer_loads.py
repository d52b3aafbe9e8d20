"""Host side of the RTL iBuffer (:class:`~trainforge.hw.neurotrainer.sequencer.NTSequencer`): what the host loads.

A program is a list of layers, each a dict ``config`` (the system's ``config`` for the layer) and
``words`` (per queue, in ``spec.queue_names`` order, the program words the layer issues from
that queue, as RTL payload integers). :func:`sequencer_loads` lays every queue's words out
one layer after the other from word 0 and writes one layer table entry per layer.
:func:`system_program` makes such a program of compiled layers.
"""
from ...errors import ProgramError
from ...spec.neurotrainer import sequencer as spec
from .integration_layers import layer_config, vault_programs
from .program import pmag_rtl_payload

__all__ = ["sequencer_loads", "system_program"]


def sequencer_loads(params, layers):
    """The ``i_load`` payloads (dicts) that put ``layers`` in the iBuffer, and the ``i_start`` value.

    Raises
    ------
    ProgramError
        More layers than ``max_layers``, or a queue's words beyond ``queue_depth``.
    """
    params = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    names = spec.queue_names(params["pes"])
    if len(layers) > params["max_layers"]:
        raise ProgramError(f"iBuffer layers = {len(layers)} exceeds the limit max_layers = {params['max_layers']}")
    loads, used = [], [0] * len(names)
    for number, layer in enumerate(layers):
        words = layer["words"]
        if len(words) != len(names):
            raise ProgramError(f"layer {number}: {len(words)} queues of words, the iBuffer has {len(names)}")
        for queue, queue_words in enumerate(words):
            if used[queue] + len(queue_words) > params["queue_depth"]:
                raise ProgramError(f"iBuffer queue {names[queue]} words = {used[queue] + len(queue_words)} exceeds "
                                   f"the limit queue_depth = {params['queue_depth']}")
            loads += [{"target": queue, "address": used[queue] + index, "data": int(word)}
                      for index, word in enumerate(queue_words)]
            used[queue] += len(queue_words)
        loads.append({"target": spec.layer_table_target(params), "address": number,
                      "data": spec.pack_entry(params, layer["config"], [len(w) for w in words])})
    return loads, len(layers)


def system_program(compiled_layers, pes):
    """The iBuffer program of compiled layers (``compile_for_system``): per layer its ``config`` and every queue's
    words (the PMAG programs of :func:`vault_programs`, the PEs' pass words)."""
    layout = spec.pmag_program_layout()
    program = []
    for layer in compiled_layers:
        reads, writes = vault_programs(layer, pes)
        passes = {job.pe: [int(word) for word in job.passes] for job in layer.pe_jobs}
        words = ([[pmag_rtl_payload(p, layout) for p in reads[v]] for v in range(pes + 1)]
                 + [[pmag_rtl_payload(p, layout) for p in writes[v]] for v in range(pes + 1)]
                 + [passes.get(pe, []) for pe in range(pes)])
        program.append({"config": layer_config(layer), "words": words})
    return program
