"""Whether the engine was built with OpenMP, and how many threads it will use."""

cdef extern from "_omp_compat.h":
    int KKMEANS_OPENMP
    int omp_get_max_threads() nogil


def openmp_enabled():
    """True when the extensions were compiled with OpenMP."""
    return bool(KKMEANS_OPENMP)


def max_threads():
    """OpenMP's default thread count (1 for a serial build)."""
    return omp_get_max_threads()
