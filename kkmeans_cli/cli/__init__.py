"""The ``kkmeans`` command line: parse options, read data, call the estimator, write outputs."""
from .commands import cli, main

__all__ = ["cli", "main"]
