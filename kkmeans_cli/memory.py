"""Memory planning: know the big allocations before making them, refuse past the limit.

Exact kernel k-means holds the n×n kernel matrix (n² × 8 bytes in float64, × 4 in float32);
40,000 points are 12.8 GB in float64. Before anything large is allocated, :func:`plan` adds up
the big arrays a command will hold at once and :func:`check` compares the total with the limit
(``--memory-limit``; by default 80% of the available RAM), raising
:class:`~kkmeans_cli.errors.MemoryPlanError` with the need, the limit and the ways out
(``--dtype float32``, ``--approx nystroem``, a smaller sample) — instead of dying from the
out-of-memory killer half-way.

The planned arrays (bytes; b = 8 for float64, 4 for float32):

===========================  ==============================================================
kernel matrix                n² · b (exact; not counted when it is passed in already)
kernel blocks                one float64 Gram block of at most 64 MB (:data:`BLOCK_BYTES`)
outer sums                   k · n · 8 (F), and as much again for the update temporaries
refinement                   2 · k · n · 8 (Hartigan's kept sums, the test of its candidates)
k-means++ rows               3 · (2 + ⌊ln k⌋) · n · 8 (candidate rows, distances, potentials)
per-point arrays             n · 40 (labels, distances, weights, diagonal)
Nyström features             the explicit-feature engine (k-means objective, no Hartigan):
                             n · s · 4 (Φ, float32, rank s) and n · 16 (‖φ‖², K_ii); else
                             n · m · 8 (Φ, float64); both plus m² · 8 · 4 (K_mm, eigenvectors,
                             T)
feature engine               per point 36 bytes (labels, distances, Hamerly's two bounds,
                             weights) and the labels of the completed restarts; no outer sums,
                             no k-means++ rows (its starts are drawn on a sample)
silhouette                   exact from K: k · n · 8; sampled: s² · 8 (K of the sample)
predict blocks               one block of kernel rows, at most 64 MB
graph kernel (knn)           no kernel matrix: the neighbour lists, the symmetrized sparse
                             graph and the fit's or sweep's work on it (:func:`graph_plan`)
a graph given as DATA        the checks' copies of its entries, the checked graph and the
                             fit's or sweep's work on it (:func:`given_graph_plan`)
===========================  ==============================================================

The data X itself is already in memory when the plan is made and is not counted.
"""
import math
import numbers
import os
import re
from dataclasses import dataclass, field

from contextvars import ContextVar

from ._options import MIXTURE_COMPILED_MAX_DIM, SCATTER_BLOCK_ROWS, WHITEN_AUTO_MAX_DIM
from .errors import MemoryPlanError

#: How :func:`check`'s message names what would help: 'python', as the estimator's and
#: ``sweep``'s parameters (``n_neighbors=177``, ``memory_limit``), or 'cli', as the
#: command line's options (``--n-neighbors 177``, ``--memory-limit``), which ``kkmeans``
#: sets for its run.
OPTION_NAMES = ContextVar("kkmeans_option_names", default="python")


def named(text):
    """``text``, whose settings are worded as the command line's options (``--n-neighbors
    177``, ``--dtype float32``, ``--memory-limit``, ``--k 2..5``), worded for
    ``OPTION_NAMES``: as they are for 'cli', else as parameters (``n_neighbors=177``,
    ``dtype='float32'``, ``memory_limit``, ``ks='2..5'``)."""
    if OPTION_NAMES.get() == "cli":
        return text

    def parameter(match):
        name = {"k": "ks"}.get(match.group(1), match.group(1).replace("-", "_"))
        value = match.group(2)
        if value is None:
            return name
        return f"{name}={value}" if re.fullmatch(r"\d+(\.\d+)?", value) else \
            f"{name}={value!r}"

    text = re.sub(r" in --k\b", "", text)        # 'ks up to 5 in --k' → 'ks up to 5'
    return re.sub(r"--([a-z][a-z-]*)(?: ([^\s,;()]+))?", parameter, text)

#: Fraction of the available RAM used when no limit is given.
DEFAULT_FRACTION = 0.8
#: Bytes of float64 work space for one block of kernel rows (the Gram blocks of
#: ``kernels/functions.py``, the blocks of ``measures/metrics.py``; see :func:`row_blocks`).
BLOCK_BYTES = 64 * 2**20
#: The explicit-feature engine's ε of the default rank ⌈k/ε⌉, rows per kernel block and per
#: part shared by the threads, and the restarts it completes on all the data: defined here,
#: where NumPy is not imported (``kkmeans --help``), and read by ``engine/features.py`` and
#: ``engine/restarts.py``.
FEATURE_EPSILON = 0.2
FEATURE_BLOCK_ROWS = 2048
FEATURE_PART_ROWS = 4 * 2048
RESTARTS_COMPLETED = 3
_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20,
          "MIB": 2**20, "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40,
          "TIB": 2**40}


def row_blocks(n_rows, n_cols, block_bytes=None):
    """(i0, i1) of blocks of rows of an n_rows × n_cols float64 array, each within
    ``block_bytes`` (:data:`BLOCK_BYTES`, read at the call, by default; at least one row)."""
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    step = max(1, min(n_rows, block_bytes // (8 * max(n_cols, 1))))
    for i0 in range(0, n_rows, step):
        yield i0, min(i0 + step, n_rows)


@dataclass
class MemoryPlan:
    """The big allocations of one command.

    Attributes
    ----------
    items : dict
        What → bytes, in the order they were planned.
    what : str
        The work planned, for messages (e.g. "the exact fit of 40,000 points").
    alternatives : dict
        Option → bytes the same work would need with that option (for the message).
    smaller : str
        The last way out named, the work made smaller ("a smaller sample").
    """

    items: dict = field(default_factory=dict)
    what: str = "this run"
    alternatives: dict = field(default_factory=dict)
    max_n: int = None
    smaller: str = "a smaller sample"

    @property
    def total(self):
        return int(sum(self.items.values()))

    def describe(self):
        """``kernel matrix 12.8 GB + outer sums 2.6 MB + ...``, largest first."""
        parts = sorted(self.items.items(), key=lambda kv: -kv[1])
        return " + ".join(f"{name} {format_bytes(b)}" for name, b in parts if b > 0)


def format_bytes(n):
    """Bytes for people: ``12 GiB``, ``512 MiB``, ``4 KiB`` — binary units, as
    ``--memory-limit`` reads them (``100M`` is 100 MiB and is echoed so)."""
    n = float(n)
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


def format_need(need, limit):
    """(need, limit) for a refusal, need > limit, so that the need printed visibly exceeds
    the limit: :func:`format_bytes` of each when they read so (``12 GiB`` and ``8 GiB``),
    else both in the limit's unit with as many decimals as tell them apart (``100.004 MiB``
    and ``100 MiB``; the limit's trailing zeros dropped), or in bytes."""
    shown = format_bytes(need), format_bytes(limit)

    def value(text):
        number, unit = text.split()
        sizes = {"TiB": 2**40, "GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}
        return float(number) * sizes[unit]

    if value(shown[0]) > value(shown[1]):
        return shown
    unit, size = next(((u, s) for u, s in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                                            ("KiB", 2**10)) if limit >= s), ("B", 1))
    for decimals in range(1, 7) if size > 1 else ():
        a, b = f"{need / size:.{decimals}f}", f"{limit / size:.{decimals}f}"
        if float(a) > float(b):
            a, b = (t.rstrip("0").rstrip(".") for t in (a, b))
            return f"{a} {unit}", f"{b} {unit}"
    return f"{int(need):,} B", f"{int(limit):,} B"


def parse_size(text):
    """Parse a memory size: ``8G``, ``500M``, ``1.5GB``, ``64KiB``, or plain bytes.

    Units are binary (K = 1024 bytes, M = 1024², G = 1024³, T = 1024⁴), with or without ``B``
    or ``iB``, in any case. Returns the bytes as an int ≥ 1; raises ``ValueError`` otherwise.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a memory size")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not m or m.group(2).upper() not in _UNITS:
            raise ValueError(f"{text!r} is not a memory size (use e.g. 8G, 500M, 1.5GB or a "
                             f"number of bytes)")
        value, unit = float(m.group(1)), m.group(2).upper()
    size = value * _UNITS[unit]
    if not math.isfinite(size) or size < 1:
        raise ValueError(f"{text!r} is not a positive memory size")
    return int(size)


def available_memory():
    """Bytes of RAM available to new allocations: ``MemAvailable`` of /proc/meminfo, else the
    free physical pages (``os.sysconf``), else None when neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def default_limit():
    """80% of :func:`available_memory` (None when that is unknown: no check)."""
    avail = available_memory()
    return None if avail is None else int(DEFAULT_FRACTION * avail)


def resolve_limit(limit):
    """``limit`` in bytes (a size string is parsed); the default limit for None."""
    if limit is None:
        return default_limit()
    if isinstance(limit, str):
        return parse_size(limit)
    if isinstance(limit, bool) or not isinstance(limit, numbers.Real) or not limit >= 1 \
            or not math.isfinite(limit):
        raise ValueError(f"memory_limit must be a positive number of bytes, a size such as "
                         f"'8G', or None; got {limit!r}")
    return int(limit)


def _itemsize(dtype):
    name = getattr(dtype, "__name__", None) or str(dtype)
    return 4 if "32" in name else 8


def _dtype_name(dtype):
    return "float32" if _itemsize(dtype) == 4 else "float64"


def default_landmarks(n, k):
    """The default number of Nyström landmarks, m = min(n, max(300, 20·k), 1000).

    The error of the Nyström approximation depends on how fast the kernel's spectrum decays,
    i.e. on the shape of the data, not on n: 20 landmarks per cluster, 300 at least, measured
    to reproduce the exact clustering (ARI ≥ 0.95) on moons, circles and blobs; at most
    1,000, so that Φ (n × m float64) stays within 8 kB per point and one Lloyd pass within
    O(n·m·k). All n points when n is smaller.
    """
    return int(min(n, max(300, 20 * int(k)), 1000)) if n >= 1 else 0


def plan(n, k, dtype="float64", *, approx="none", n_landmarks=None, kernel_given=False,
         silhouette=None, sample_size=10_000, max_exact=20_000, n_threads=1, what=None,
         storage="matrix", offer_blocked=True, silhouette_after=False, rank=None,
         feature_engine=False):
    """The big allocations of a fit (and of the measures asked for) of n points, k clusters.

    Parameters
    ----------
    n, k : int
    dtype : str or numpy dtype
        Storage of the kernel matrix (float64 or float32).
    approx : {'none', 'nystroem'}
    n_landmarks : int, optional
        m for Nyström (default :func:`default_landmarks`).
    kernel_given : bool
        The kernel matrix exists already (not counted again).
    silhouette : {None, 'from-kernel', 'blocks'}
        Also plan the silhouette: 'from-kernel' reads the kernel matrix held in memory (sweep),
        'blocks' recomputes kernel rows in blocks (fit --silhouette); above ``max_exact`` points
        both use a sample of ``sample_size`` points (an s × s matrix).
    n_threads : int
        Per-thread buffers.
    storage : {'matrix', 'blocked'}
        'blocked': no kernel matrix, kernel rows recomputed in blocks (``BlockedKernel``).
    offer_blocked : bool
        Whether ``--storage blocked`` is a way out to name (not for sweep, which refuses it).
    silhouette_after : bool
        The silhouette is computed after the fit, from kernel rows recomputed in blocks, once
        the fit's memory is freed: the plan is the larger of the two, not their sum.
    rank, feature_engine : int or None, bool
        ``feature_engine``: a Nyström fit of these settings (this one with
        ``approx='nystroem'``, or the one named as a way out of an exact plan) runs on the
        explicit-feature engine (``engine/features.py``: the k-means objective without
        Hartigan, not a sweep), whose float32 features have ``rank`` columns (default
        ``features.default_rank``: ⌈k/0.2⌉, at most m).

    Returns
    -------
    MemoryPlan
    """
    n, k = int(n), int(k)
    if silhouette and silhouette_after:
        common = dict(dtype=dtype, approx=approx, n_landmarks=n_landmarks,
                      kernel_given=kernel_given, sample_size=sample_size, max_exact=max_exact,
                      n_threads=n_threads, offer_blocked=offer_blocked, rank=rank,
                      feature_engine=feature_engine)
        fit_plan = plan(n, k, storage=storage, what=what, **common)
        alone = plan(n, k, storage="blocked", silhouette="blocks", **common).items
        score = alone.get("silhouette sample", alone.get("silhouette", 0))
        if score > fit_plan.total:
            fit_plan.items["silhouette sample after the fit"] = score - fit_plan.total
        for option in list(fit_plan.alternatives):
            other = {"--dtype float32": dict(storage=storage, dtype="float32"),
                     "--approx nystroem": dict(approx="nystroem"),
                     "--storage blocked": dict(storage="blocked")}[option]
            fit_plan.alternatives[option] = plan(
                n, k, silhouette=silhouette, silhouette_after=True,
                **dict(common, **other)).total
        return fit_plan
    b = _itemsize(dtype)
    items = {}
    if approx == "nystroem" and feature_engine:
        m = min(n, int(n_landmarks) if n_landmarks else default_landmarks(n, k))
        s = min(m, int(rank) if rank else math.ceil(k / FEATURE_EPSILON))
        items["Nyström features"] = n * s * 4 + n * 16
        items["landmark kernel"] = 4 * m * m * 8
        # per thread at work (one per part of FEATURE_PART_ROWS rows at most) one block of
        # FEATURE_BLOCK_ROWS kernel rows against the landmarks, with the temporaries of the
        # kernel function and of the product
        threads = max(1, min(int(n_threads or 1), -(-n // FEATURE_PART_ROWS)))
        items["kernel blocks"] = threads * min(n, FEATURE_BLOCK_ROWS) * m * 8 * 3
        items["per-point arrays"] = 36 * n + RESTARTS_COMPLETED * 4 * n
        what = what or (f"the Nyström fit of {n:,} points with {m:,} landmarks "
                        f"(rank {s})")
    elif approx == "nystroem":
        m = int(n_landmarks) if n_landmarks else default_landmarks(n, k)
        items["Nyström features"] = n * m * 8
        items["landmark kernel"] = 4 * m * m * 8
        items["kernel blocks"] = min(2 * BLOCK_BYTES, 2 * n * m * 8)
        what = what or f"the Nyström fit of {n:,} points with {m:,} landmarks"
    elif storage == "blocked":
        items["kernel blocks"] = min(2 * BLOCK_BYTES, 2 * n * n * 8)
        what = what or f"the blocked exact fit of {n:,} points"
    else:
        if not kernel_given:
            items["kernel matrix"] = n * n * b
        items["kernel blocks"] = min(BLOCK_BYTES, n * n * 8)
        what = what or f"the exact fit of {n:,} points ({_dtype_name(dtype)} kernel matrix)"
    engine = approx == "nystroem" and feature_engine
    if not engine:  # the feature engine draws its starts on a sample and keeps no k×n sums
        items["outer sums"] = 2 * k * n * 8
        # Hartigan's refinement: the sums it keeps for its candidates and the k×n test of
        # which points its bounds leave (engine/hartigan.py)
        items["refinement"] = 2 * k * n * 8
        items["k-means++ rows"] = 3 * (2 + int(math.log(max(k, 1)))) * n * 8
        items["per-point arrays"] = 40 * n
    if (approx == "nystroem" and not engine) or storage == "blocked":
        items["Elkan bounds"] = 10 * k * n  # lower bounds (float64), marks and flags
    if silhouette:
        if n > max_exact:
            s = min(n, sample_size)
            items["silhouette sample"] = s * s * 8 + 3 * s * k * 8
        elif silhouette == "blocks" or approx == "nystroem":
            items["silhouette"] = min(BLOCK_BYTES, n * n * 8) + (n_threads + 3) * n * k * 8
        else:
            items["silhouette"] = (n_threads + 3) * n * k * 8
    result = MemoryPlan(items=items, what=what)
    if approx != "nystroem" and storage != "blocked":
        rest = result.total - items.get("kernel matrix", 0)
        if b == 8 and not kernel_given:
            result.alternatives["--dtype float32"] = rest + n * n * 4
        nys = plan(n, k, approx="nystroem", silhouette=silhouette, sample_size=sample_size,
                   max_exact=max_exact, n_threads=n_threads, feature_engine=feature_engine)
        result.alternatives["--approx nystroem"] = nys.total
        if storage != "blocked" and not kernel_given and offer_blocked:
            blocked = plan(n, k, storage="blocked", silhouette=silhouette,
                           sample_size=sample_size, max_exact=max_exact, n_threads=n_threads)
            result.alternatives["--storage blocked"] = blocked.total
    return result


#: The graph kernel's search and starts, as ``kernels/graph.py`` and ``engine/graph_starts.py``
#: hold them (restated here, where NumPy is not imported; ``tests/test_large_data.py`` checks
#: they agree): the dimensions of the k-d tree, the distance block of the exact search above
#: them, the nodes up to which the default starts run on the graph itself, the multiples of k
#: they split into (2k, and the others while at most 100 pieces: the most eigenvectors they
#: take), and when the eigenvectors come from a dense ``eigh`` (up to 500 nodes, or up to
#: 2,000 for r ≥ n/7 vectors).
GRAPH_TREE_MAX_DIM = 15
GRAPH_SEARCH_BLOCK_BYTES = 64 << 20
GRAPH_DIRECT_MAX = 5000
GRAPH_OVERSEGMENT = (2, 3, 4, 6, 10)
GRAPH_PIECES_MAX = 100
GRAPH_DENSE_MAX = 500
GRAPH_DENSE_FRACTION = 7
GRAPH_DENSE_FRACTION_MAX = 2000
#: The approximate neighbour search's fixed cost in a fresh process: numba compiles
#: pynndescent (measured 400–410 MiB of growth before its per-edge arrays).
GRAPH_APPROX_FIXED_BYTES = 420 << 20
#: The choice graph of the default starts (``kernels.graph.choice_graph``): the search lists
#: 1 + ⌈1.5 (n_neighbors − 1)⌉ neighbours, and each node's 5 nearest are its backbone.
GRAPH_CHOICE_FACTOR = 1.5
GRAPH_BACKBONE = 5


def graph_plan(n, n_neighbors, d, k, *, weighting="connectivity", start="auto",
               eigengap=False, sweep_ks=0, refit=False, search=None, what=None,
               whiten=False):
    """The peak memory of building the k-nearest-neighbour graph of n points (d dimensions,
    ``n_neighbors`` counting the point, at most n) and fitting k clusters on it (the largest k
    of a sweep), as a :class:`MemoryPlan` whose items add up to the peak.

    With e = n · n_neighbors listed edges (bytes; i = 4 for int32 indices, 8 from 2³⁰ edges:
    the sum B + Bᵀ has room for 2e):

    ===========================  ==========================================================
    neighbour lists              16 e: the distances (float64) and indices (int64) of the
                                 search; 16 l for the l ≈ 1.5 e longer lists of a
                                 connectivity graph of at most 15 columns (the choice graph's)
    choice graph                 the default starts (``start='auto'``) on a connectivity
                                 graph of at most 15 columns: built row by row from the
                                 lists, each node's 6 nearest and their transpose and the
                                 offsets, (8 + i) 7n, and a byte per listed edge, l; and
                                 the graph itself, (8 + i)(l + 12 n), held through the fit
    graph building               8 e for the edge weights (the lists sorted in place),
                                 (8 + i) e for the transpose, (8 + i) 2e for the sum
                                 B + Bᵀ at its bound (the graph the fit holds)
    search blocks                exact search above 15 dimensions (scikit-learn's chunked
                                 search): 41 e for its lists and the copies of their sort
                                 (measured 40.8 e at 10⁶ points), and two blocks of the
                                 chosen neighbours' coordinates, 8 e d up to 64 MB each
                                 (measured 16 e + 129 MB at 50,000 × 16 and 200,000 ×
                                 64); what they need beyond
                                 the graph building (they come before it). The
                                 approximate search (``search='approximate'``,
                                 pynndescent): 420 MiB for numba's
                                 compilation and pynndescent's state in a fresh process
                                 and 80 e for its heaps, lists and their float64 copies
                                 (measured 410 MiB + 68 e at 20,000–120,000 points), or
                                 the exact search's blocks when larger (it falls back to them
                                 on few distinct points)
    points and nodes             n (24 d + 100), 8 n d + 8 k d² more with ``whiten`` (the
                                 whitened points, the clusters' scatter matrices): the
                                 copies of the points, the k-d tree, the orders, counts
                                 and components
    first fit kept               ``whiten='auto'`` on 2 to ``WHITEN_AUTO_MAX_DIM`` columns:
                                 the first fit's graph, (8 + i) 2e, and its per-point
                                 arrays, 40 n, held while the refit is built and through
                                 the Gaussian steps (the split test may return it)
    Gaussian step                the same data: the larger of its two steps, one after the
                                 other. The classification: its labels and the order of
                                 the rows (40 n), the ``SCATTER_BLOCK_ROWS`` rows it takes
                                 at a time (a block, or the pieces of one on its threads:
                                 their costs, scaled and centred copies, one product and
                                 two sums, 8 (k + 3d + 2) a row) and the clusters' scatters
                                 and maps (24 k d²). The mixture: its labels (16 n), a
                                 block's coordinates, costs, posteriors and weighted
                                 copies (8 (3k + 5d + 4) a row) and the components'
                                 moments, covariances and maps (48 k d²); in up to
                                 ``MIXTURE_COMPILED_MAX_DIM`` columns, summed in C, a
                                 block's coordinates (8 (3d + 1) a row) and the moments
                                 of its four pieces beside them (144 k d²); the split
                                 test after it reads at most max(1,500, 100 k) rows
                                 (a copy of fewer than the points)
    fit                          what the fit needs beyond the building, the graph held:
                                 four sparse matrices of up to 2e − n entries when the
                                 eigenvectors of the whole graph are needed (the normalized
                                 affinity D^-½AD^-½ and its temporaries: up to 5,000 nodes,
                                 ``init='spectral'``, the eigengap), else two (the multilevel
                                 coarsening's contractions); the Lanczos vectors
                                 (max(2r + 1, 20) + r of n or 5,000 nodes), or a dense
                                 eigh's 6 n² (up to 500 nodes, or 2,000 for r ≥ n/7:
                                 measured 5.3 n²), and the k-means of
                                 the spectral start (2 n k² · 8, ``init='spectral'``) or,
                                 for the default starts, the r vectors kept and
                                 max(5 n r, 6 r²) · 8 for the k-means into k' ≤ r pieces and
                                 the merges' k' × k' tables
    sweep                        the graph silhouette's edge corrections (8 arrays of the
                                 edges of 65,536 rows), the labels of every k; with
                                 ``refit`` the best k fitted again while the sweep's graph is
                                 held
    ===========================  ==========================================================

    Measured against the growth of the process's peak RSS (20,000 and 100,000 uniform points
    with 21 and 200 neighbours, 5,000 points with 4,999, sweeps; docs/engine.md, "Memory")
    the plan is 1.0–2.6 times it: the graph building is counted as it is allocated, the
    entries of the symmetrized graph at their bound 2e − n (a neighbour graph of points has
    1.05–1.4 e).
    """
    n, k = int(n), int(k)
    nn = max(1, min(int(n_neighbors), n))
    d = max(1, int(d))
    e = n * nn
    i = 4 if 2 * e < 2**31 else 8
    nnz = min(2 * e - n, n * n)
    listed = graph_listed(n, nn, d, weighting)      # the search's lists
    el = n * listed
    items = {"neighbour lists": 16 * el,
             "graph building": 8 * e + (8 + i) * e + (8 + i) * 2 * e}
    choice = 0
    if listed > nn and start == "auto":
        il = 4 if 2 * el < 2**31 else 8
        entries = el + 2 * (GRAPH_BACKBONE + 1) * n     # the mutual edges and the backbone
        choice = (8 + il) * entries
        items["choice graph"] = (8 + il) * (GRAPH_BACKBONE + 2) * n + el + choice
        nnz = max(nnz, min(entries, n * n))     # the graph the starts run on
    build = sum(items.values())
    if search is None:
        search = "kd-tree" if d <= GRAPH_TREE_MAX_DIM else "exact"
    if search != "kd-tree":
        blocks = 41 * e + 2 * min(GRAPH_SEARCH_BLOCK_BYTES, 8 * e * d)
        if search == "approximate":
            blocks = max(blocks, GRAPH_APPROX_FIXED_BYTES + 80 * e)
        if blocks > build:
            items["search blocks" if search == "exact" else "neighbour search"] = \
                blocks - build
            build = blocks
    items["points and nodes"] = n * (24 * d + 100) + (8 * n * d + 8 * k * d * d if whiten
                                                      else 0)
    if whiten == "auto" and 2 <= d <= WHITEN_AUTO_MAX_DIM and k >= 2:
        items["first fit kept"] = (8 + i) * 2 * e + 40 * n
        rows = min(n, SCATTER_BLOCK_ROWS)
        mixture = (16 * n + 8 * rows * (3 * d + 1) + 144 * k * d * d
                   if d <= MIXTURE_COMPILED_MAX_DIM else
                   16 * n + 8 * rows * (3 * k + 5 * d + 4) + 48 * k * d * d)
        items["Gaussian step"] = max(40 * n + 8 * rows * (k + 3 * d + 2) + 24 * k * d * d,
                                     mixture)
    work, held = _graph_fit_work(n, nnz, i, k, start=start, eigengap=eigengap,
                                 sweep_ks=sweep_ks, row_entries=2 * nn)
    held += (8 + i) * 2 * e + choice
    if refit:
        work = max(work, build)
    if held + work > build:
        items["fit" if not sweep_ks else "fits and measures"] = held + work - build
    what = what or (f"the neighbour graph of {n:,} points with {nn:,} neighbours and its "
                    f"fit")
    return MemoryPlan(items=items, what=what)


def graph_listed(n, n_neighbors, d, weighting="connectivity"):
    """The neighbours the search lists for a graph of ``n_neighbors`` on n points of d
    columns: longer lists for the choice graph of a connectivity graph of at most 15 columns,
    where they are shorter than n (``kernels.graph.listed``)."""
    if weighting != "connectivity" or n_neighbors < 2 or d > GRAPH_TREE_MAX_DIM:
        return n_neighbors
    longer = 1 + math.ceil(GRAPH_CHOICE_FACTOR * (n_neighbors - 1))
    return longer if longer < n else n_neighbors


def graph_finest_multiple(k):
    """The most pieces per cluster the default starts of k clusters split into
    (``engine/graph_starts.oversegment_multiples``, whose largest it is): 2, and each other
    multiple while it makes at most ``GRAPH_PIECES_MAX`` pieces."""
    return max(m for i, m in enumerate(GRAPH_OVERSEGMENT) if i == 0 or m * k <= GRAPH_PIECES_MAX)


def _eigen_work(nodes, r):
    """The bytes of r eigenvectors of a graph of ``nodes`` nodes (``top_eigenvectors``):
    Lanczos' basis, or a dense ``eigh`` and its copies (5.3 n² measured)."""
    work = (min(nodes, max(2 * r + 1, 20)) + r) * nodes * 8
    if nodes <= GRAPH_DENSE_MAX or (nodes <= GRAPH_DENSE_FRACTION_MAX
                                    and r * GRAPH_DENSE_FRACTION >= nodes):
        work = max(work, 6 * nodes * nodes * 8)
    return work


def _graph_fit_work(n, nnz, i, k, *, start="auto", eigengap=False, sweep_ks=0,
                    row_entries=0):
    """(work, held): the bytes a fit (or a sweep) of k clusters on a graph of n nodes and nnz
    entries (indices of i bytes) allocates beside the graph it holds, and what the sweep
    keeps beside it (the labels of every k); ``row_entries`` bounds the entries of a row (the
    silhouette's blocks of edges). The "fit" and "sweep" rows of :func:`graph_plan`."""
    # the starts' eigenvectors: of the graph itself, or of its coarsening to GRAPH_DIRECT_MAX
    nodes = n if (start == "spectral" or n <= GRAPH_DIRECT_MAX) else GRAPH_DIRECT_MAX
    # the most eigenvectors of any k swept (up to k: the finest multiple falls as k grows, so
    # a smaller k may take more than the largest)
    r = max(max(j + 1, graph_finest_multiple(j) * j) for j in (range(1, k + 1) if sweep_ks
                                                               else (k,))) \
        if start == "auto" else k
    r = min(r, nodes)
    lanczos = _eigen_work(nodes, r)
    if eigengap:    # the sweep's k + 1 eigenvalues, of the whole graph
        lanczos = max(lanczos, _eigen_work(n, min(k + 1, n)))
    # D^-½AD^-½ of the whole graph and its temporaries, else the coarsening's contractions
    copies = 4 if nodes == n or eigengap else 2
    work = copies * (8 + i) * nnz + lanczos + 4 * 8 * n
    if start == "spectral":
        work += 2 * n * k * k * 8
    else:   # the r eigenvectors kept, and the over-segmentation into k' ≤ r pieces: the
        # k-means of their rows (n × k' distances) or the merges' k' × k' tables
        work += nodes * r * 8 + max(5 * nodes * r, 6 * r * r) * 8
    held = 0
    if sweep_ks:
        block = min(n, 1 << 16) * max(1, row_entries)
        work = max(work, 8 * 8 * block + 4 * n * k * 8)
        held += int(sweep_ks) * n * 12
    return work, held


def given_graph_plan(n, nnz, k, *, start="auto", eigengap=False, sweep_ks=0, refit=False,
                     what=None):
    """The peak memory of fitting k clusters (the largest k of a sweep) on a sparse affinity
    of n nodes and nnz stored entries given as DATA (``--kernel precomputed`` with an
    ``.npz`` or ``.mtx``), as a :class:`MemoryPlan`; the matrix read is DATA and is not
    counted. With i = 4 bytes per index (8 from 2³¹ entries):

    ===========================  ==========================================================
    affinity checks              (8 + i) nnz for Aᵀ, (8 + i) 2 nnz for A − Aᵀ (SciPy
                                 allocates room for both) and 8 nnz for its magnitudes: the
                                 symmetry check (``kernels.graph.check_affinity``)
    graph                        2 ((8 + i) nnz + 8 n) + 40 n: the checked (A + Aᵀ)/2, twice
                                 (the estimator checks DATA and the fit checks what it is
                                 given), and the arrays of its nodes
    fit                          as in :func:`graph_plan`, on nnz entries, beyond the checks
    ===========================  ==========================================================

    Measured against the growth of the process's peak RSS (docs/engine.md, "Memory"), the
    plan is 1.0–1.6 times it.
    """
    n, nnz, k = int(n), int(nnz), int(k)
    i = 4 if max(n, nnz) < 2**31 else 8
    checks = (8 + i) * nnz + (8 + i) * 2 * nnz + 8 * nnz
    held = 2 * ((8 + i) * nnz + 8 * n) + 40 * n
    work, sweep_held = _graph_fit_work(n, nnz, i, k, start=start, eigengap=eigengap,
                                       sweep_ks=sweep_ks,
                                       row_entries=-(-nnz // max(n, 1)))
    held += sweep_held
    if refit:
        work = max(work, checks)
    items = {"affinity checks": checks, "graph": held}
    if work > checks:
        items["fit" if not sweep_ks else "fits and measures"] = work - checks
    what = what or f"the fit of the given graph of {n:,} nodes and {nnz:,} entries"
    return MemoryPlan(items=items, what=what, smaller="a smaller graph")


def choose_storage(n, k, dtype="float64", *, limit=None, storage="auto", blocked_ok=True,
                   kernel_given=False, **plan_kwargs):
    """Where an exact fit keeps its kernel values: ``(storage, why)``.

    ``storage='auto'`` takes the kernel matrix when its plan fits ``limit`` (it is shared by
    every restart and read at memory speed), else the blocked route (Elkan on kernel values
    computed in blocks, O(n·k) memory) when that is possible (``blocked_ok``: a kernel
    function that is positive semidefinite by construction, the objective 'kmeans') and its
    plan fits. When neither fits the matrix plan is checked, which raises
    :class:`~kkmeans_cli.errors.MemoryPlanError` naming the ways out (Nyström among them).
    An explicit 'matrix' or 'blocked' is returned as asked (and checked by the caller).

    Parameters
    ----------
    n, k : int
    dtype : str or numpy dtype
    limit : int, str or None
        As for :func:`check` (None: 80% of the available RAM; no limit when unknown).
    storage : {'auto', 'matrix', 'blocked'}
    blocked_ok : bool
    kernel_given : bool
        The kernel matrix exists already: 'matrix'.
    **plan_kwargs
        More arguments of :func:`plan` (``silhouette``, ``n_threads``, ...).

    Returns
    -------
    (str, str)
        'matrix' or 'blocked', and why, for the report.
    """
    if storage != "auto":
        return storage, f"asked for ({named(f'--storage {storage}')})"
    if kernel_given:
        return "matrix", "the kernel matrix was given"
    resolved = resolve_limit(limit)
    source = named("--memory-limit") if limit is not None else "80% of the available RAM"
    matrix = plan(n, k, dtype, **plan_kwargs)
    if resolved is None or matrix.total <= resolved:
        room = "" if resolved is None else f" within the limit of {format_bytes(resolved)}"
        return "matrix", (f"the kernel matrix ({format_bytes(n * n * _itemsize(dtype))}) "
                          f"fits{room}")
    if blocked_ok:
        blocked = plan(n, k, dtype, storage="blocked", **plan_kwargs)
        if blocked.total <= resolved:
            return "blocked", (f"the kernel matrix would need {format_bytes(matrix.total)} "
                               f"with the fit, more than the limit of "
                               f"{format_bytes(resolved)} ({source}); kernel values are "
                               f"computed in blocks instead (exact)")
    check(matrix, limit, k=k, dtype=dtype, **plan_kwargs)
    return "matrix", "the kernel matrix fits"  # the free memory grew since it was measured


def largest_n(k, limit, dtype="float64", **kwargs):
    """The largest n whose :func:`plan` fits in ``limit`` bytes (bisection; 0 if none)."""
    lo, hi = 0, 1
    while plan(hi, k, dtype, **kwargs).total <= limit:
        lo, hi = hi, hi * 2
        if hi > 2**40:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if plan(mid, k, dtype, **kwargs).total <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def check(memory_plan, limit=None, **largest_kwargs):
    """Raise :class:`MemoryPlanError` when ``memory_plan`` needs more than ``limit`` bytes.

    Parameters
    ----------
    memory_plan : MemoryPlan
    limit : int, str or None
        Bytes, a size string (``'8G'``), or None for 80% of the available RAM (no check when
        that is unknown).
    **largest_kwargs
        Arguments of :func:`plan` (n excluded: ``k``, ``dtype``, ...) to name the largest
        sample that would fit.

    Returns
    -------
    int or None
        The limit used.
    """
    given = limit is not None
    limit = resolve_limit(limit)
    if limit is None or memory_plan.total <= limit:
        return limit
    source = named("--memory-limit") if given else "80% of the available RAM"
    ways = [f"{named(opt)} (needs {format_bytes(need)}"
            f"{'' if need <= limit else ', also too much'})"
            for opt, need in memory_plan.alternatives.items()]
    if largest_kwargs:
        max_n = largest_n(limit=limit, **largest_kwargs)
        if max_n >= 2:
            ways.append(f"a smaller sample (at most {max_n:,} rows fit)")
    else:
        ways.append(memory_plan.smaller)
    if not given:
        ways.append(f"a larger {named('--memory-limit')} if more memory is free")
    elif not ways:  # nothing else helps: not even 2 rows fit
        ways.append(f"a larger {named('--memory-limit')} (not even 2 rows fit in this one)")
    need_text, limit_text = format_need(memory_plan.total, limit)
    raise MemoryPlanError(
        f"not enough memory: {memory_plan.what} needs {need_text} "
        f"({memory_plan.describe()}), the limit is {limit_text} ({source}); "
        f"try {', '.join(ways[:-1]) + ' or ' + ways[-1] if len(ways) > 1 else ways[0]}")
