"""Thread counts for the OpenMP engine and BLAS, kept from oversubscribing the cores."""
import contextlib
import os
import sys
import threading

from . import _openmp


def effective_n_threads(n_threads=None):
    """The number of threads to use: ``n_threads`` if given, else every core."""
    if not _openmp.openmp_enabled():
        return 1
    if n_threads is None:
        return max(1, _openmp.max_threads() or os.cpu_count() or 1)
    if int(n_threads) < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    return int(n_threads)


_controller = None
_controller_sees_scipy = False
_pools = {}
_pools_lock = threading.Lock()


def thread_pool(n_threads):
    """A pool of ``n_threads`` Python threads kept for the process (idle threads wait on a
    lock, they do not spin): starting threads per block costs more than a small block."""
    with _pools_lock:
        if n_threads not in _pools:
            from concurrent.futures import ThreadPoolExecutor

            _pools[n_threads] = ThreadPoolExecutor(n_threads, thread_name_prefix="kkmeans")
        return _pools[n_threads]


@contextlib.contextmanager
def blas_threads(n_threads):
    """Limit BLAS to ``n_threads`` threads inside the block (threadpoolctl).

    The controller is created once: scanning the loaded libraries costs about half a
    millisecond, which adds up over the thousands of small blocks of a blocked kernel. SciPy
    bundles its own OpenBLAS (``scipy.linalg.cython_blas``, used by the engine's per-chunk
    products): when it has been loaded the controller covers it, and it is made again when
    SciPy's BLAS appears after it. Nothing here loads SciPy (``kkmeans predict`` of an exact
    model never does).
    """
    global _controller, _controller_sees_scipy
    sees_scipy = "scipy.linalg.cython_blas" in sys.modules
    if _controller is None or (sees_scipy and not _controller_sees_scipy):
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _controller_sees_scipy = sees_scipy
    with _controller.limit(limits=n_threads, user_api="blas"):
        yield
