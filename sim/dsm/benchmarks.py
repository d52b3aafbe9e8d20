"""Representative DeepSpatialMatrix workloads for ``make bench`` (timed there, never asserted here)."""
from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.explore import Optimizations, explore
from trainforge.sim.dsm.workload import gnmt, resnet50, vgg16


def _vgg16_all():
    return explore(vgg16(512), default_architecture(), Optimizations(True, True, True, True))


def _resnet50_all():
    return explore(resnet50(1024), default_architecture(), Optimizations(True, True, True, False))


def _gnmt_pipelined():
    return explore(gnmt(256), default_architecture(), Optimizations(True, True, False, True))


BENCHMARKS = {
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
