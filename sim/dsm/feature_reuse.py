"""ResNet50's inference gain from feature reuse alone, and the counterfactuals that explain its gap.

The paper (Section IV-B, Fig. 11 d-f) says ResNet50 "gains 2x - 3x speedup from this
optimization" (feature reuse) on one chip at batches 1 to 16. Ours is 1.38x at batch 1.
:func:`feature_reuse_study` times, on the one-chip system of the inference sweep:

* ``dsm``: no optimization;
* ``feature_reuse``: memory reuse of features only (no weight preloading), as modelled;
* ``weights_free``: both of the above with every kernel already on chip at no capacity
  cost, to test whether the weight stream is what bounds the gain;
* ``held_shortcuts_not_written``: feature reuse where a block's output is not written to
  memory when every layer that reads it holds it in the scratchpads (the next block's
  first convolution reads it as its resident input and the residual add three layers on
  keeps it as a resident shortcut), and a projection's output is not written when its
  one reader, the add, holds it;
* ``both``: the last two together.

Run ``python -m trainforge.sim.dsm.feature_reuse`` for the JSON.
"""
import json

from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.explore import Optimizations, _Explorer
from trainforge.sim.dsm.workload import resnet50

#: Batches of the inference sweep (Fig. 11 d-f).
BATCHES = (1, 2, 4, 8, 16)


def _cycles(workload, arch, memory_reuse, weights_free=False, write_held_shortcuts=True):
    preloaded = frozenset(layer.name for layer in workload.layers) if weights_free else frozenset()
    explorer = _Explorer(workload, arch, Optimizations(memory_reuse=memory_reuse), False, preloaded=preloaded,
                         write_held_shortcuts=write_held_shortcuts)
    cycles, path = explorer.run()
    written = sum(records["FWD"]["transfers"]["WriteOut"] for _, _, records in path) * arch.frequency
    return cycles, written


def feature_reuse_study(batches=BATCHES):
    """Per batch: cycles of each configuration, its gain over DSM, and the cycles spent writing outputs.

    Returns
    -------
    dict
        ``{"points": [{"batch", "configuration", "cycles", "gain", "write_cycles"}...]}``;
        ``gain`` is DSM's cycles over the configuration's at the same batch (for
        ``weights_free``: over DSM with free weights too).
    """
    arch = default_architecture().with_changes(**{"system.chips_x": 1, "system.chips_y": 1})
    points = []
    for batch in batches:
        workload = resnet50(batch)
        dsm, dsm_written = _cycles(workload, arch, False)
        dsm_free, _ = _cycles(workload, arch, False, weights_free=True)
        rows = {"dsm": (dsm, dsm_written, dsm),
                "feature_reuse": _cycles(workload, arch, True) + (dsm,),
                "weights_free": _cycles(workload, arch, True, weights_free=True) + (dsm_free,),
                "held_shortcuts_not_written": _cycles(workload, arch, True, write_held_shortcuts=False) + (dsm,),
                "both": _cycles(workload, arch, True, weights_free=True, write_held_shortcuts=False) + (dsm_free,)}
        for name, (cycles, written, reference) in rows.items():
            points.append({"batch": batch, "configuration": name, "cycles": cycles, "gain": reference / cycles,
                           "write_cycles": written})
    return {"network": "resnet50", "system": "one chip (inference sweep)", "points": points}


if __name__ == "__main__":
    print(json.dumps(feature_reuse_study(), indent=1))
