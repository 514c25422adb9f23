"""Kernel k-means on a Dask cluster: the Nyström route, with the data read in chunks by the
workers and each iteration a map-reduce of per-chunk sums.

Nothing here is imported by ``import kkmeans_cli`` or ``kkmeans --help``; Dask is imported
only when a command or the estimator asks for a cluster (:func:`require_dask`). The modules:

``cluster``   start a ``LocalCluster`` on the loopback interface or connect to a scheduler
``readers``   DATA as row chunks that the workers read themselves (HDF5, Zarr, .npy, globs)
``chunks``    the per-chunk functions run on the workers (pure NumPy)
``fit``       the driver on the client: landmarks, transform, starts, iterations, predict

The design (Wang, Gittens & Mahoney, "Scalable kernel k-means clustering with Nyström
approximation: relative-error bounds", JMLR 2019, ran the same scheme on Spark): the client
holds the m landmarks, the m × m transform, the k × m centres and per-chunk summaries; each
Lloyd pass sends the centres to every chunk and gets back k × m partial sums, which the client
adds in chunk order, so the result does not depend on the number of workers or which worker
ran which chunk.
"""
from ..errors import KKMeansError

INSTALL_HINT = "pip install 'kkmeans-cli[dask]'"


def require_dask():
    """Import ``distributed`` (and ``dask``) or raise a one-line ``KKMeansError`` telling the
    user how to install the extra."""
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise KKMeansError(f"running on a Dask cluster needs Dask ({exc}); install it with "
                           f"{INSTALL_HINT}") from None
