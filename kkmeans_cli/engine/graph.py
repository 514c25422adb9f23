"""The normalized cut of a sparse affinity graph by weighted kernel k-means, in O(nnz) a pass.

Dhillon, Guan & Kulis, "Kernel k-means, spectral clustering and normalized cuts" (KDD 2004)
and "Weighted graph cuts without eigenvectors: a multilevel approach" (TPAMI 2007): for a
symmetric affinity A ≥ 0 with degrees d_i = Σ_j A_ij > 0, weights w = d and the kernel

    K = σD⁻¹ + D⁻¹AD⁻¹        (D = diag(d), σ ≥ 0 a diagonal shift),

weighted kernel k-means minimises the normalized cut. With L[i, c] = Σ_{j∈c} A_ij,
vol(c) = Σ_{i∈c} d_i and links(c, c) = Σ_{i,j∈c} A_ij:

    F[c, i] = Σ_{j∈c} w_j K_ij = σ[c(i) = c] + L[i, c]/d_i
    W_c     = vol(c),     g_c = Σ_{i∈c} w_i F[c, i] = σ vol(c) + links(c, c)
    d(i, c) = K_ii − 2F[c, i]/W_c + g_c/W_c²,      K_ii = σ/d_i + A_ii/d_i²

and the objective of a labelling with k non-empty clusters (n points) is

    J = Σ_i w_i K_ii − Σ_c g_c/W_c = σ(n − k) + Σ_i A_ii/d_i − Σ_c links(c, c)/vol(c)
      = ncut + σ(n − k) + Σ_i A_ii/d_i − k,     ncut = Σ_c cut(c, V∖c)/vol(c) = k − Σ_c links(c, c)/vol(c),

so for a fixed k, J and ncut differ by a constant: every move that lowers one lowers the
other by the same amount, whatever σ. Nothing here is n×n: a point's distances need its row of
A only (``_graph.pyx``), a pass costs O(nnz + n·k).

The shift σ
    Lloyd's batch step lowers J when K is positive semidefinite (the assignment lowers
    Σ w_i d(i, c) at fixed centres, the new centres lower it again). K = D⁻¹(σD + A)D⁻¹ is PSD
    iff σD + A is; by Gershgorin's theorem that holds when σd_i + A_ii ≥ d_i − A_ii for all i,
    so ``shift_bound`` takes σ = max(0, max_i (1 − 2A_ii/d_i)) (≤ 1: the eigenvalues of
    D^{-½}AD^{-½} lie in [−1, 1]). Hartigan's single-point moves use the exact change of ncut
    (independent of σ), so they lower J on any graph; at their optimum, with K PSD, no centre
    is nearer than a point's own (d(i, b) ≥ d(i, a) ≥ 0 follows from the move test), so the
    end is also a Lloyd fixed point.
"""
from dataclasses import dataclass, field

import numpy as np

from . import _graph

MAX_SWEEPS = 100              # Hartigan sweeps per round
MAX_ROUNDS = 50               # Lloyd ↔ Hartigan rounds
MIN_GAIN_RTOL = 1e-12         # a move must lower ncut by more than this × min d_i / vol(V)
FULL_PASS_FRACTION = 1.0 / 3.0  # more moved points than this × n: sums recomputed in full
SERIAL_MAX_N = 2000           # fewer points: one thread (a parallel region costs more)


class GraphKernel:
    """K = σD⁻¹ + D⁻¹AD⁻¹ of a symmetric affinity A (CSR), as the arrays the passes read.

    Attributes: ``n``, ``indptr`` (int64), ``indices`` (int32), ``data`` (float64),
    ``degrees`` d, ``self_loops`` A_ii, ``diag`` K_ii, ``sigma`` σ, ``n_threads``.
    """

    def __init__(self, A, sigma="auto", n_threads=1):
        self.n = A.shape[0]
        self.indptr = np.ascontiguousarray(A.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(A.indices, dtype=np.int32)
        self.data = np.ascontiguousarray(A.data, dtype=np.float64)
        self.degrees = row_sums(self.indptr, self.data, self.n)
        self.self_loops = np.ascontiguousarray(A.diagonal(), dtype=np.float64)
        self.sigma = shift_bound(self.degrees, self.self_loops) if sigma == "auto" \
            else float(sigma)
        self.diag = self.sigma / self.degrees + self.self_loops / self.degrees ** 2
        self.n_threads = 1 if self.n < SERIAL_MAX_N else int(n_threads)

    def matrix(self):
        """A as scipy CSR (a view of the arrays)."""
        from scipy import sparse

        return sparse.csr_matrix((self.data, self.indices, self.indptr),
                                 shape=(self.n, self.n))


def row_sums(indptr, data, n):
    """Σ_j A_ij of each row, in index order (np.add.reduceat; rows are never empty here)."""
    out = np.zeros(n)
    nonempty = np.flatnonzero(np.diff(indptr) > 0)
    if nonempty.size:
        out[nonempty] = np.add.reduceat(data, indptr[nonempty])
    return out


def shift_bound(degrees, self_loops):
    """σ = max(0, max_i (1 − 2A_ii/d_i)): σD + A is diagonally dominant, so K is PSD."""
    return float(max(0.0, np.max(1.0 - 2.0 * self_loops / degrees)))


# -- sums of a labelling ---------------------------------------------------------------------
@dataclass
class GraphSums:
    """links(c, c) and vol(c) of a labelling; J and ncut follow (module docstring)."""

    links: np.ndarray
    vol: np.ndarray

    def ncut(self):
        return ncut_of(self.links, self.vol)

    def objective(self, kernel):
        return objective_of(kernel, self.links, self.vol)


def cluster_sums(kernel, labels, k):
    """GraphSums of ``labels`` from one pass over A: links from each point's own links
    L[i, c(i)] (rows in parallel), summed per cluster in index order."""
    own = np.empty(kernel.n)
    _graph.own_links(kernel.indptr, kernel.indices, kernel.data, labels, own,
                     kernel.n_threads)
    links = np.bincount(labels, weights=own, minlength=k)
    vol = np.bincount(labels, weights=kernel.degrees, minlength=k)
    return GraphSums(links, vol)


def ncut_of(links, vol):
    """k − Σ_c links(c, c)/vol(c) over the non-empty clusters, at least 0 (each ratio is at
    most 1; a cut of nothing can round to −4·10⁻¹⁶, which a model file would refuse)."""
    ok = vol > 0
    return max(0.0, float(np.count_nonzero(ok) - np.sum(links[ok] / vol[ok])))


def objective_of(kernel, links, vol):
    """J = σ(n − k) + Σ_i A_ii/d_i − Σ_c links(c, c)/vol(c) (k: the non-empty clusters), at
    least 0 (a sum of squared distances: with a cluster for every node its two sums can
    round to −4·10⁻¹⁶, which a model file would refuse)."""
    ok = vol > 0
    return max(0.0, float(kernel.sigma * (kernel.n - np.count_nonzero(ok))
                          + np.sum(kernel.self_loops / kernel.degrees)
                          - np.sum(links[ok] / vol[ok])))


def normalized_cut(A, labels):
    """Σ_c cut(c, V∖c)/vol(c) of any labelling on the affinity A (e.g. another method's)."""
    labels = np.unique(np.asarray(labels), return_inverse=True)[1].astype(np.int32)
    kernel = GraphKernel(A.tocsr(), sigma=0.0)
    return cluster_sums(kernel, labels, int(labels.max()) + 1).ncut()


def link_sums(kernel, labels, k):
    """L[i, c] = Σ_{j∈c} A_ij as a dense n×k array (A times the indicator matrix)."""
    from scipy import sparse

    Z = sparse.csr_matrix((np.ones(kernel.n), (np.arange(kernel.n), labels)),
                          shape=(kernel.n, k))
    return np.asarray((kernel.matrix() @ Z).todense())


def distances(kernel, labels, sums):
    """d(i, c) for every point and cluster (n×k, unclamped; +inf for empty clusters)."""
    k = sums.vol.size
    L = link_sums(kernel, labels, k)
    F = L / kernel.degrees[:, None]
    F[np.arange(kernel.n), labels] += kernel.sigma
    return centre_distances(kernel.diag, F, kernel.sigma, sums)


def centre_distances(diag, F, sigma, sums):
    """K_ii − 2F[i, c]/W_c + g_c/W_c² for rows F (q×k), W = vol, g = σ vol + links."""
    vol = sums.vol
    ok = vol > 0
    Ws = np.where(ok, vol, 1.0)
    D = diag[:, None] - 2.0 * F / Ws + (sigma * Ws + sums.links) / Ws ** 2
    D[:, ~ok] = np.inf
    return D


# -- iterations ------------------------------------------------------------------------------
@dataclass
class GraphRun:
    """The end of one run of the iterations from one start."""

    labels: np.ndarray
    sums: GraphSums
    n_iter: int                  # Lloyd passes
    converged: bool
    hartigan_moves: int = 0
    objective_trace: list = field(default_factory=list)


def lloyd(kernel, labels, k, max_iter=300, trace=None):
    """Lloyd's batch iterations on the graph kernel from ``labels`` (every cluster non-empty).

    Each pass assigns every point to its nearest centre (``_graph.lloyd_pass``; a point stays
    unless a centre is strictly nearer); a cluster that would be emptied keeps its points.
    The sums follow the moved points (``moved_links_delta``) or, past ``FULL_PASS_FRACTION``
    of n, are recomputed. A pass that moves nothing is repeated on sums recomputed from
    scratch, so the labels returned are a fixed point of exact sums.

    Returns (labels, sums, n_iter, converged).
    """
    labels = np.array(labels, dtype=np.int32)
    sums = cluster_sums(kernel, labels, k)
    new = np.empty_like(labels)
    own = np.empty(kernel.n)
    exact = True
    for it in range(1, max_iter + 1):
        changed = _graph.lloyd_pass(kernel.indptr, kernel.indices, kernel.data,
                                    kernel.degrees, kernel.diag, labels, sums.links, sums.vol,
                                    kernel.sigma, new, own, kernel.n_threads)
        if changed:
            keep_nonempty(labels, new, k)
            changed = int(np.count_nonzero(new != labels))
        if changed == 0:
            if exact:
                return labels, sums, it, True
            sums, exact = cluster_sums(kernel, labels, k), True
            continue
        sums, exact = update_sums(kernel, labels, new, sums, k)
        labels, new = new, labels
        if trace is not None:
            trace.append(sums.objective(kernel))
    return labels, cluster_sums(kernel, labels, k), max_iter, False


def keep_nonempty(old, new, k):
    """Undo the moves out of every cluster that ``new`` would leave empty (in place)."""
    emptied = np.flatnonzero((np.bincount(new, minlength=k) == 0)
                             & (np.bincount(old, minlength=k) > 0))
    for c in emptied:
        stay = old == c
        new[stay] = c


def update_sums(kernel, old, new, sums, k):
    """The sums of ``new`` from those of ``old``: by the moved points' rows when few moved
    (returns exact=False: rounding may drift), else by a full pass (exact=True)."""
    moved = np.flatnonzero(new != old)
    if moved.size > FULL_PASS_FRACTION * kernel.n:
        return cluster_sums(kernel, new, k), True
    is_moved = np.zeros(kernel.n, dtype=np.uint8)
    is_moved[moved] = 1
    delta = np.zeros(k)
    _graph.moved_links_delta(kernel.indptr, kernel.indices, kernel.data, old, new,
                             moved.astype(np.int64), is_moved, delta)
    d = kernel.degrees[moved]
    vol = sums.vol + np.bincount(new[moved], weights=d, minlength=k) \
        - np.bincount(old[moved], weights=d, minlength=k)
    return GraphSums(sums.links + delta, vol), False


def hartigan(kernel, labels, sums, k, max_sweeps=MAX_SWEEPS):
    """Hartigan sweeps (``_graph.hartigan_sweeps``) from ``labels`` and their exact sums.

    Returns (labels, sums, n_moves, gain); the sums are recomputed when anything moved."""
    labels = np.array(labels, dtype=np.int32)
    links, vol = sums.links.copy(), sums.vol.copy()
    members = np.bincount(labels, minlength=k).astype(np.intp)
    total = float(kernel.degrees.sum())
    min_gain = MIN_GAIN_RTOL * float(kernel.degrees.min()) / total
    moves, _, gain = _graph.hartigan_sweeps(kernel.indptr, kernel.indices, kernel.data,
                                            kernel.degrees, labels, links, vol, members,
                                            min_gain, max_sweeps)
    if moves:
        return labels, cluster_sums(kernel, labels, k), int(moves), float(gain)
    return labels, sums, 0, 0.0


def refine(kernel, labels, k, max_iter=300, trace=None):
    """Lloyd then Hartigan, alternating until Hartigan moves nothing: the labels are then a
    Hartigan optimum of ncut and a Lloyd fixed point of exact sums.

    Returns a GraphRun; ``converged`` is False when ``max_iter`` Lloyd passes ran out (at
    most ``max_iter`` passes in all, at least one: where Hartigan moved points after the
    last, the labels are its).
    """
    trace = [] if trace is None else trace
    n_iter, moves, converged = 0, 0, True
    for _ in range(MAX_ROUNDS):
        labels, sums, it, ok = lloyd(kernel, labels, k, max(1, max_iter - n_iter), trace)
        n_iter += it
        if not ok:
            converged = False
            break
        labels, sums, moved, _gain = hartigan(kernel, labels, sums, k)
        moves += moved
        if moved == 0:
            break
        trace.append(sums.objective(kernel))
        if n_iter >= max_iter:      # Hartigan moved points, and no Lloyd pass is left
            converged = False
            break
    else:
        converged = False
    return GraphRun(labels, sums, n_iter, converged, moves, trace)
