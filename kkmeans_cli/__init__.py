"""kkmeans: kernel k-means clustering with a Cython/OpenMP engine.

``from kkmeans_cli import KernelKMeans`` gives the estimator; the heavy modules (NumPy, the
engine) load on first use so that ``kkmeans --help`` stays quick.
"""
from ._version import __version__

__all__ = ["KernelKMeans", "__version__"]


def __getattr__(name):
    if name == "KernelKMeans":
        from .model.estimator import KernelKMeans

        return KernelKMeans
    raise AttributeError(f"module 'kkmeans_cli' has no attribute {name!r}")
