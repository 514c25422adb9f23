"""A sweep over k on one graph: the normalized-cut fit of every k, the ratio of its normalized
cut to the next k's, its graph silhouette and the eigengap of the normalized Laplacian, arrays
in and records out.

The graph is built once (``kernels.graph_fit.build_graph``): a given affinity, or the
neighbour graph of X. With ``n_neighbors=None`` the default rule is applied for the smallest
k swept, so the graph, and the choice of k, do not depend on how far the sweep goes; for data
with more than 21·max(ks) distinct points that is the same graph ``fit_graph`` builds for each
k (below, the default rule caps the neighbours of a larger k at ⌊n_d/k⌋ − 1).

Each k is fitted as ``fit_graph`` fits it (``kernels.graph_fit.fit_on_graph``, a fresh
generator from ``random_state`` for every k, so a k's record equals ``fit_graph(X, k, ...)``
on the same graph). The silhouette is measured in the graph kernel's feature space
(``measures.graph_silhouette``; None for k = 1).

Cut ratio
    ρ_k = (ncut(k+1) + ε)/(ncut(k) + ε), ε = ``CUT_RATIO_EPS``: how much the normalized cut
    grows when one more cluster is cut out of the graph. The cut of k groups that the graph
    holds apart is small, and the (k+1)-th cluster has to cut through one of them: the cut
    jumps. Cut into k even pieces, an evenly connected chain has ncut ∝ k(k − 1), so one more
    piece multiplies its cut by (k + 1)/(k − 1): 3 at k = 2, 2 at k = 3, less after. So the cut
    ratio's choice (``choose_by_cut_ratio``) is the *largest* k whose next cluster at least
    triples the cut (ρ_k ≥ ``CUT_RATIO_JUMP``), else the k of the largest ρ (the smaller k on
    ties), or the one k swept when it alone has no ratio. Where k+1 is not among the ks swept
    it is fitted for the ratio alone (on the same graph, with the same seed) and not recorded
    as a k of its own; where the graph has k nodes or fewer there is no ratio (None). Both cuts
    are measured on the graph k was fitted on: with more components than k, a fit joins them by
    bridges first (``kernels.graph.join_components``) and a fit of k+1 may not, so k+1's labels
    are then cut on k's joined graph (``next_ncut``). Measured over 212 graph sweeps of k =
    2..8 (``benchmarks/bench_sweep_k.py``, docs/performance.md), it names the true k of 81 of
    82 separable rings and moons, 72 of 72 well-separated blob sets and 13 of 15 separable
    random-blob sets, where the graph silhouette names 11, 27 and 1 and the eigengap 6, 54 and
    8.

Eigengap (von Luxburg, "A tutorial on spectral clustering", Statistics and Computing 2007)
    The smallest max(ks) + 1 eigenvalues λ_1 ≤ λ_2 ≤ … of L = I − D^{-½}AD^{-½} are computed
    once (Lanczos on the sparse matrix, ``engine.graph_starts.laplacian_eigenvalues``);
    gap_k = λ_{k+1} − λ_k, and the k swept with the largest gap is the eigengap's choice (the
    first on ties). On a graph of several components they are the union of each component's
    (one 0 each, so exactly as many zeros as components: Lanczos on the whole graph finds a
    repeated eigenvalue fewer times than it occurs). Lanczos slows sharply with n on neighbour graphs (their top eigenvalues
    crowd near 1), so with ``eigengap='auto'`` it runs up to ``EIGENGAP_MAX_NODES`` nodes and
    the records carry None above.
"""
import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ..engine.graph import GraphKernel, normalized_cut
from ..engine.graph_starts import EigenvectorsFailed, eigengaps, laplacian_eigenvalues
from ..engine.threads import blas_threads, effective_n_threads
from ..errors import KKMeansWarning
from ..kernels.graph import join_components
from ..kernels.graph_fit import build_graph, fit_on_graph, joins, search_seed
from .graph_silhouette import graph_silhouette

EIGENGAP_MAX_NODES = 20_000
EIGENGAP_MODES = ("auto", True, False)
# The cut ratio (module docstring): ε keeps a cut of 0 (k components) finite, and a jump is a
# ratio of at least CUT_RATIO_JUMP.
CUT_RATIO_EPS = 1e-6
CUT_RATIO_JUMP = 3.0


@dataclass(frozen=True)
class GraphSweepRecord:
    """One k of a sweep: the labels (n,), ncut, the objective J, the graph silhouette (None
    for k = 1), the eigengap λ_{k+1} − λ_k (None when not computed or k = n), whether it is
    the eigengap's choice among the k swept, the fit (``GraphFitResult``), the seconds of
    the k's fit and silhouette (and of the k+1 fitted for its cut ratio alone), the normalized
    cut of k+1's labels on the graph k was fitted on and the cut ratio ρ_k (None when the
    graph has no k+1 nodes)."""

    k: int
    labels: np.ndarray
    ncut: float
    objective: float
    silhouette: object
    eigengap: object
    eigengap_choice: bool
    fit: object
    seconds: float = 0.0
    next_ncut: object = None
    cut_ratio: object = None


def sweep_graph(X=None, ks=(2, 3, 4, 5), *, affinity=None, n_neighbors=None,
                weighting="connectivity", random_state=None, n_threads=1, eigengap="auto",
                start="auto", n_init=3, max_iter=300, progress=None, neighbor_search="auto"):
    """Fit every k of ``ks`` on one graph (module docstring).

    Parameters
    ----------
    X : array (n, d), or None when ``affinity`` is given
    ks : the numbers of clusters, each 1 ≤ k ≤ the graph's nodes (in the order given)
    affinity : sparse or dense (n, n), checked by ``kernels.graph.check_affinity``
    n_neighbors : int ≥ 1 counting the point itself, or None: the default rule at min(ks)
    weighting : the graph's weights (``kernels.graph.knn_graph``; ignored with ``affinity``)
    random_state : None, int or ``numpy.random.SeedSequence`` (each k starts from a generator
        of its own seeded by it: ``default_rng(random_state)``)
    n_threads : threads of the neighbour search and the passes
    eigengap : 'auto' (up to ``EIGENGAP_MAX_NODES`` nodes), True or False
    start, n_init, max_iter : the starts and passes of each k's fit (``fit_graph``'s)
    progress : callable, optional; ``progress(done, total, record)`` after each k, and
        ``progress(done, total, None)`` after each k+1 fitted for a cut ratio alone (total
        counts both)
    neighbor_search : the neighbour search of the graph (``kernels.graph.knn_graph``), seeded
        as ``fit_graph`` seeds it

    Returns
    -------
    list of GraphSweepRecord, one per k in the order of ``ks``
    """
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be numbers of clusters ≥ 1, got {ks}")
    if eigengap not in EIGENGAP_MODES:
        raise ValueError(f"eigengap must be one of {EIGENGAP_MODES}, got {eigengap!r}")
    n_threads = effective_n_threads(n_threads)
    # the default neighbours of the smallest k; a given affinity is checked for the largest
    graph = build_graph(X, min(ks) if affinity is None else max(ks), affinity, n_neighbors,
                        weighting, n_threads=n_threads,
                        neighbor_search=neighbor_search,
                        random_state=search_seed(np.random.default_rng(random_state)),
                        start=start, largest=max(ks) + 1)   # k + 1: the cut ratio's
    too_many = [k for k in ks if k > graph.info.n_nodes]
    if too_many:
        raise ValueError(f"n_clusters must be between 1 and the {graph.info.n_nodes} "
                         f"distinct points, got {too_many[0]}")
    kernel = GraphKernel(graph.affinity, n_threads=n_threads)
    gaps = [None] * len(ks)
    if eigengap is True or (eigengap == "auto" and kernel.n <= EIGENGAP_MAX_NODES):
        try:
            with blas_threads(n_threads):
                lam = _eigenvalues(graph, kernel, min(max(ks) + 1, kernel.n),
                                   np.random.default_rng(random_state))
            gaps = eigengaps(lam, ks)
        except EigenvectorsFailed as exc:  # asked for: refused; else the records carry None
            if eigengap is True:
                raise EigenvectorsFailed(f"{exc}; choose k by another metric than the "
                                         f"eigengap") from None
            warnings.warn(f"{exc}; the eigengap is not computed", KKMeansWarning,
                          stacklevel=2)
    known = [g for g in gaps if g is not None]
    # no gap at all (every k below the graph's components: the eigenvalue 0 repeats) names
    # no k
    choice = gaps.index(max(known)) if known and max(known) > 0.0 else None

    joined = []     # the graph joined by bridges, once for every k below its components

    def fit_k(k):
        on, on_kernel = graph, kernel
        if joins(graph, k, start):
            if not joined:
                J = join_components(graph, n_threads)
                joined.append((J, GraphKernel(J.affinity, n_threads=n_threads)))
            on, on_kernel = joined[0]
        return fit_on_graph(on, k, start=start, n_init=n_init, max_iter=max_iter,
                            rng=np.random.default_rng(random_state), n_threads=n_threads,
                            kernel=on_kernel)

    swept = set(ks)
    extra = [k + 1 for k in ks if k + 1 not in swept and k + 1 <= kernel.n]
    total = len(ks) + len(extra)
    records = []
    for i, k in enumerate(ks):
        t0 = time.perf_counter()
        fit = fit_k(k)
        sil = graph_silhouette(kernel, fit.node_labels, k) if k >= 2 else None
        records.append(GraphSweepRecord(k=k, labels=fit.labels, ncut=fit.ncut,
                                        objective=fit.objective,
                                        silhouette=None if sil is None else float(sil),
                                        eigengap=gaps[i], eigengap_choice=i == choice,
                                        fit=fit, seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(i + 1, total, records[-1])
    # The cut ratios: the next k's cut, fitted here when it is not a k of the sweep, on the
    # graph k was fitted on (joined by bridges or not: module docstring).
    fits = {r.k: r.fit for r in records}
    done = len(ks)
    for i, r in enumerate(records):
        seconds, nxt = r.seconds, fits.get(r.k + 1)
        if nxt is None and r.k + 1 <= kernel.n:
            t0 = time.perf_counter()
            nxt = fit_k(r.k + 1)
            seconds += time.perf_counter() - t0
            done += 1
            if progress is not None:
                progress(done, total, None)
        if nxt is None:
            continue
        next_ncut = (nxt.ncut if nxt.graph.info.bridges == r.fit.graph.info.bridges else
                     normalized_cut(r.fit.graph.affinity, nxt.node_labels))
        records[i] = replace(r, seconds=seconds, next_ncut=float(next_ncut),
                             cut_ratio=cut_ratio(r.ncut, next_ncut))
    return records


def cut_ratio(ncut, next_ncut):
    """ρ_k = (ncut(k+1) + ε)/(ncut(k) + ε) (module docstring)."""
    return (float(next_ncut) + CUT_RATIO_EPS) / (float(ncut) + CUT_RATIO_EPS)


def choose_by_cut_ratio(ks, ratios):
    """The cut ratio's choice among ``ks`` (module docstring): the largest k with ρ_k ≥
    ``CUT_RATIO_JUMP``, else the k of the largest ρ_k (the smaller k on ties); ratios of None
    or NaN never win, unless one k alone is swept. None when no k has a ratio."""
    known = [(int(k), float(r)) for k, r in zip(ks, ratios)
             if r is not None and np.isfinite(r)]
    if not known:
        return int(ks[0]) if len(ks) == 1 else None
    jumps = [k for k, r in known if r >= CUT_RATIO_JUMP]
    if jumps:
        return max(jumps)
    return max(known, key=lambda kr: (kr[1], -kr[0]))[0]


def _eigenvalues(graph, kernel, r, rng):
    """The r smallest eigenvalues of the normalized Laplacian, ascending: of the whole graph
    when it is connected, else the union of its components' (each an r-smallest of its own:
    the Laplacian is block diagonal)."""
    if graph.info.n_components <= 1:
        return laplacian_eigenvalues(kernel, r, rng)
    A = kernel.matrix()
    parts = []
    for c in range(graph.info.n_components):
        nodes = np.flatnonzero(graph.components == c)
        if nodes.size == 1:
            parts.append(np.zeros(1))  # L = 1 − a/a
            continue
        part = GraphKernel(A[nodes][:, nodes].tocsr(), n_threads=kernel.n_threads)
        parts.append(laplacian_eigenvalues(part, min(r, nodes.size), rng))
    return np.sort(np.concatenate(parts))[:r]
