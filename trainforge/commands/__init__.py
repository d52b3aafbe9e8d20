"""The family subcommands of ``trainforge``: one subpackage per family, each with a ``cli`` module that defines ``register(subparsers)``.

They are part of the tool package, so they may drive the hardware flows (emission, synthesis, place and route, simulation) as well as the models in ``trainforge.sim``."""
