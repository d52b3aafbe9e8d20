"""trainforge: RTL generators, golden models and verification for DNN training accelerators."""

__version__ = "0.1.0"
