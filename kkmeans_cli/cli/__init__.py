"""The ``kkmeans`` command line: parse options, read data, call the estimator, write outputs.

``app.py`` holds the command group and the error-to-exit-code mapping, ``options.py`` what the
commands share, and ``fit.py``, ``predict.py``, ``sweep.py``, ``info.py`` one command each.
"""
from .app import cli, main

__all__ = ["cli", "main"]
