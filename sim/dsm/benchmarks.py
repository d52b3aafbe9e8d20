"""Representative DeepSpatialMatrix workloads for ``make bench`` (timed there, never asserted here)."""
from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.executor import run_map
from trainforge.sim.dsm.explore import Optimizations, explore
from trainforge.sim.dsm.workload import BUILTINS, gnmt, resnet50, vgg16

#: Minibatches of the training sweep (Fig. 11 a-c).
SWEEP_MINIBATCHES = (256, 512, 1024, 2048)


def _vgg16_all():
    return explore(vgg16(512), default_architecture(), Optimizations(True, True, True, True))


def _resnet50_all():
    return explore(resnet50(1024), default_architecture(), Optimizations(True, True, True, False))


def _gnmt_pipelined():
    return explore(gnmt(256), default_architecture(), Optimizations(True, True, False, True))


def _explore_all_optimizations(item):
    network, n_mb = item
    return explore(BUILTINS[network](n_mb), default_architecture(), Optimizations(True, True, True, True)).cycles


def _all_workloads_all_optimizations():
    """Every built-in at every training-sweep minibatch with all four optimizations, on a local process pool."""
    items = [(network, n_mb) for network in BUILTINS for n_mb in SWEEP_MINIBATCHES]
    return run_map(_explore_all_optimizations, items, "local")


BENCHMARKS = {
    "dsm_explore_all_workloads_all_optimizations": (_all_workloads_all_optimizations, {
        "workloads": "VGG16, ResNet50, GNMT", "minibatches": list(SWEEP_MINIBATCHES),
        "system": "paper Fig. 10 default (64 chips)",
        "optimizations": "all four switched on (hybrid, memory reuse, DySM, timestep pipelining)",
        "passes": "FWD, BWD, UPD of every layer", "executor": "local process pool (one worker per CPU)",
        "target": "under 10 s on 2 cores; not asserted"}),
    "dsm_vgg16_training_all_opts": (_vgg16_all, {
        "workload": "VGG16", "minibatch": 512, "system": "paper Fig. 10 default",
        "optimizations": "asymmetric torus + hybrid, memory reuse, DySM, timestep pipelining",
        "passes": "FWD, BWD, UPD of every layer"}),
    "dsm_resnet50_training_dysm": (_resnet50_all, {
        "workload": "ResNet50", "minibatch": 1024, "system": "paper Fig. 10 default",
        "optimizations": "asymmetric torus + hybrid, memory reuse, DySM"}),
    "dsm_gnmt_timestep_pipelining": (_gnmt_pipelined, {
        "workload": "GNMT", "minibatch": 256, "system": "paper Fig. 10 default",
        "optimizations": "asymmetric torus + hybrid, memory reuse, timestep pipelining"}),
}
