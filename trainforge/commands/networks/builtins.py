"""Every model's built-in networks in the common format, and which models take a network.

A built-in is named ``MODEL/NAME`` (``hypar/AlexNet``, ``dsm/resnet50``); the
bare ``NAME`` also finds it when no other model has a network of that name
(names compare case-insensitively). Each model keeps its built-ins in its own
module; :data:`MODELS` lists them with the converter from the common format
to the model's own form.
"""
from trainforge.errors import ConfigError

__all__ = ["MODELS", "builtin_networks", "resolve", "models_taking"]


def _hypar():
    from trainforge.sim.hypar.builtins import BUILTIN_NETWORKS, DAG_NETWORKS
    from trainforge.sim.hypar.network import to_spec

    networks = {**BUILTIN_NETWORKS, **DAG_NETWORKS}
    return {name: (lambda build=build: to_spec(build())) for name, build in networks.items()}


def _dsm():
    from trainforge.sim.dsm.workload import BUILTINS, network_from_workload

    return {name: (lambda build=build: network_from_workload(build())) for name, build in BUILTINS.items()}


def _neurotrainer():
    from trainforge.sim.neurotrainer.networks import BUILTIN_NETWORKS

    return {name: (lambda network=network: network) for name, network in BUILTIN_NETWORKS.items()}


def _caterpillar():
    from trainforge.sim.caterpillar.arch import BUILTIN_NETWORKS

    return {name: (lambda network=network: network) for name, network in BUILTIN_NETWORKS.items()}


def _tensordash():
    from trainforge.sim.tensordash.training import DIGITS_CNN

    return {DIGITS_CNN.name: lambda: DIGITS_CNN}


def _to_hypar(network, source):
    from trainforge.sim.hypar.network import from_spec

    return from_spec(network, source)


def _to_dsm(network, source):
    from trainforge.sim.dsm.workload import workload_from_network

    return workload_from_network(network, source=source)


def _to_neurotrainer(network, source):
    from trainforge.sim.neurotrainer.networks import layers_from_network

    return layers_from_network(network, source)


def _to_caterpillar(network, source):
    from trainforge.sim.caterpillar.arch import widths_from_network

    return widths_from_network(network, source)


def _to_tensordash(network, source):
    from trainforge.sim.tensordash.training import layers_from_network

    return layers_from_network(network, source)


#: Model -> (its built-ins: name -> factory of a common-format network, converter to the model's form).
MODELS = {
    "hypar": (_hypar, _to_hypar),
    "dsm": (_dsm, _to_dsm),
    "neurotrainer": (_neurotrainer, _to_neurotrainer),
    "caterpillar": (_caterpillar, _to_caterpillar),
    "tensordash": (_tensordash, _to_tensordash),
}


def builtin_networks():
    """``{"MODEL/NAME": factory}`` of every built-in network, model by model."""
    result = {}
    for model, (builtins, _) in MODELS.items():
        for name, build in builtins().items():
            result[f"{model}/{name}"] = build
    return result


def resolve(name):
    """The built-in network called ``name`` (``MODEL/NAME``, or a ``NAME`` only one model has).

    Raises
    ------
    trainforge.errors.ConfigError
        For an unknown or ambiguous name; the message lists the built-ins.
    """
    networks = builtin_networks()
    wanted = name.lower()
    matches = [key for key in networks if key.lower() == wanted]
    if not matches:
        matches = [key for key in networks if key.split("/", 1)[1].lower() == wanted]
    if len(matches) == 1:
        return networks[matches[0]]()
    if matches:
        raise ConfigError(f"network {name!r} is ambiguous; say which: {', '.join(matches)}")
    raise ConfigError(f"unknown network {name!r}; built-ins: {', '.join(networks)}")


def models_taking(network, source=None):
    """``{model: None or the one-line reason it cannot take network}`` for every model.

    ``source`` (a file name) starts every reason; default ``network 'NAME'``.
    """
    result = {}
    for model, (_, convert) in MODELS.items():
        try:
            convert(network, source or f"network {network.name!r}")
            result[model] = None
        except ConfigError as error:
            result[model] = str(error)
    return result
