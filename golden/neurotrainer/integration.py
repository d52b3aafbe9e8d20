"""Golden model of :class:`trainforge.hw.neurotrainer.integration.NTSystem`: layers run back to back.

:func:`nt_system` runs a *sequence* of layers the way the system does between two resets:
every layer's vault images are loaded by the host, its programs run, and each PE keeps its
state from one layer to the next, in particular the MAC array's random generator (SR-LO's
LFSR and shift register), which steps once per MAC row of every pass. The PE arithmetic is
the PE golden model's (:func:`~trainforge.golden.neurotrainer.pe.nt_pe`, fed each PE's
passes and buffer blocks of all the layers at once). The data movement is given as data: a
layer is a dict made by the host side
(:func:`trainforge.sim.neurotrainer.integration_layers.prepare_layer` from a compiled layer):

- ``kind`` (str), ``bits`` (16 or 32);
- ``vaults``: the images the host loads, by system vault number (0 = the common vault,
  ``1 + i`` = PE ``i``'s vault), int64 arrays of 32-bit words;
- ``jobs``: per PE job a dict with ``pe``, ``passes`` (program words), ``blocks1`` and
  ``blocks2`` (the buffer blocks the PE receives), ``out_vault`` (system number),
  ``out_address`` and ``out_pad`` (the write program's request stream, without END-MARK), and optionally
  ``out_programs`` (the data and pad requests of each write program, in order: where the END requests fall);
- optionally ``out_rows``: the result rows after which the PE's row unpacker sends an END-MARK (the ``config``
  port's ``out_rows``; with it each job needs ``out_programs``). Without it every write program is taken to hold
  exactly its END-MARK's words.

The results reach the vault as the vault controller joins them with the write requests
(:func:`joined_writes`). A legal layer has ``out_rows * lanes`` data requests per write program; one with another
``out_rows`` writes END-MARK words into the vault and drops result words, as the hardware does, as long as the
requests take exactly the words and END-MARKs the PE sends (else :class:`ProgramError`: the layer would wait for a
word, or leave words behind for the next layer, which this model does not follow). A merged layer (results to the
common vault over the bus, ``out_vault`` 0) must be legal.

Results are bit-exact; cycles are not modelled (the system's timing is the sum of its blocks'
and depends on backpressure).
"""
import numpy as np

from ...errors import ProgramError
from ...spec.neurotrainer import integration as spec
from ...spec.neurotrainer.pe_program import decode_pe_program
from ...spec.neurotrainer.pmag import end_mark
from .pe import nt_pe, pass_shape

__all__ = ["emitted_rows", "joined_writes", "nt_system"]


def emitted_rows(passes):
    """Result rows a PE sends on its output stream for the program words ``passes``."""
    rows = 0
    for word in passes:
        fields = decode_pe_program(word)
        if fields["emit"]:
            rows += pass_shape(fields)[2]
    return rows


def joined_writes(words, pad, programs, block, wide):
    """The values a vault controller writes for one PE's write programs (``hw/neurotrainer/vault_controller.py``).

    The PE's row unpacker sends ``words`` with an END-MARK word (data ``end_mark(wide)``) after every ``block``
    of them. The write PMAG's requests, program by program: a data request takes the next word, whatever it
    is, and writes its data; a pad request writes 0 and takes none; each program's END request takes the next
    word and writes nothing.

    Parameters
    ----------
    words : array of int
        The PE's result words, in order.
    pad : array of bool
        Per data or pad request, in order (the END requests left out).
    programs : sequence of int
        Requests per write program (data and pad), in order; they sum to ``len(pad)``.
    block : int
        Words per END-MARK (``out_rows * lanes``).
    wide : bool
        32-bit layer (the END-MARK's data 0xFFFFFFFF, else 0xFFFF).

    Returns
    -------
    values : array of int64
        The word each request writes.
    aligned : bool
        Every data request took a result word and every END request an END-MARK.

    Raises
    ------
    ProgramError
        A request would wait for a word the PE never sends, or words would be left for the next layer.
    """
    sent = []
    for start in range(0, len(words), block):
        sent += [(int(word), False) for word in words[start:start + block]]
        if start + block <= len(words):
            sent.append((end_mark(wide), True))
    values, taken, request, aligned = np.zeros(len(pad), dtype=np.int64), 0, 0, True
    for length in programs:
        for index in range(request, request + length):
            if pad[index]:
                continue
            if taken == len(sent):
                raise ProgramError(f"a write request waits for a word: {len(words)} words, END-MARK every {block}")
            values[index], end = sent[taken]
            aligned &= not end
            taken += 1
        request += length
        if taken == len(sent):
            raise ProgramError(f"an END request waits for a word: {len(words)} words, END-MARK every {block}")
        aligned &= sent[taken][1]
        taken += 1
    if taken != len(sent) or request != len(pad):
        raise ProgramError(f"{len(sent) - taken} words left and {len(pad) - request} requests outside the "
                           f"programs: {len(words)} words, END-MARK every {block}")
    return values, aligned


def nt_system(layers, **params):
    """The layers run one after the other from a reset, as the system runs them.

    Parameters
    ----------
    layers : sequence of dict
        The prepared layers (see the module docstring).
    **params
        The NTSystem parameters (:data:`trainforge.spec.neurotrainer.integration.PARAMS`; defaults
        from there, other keys ignored).

    Returns
    -------
    list of dict
        Per layer: ``vaults`` (the images the host loads, by system vault number) and ``final``
        (the vault images after the layer, 32-bit words as int64).

    Raises
    ------
    ProgramError
        A PE's results do not fill its write program's requests (without ``out_rows``), or do not meet them word
        for word with the END-MARKs (:func:`joined_writes`), or a merged layer's programs are not one END-MARK's
        words each.
    """
    system = spec.PARAMS.resolve(**{name: value for name, value in params.items() if name in spec.PARAMS.names})
    pes = system["pes"]
    pe_params = {key: system[key] for key in spec.PE_KEYS}
    per_pe = [{"passes": [], "blocks1": [], "blocks2": [], "rows": []} for _ in range(pes)]
    for layer in layers:
        for job in layer["jobs"]:
            state = per_pe[job["pe"]]
            state["passes"] += list(job["passes"])
            state["blocks1"] += list(job["blocks1"])
            state["blocks2"] += list(job["blocks2"])
            state["rows"].append(emitted_rows(job["passes"]))
    results = [nt_pe(state["passes"], state["blocks1"], state["blocks2"], **pe_params)["results"].astype(np.int64)
               for state in per_pe]
    outcome, first = [], [0] * pes
    for number, layer in enumerate(layers):
        final = {vault: words.copy() for vault, words in layer["vaults"].items()}
        for job in layer["jobs"]:
            pe = job["pe"]
            rows = per_pe[pe]["rows"][number]
            # A result row is ``lanes`` words in both modes (16-bit: two elements per word, packed as the PE
            # gives them: spec/neurotrainer/packing.py).
            words = results[pe][first[pe]:first[pe] + rows].reshape(-1)
            first[pe] += rows
            address, pad = np.asarray(job["out_address"]), np.asarray(job["out_pad"], dtype=bool)
            if "out_rows" in layer:
                values, aligned = joined_writes(words, pad, job["out_programs"], layer["out_rows"] * system["lanes"],
                                                layer["bits"] == 32)
                if not aligned and job["out_vault"] == 0:
                    raise ProgramError(f"{layer['kind']}: PE {pe}'s merged write programs do not hold "
                                       f"{layer['out_rows']} rows each (the bus's merge of those is not modelled)")
            else:
                values = np.zeros(len(address), dtype=np.int64)
                if np.count_nonzero(~pad) != len(words):
                    raise ProgramError(f"{layer['kind']}: PE {pe} wrote {len(words)} words for "
                                       f"{np.count_nonzero(~pad)} requests")
                values[~pad] = words
            final[job["out_vault"]][address] = values
        outcome.append({"vaults": layer["vaults"],
                        "final": {vault: words & 0xFFFFFFFF for vault, words in final.items()}})
    return outcome
