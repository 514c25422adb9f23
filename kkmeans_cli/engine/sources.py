"""The contract between the iterations and the kernel values: a *kernel source*.

The iteration code never touches K directly: it asks a kernel source for what it needs, so
that a kernel matrix held in memory, one recomputed in blocks (for data whose n×n matrix does
not fit), the lazy hand-off between the two and explicit Nyström features run the same
algorithms (Lloyd, Elkan, k-means++, Hartigan). :class:`KernelSource` declares the contract
here, beside the code that reads it; the sources made from kernel functions implement it in
``kernels/sources.py``, the source of explicit features in ``engine/feature_source.py``.
Each says what it can do through capability flags instead of being probed with ``hasattr``
or ``isinstance``:

- ``holds_matrix``: K is in memory as ``source.K`` (spectral starts and Hartigan read it);
- ``explicit_features``: the source holds explicit feature vectors Φ (Nyström), so F is
  recomputed from cluster sums instead of by replaying a log of moves (``replays_log`` is
  its negation, kept as the name Elkan uses);
- ``computes_rows``: kernel values are recomputed from the data at every pass, never held
  (Elkan pays there; restarts are screened on a sample, ``exact_restarts.py``);
- ``lazy``: kernel values computed in blocks until the iterations need most of K, then K
  (``current`` is the source read now, ``materialize()`` builds K);
- ``runs_restarts``: the source runs the restarts itself (Nyström's explicit-feature engine);
- ``not_euclidean``: None when the feature-space distances are Euclidean (the kernel is
  positive semidefinite), else why not (Elkan's bounds need the triangle inequality).

``kernel_evaluations`` counts the kernel values read (in memory) or computed (blocked).
"""
from abc import ABC, abstractmethod


class KernelSource(ABC):
    """The contract between the iterations and the kernel values.

    Notation: F is the k×n array of outer sums F[c, i] = Σ_{j∈c} w_j K_ij (float64).

    Attributes every source has: ``n`` (points), ``diag`` (K_ii, float64, shape (n,)),
    ``kernel_evaluations`` (kernel values read or computed so far), and the capability flags
    of the module docstring.
    """

    holds_matrix = False
    explicit_features = False
    computes_rows = False
    lazy = False
    runs_restarts = False  # a source that runs the restarts itself (the Nyström engine)
    not_euclidean = None

    @property
    def current(self):
        """The source the iterations read now (itself; a lazy source's blocked or held K)."""
        return self

    @property
    def replays_log(self):
        """Whether Elkan brings F up to date by replaying its log of moves (kernel sources) or
        recomputes it per pair from explicit cluster sums (feature sources)."""
        return not self.explicit_features

    @abstractmethod
    def full_outer_sums(self, labels, weights, F):
        """F[c, i] = Σ_{j∈c} w_j K_ij for every c and i: one pass over K."""

    @abstractmethod
    def update_outer_sums(self, moved, src, dst, w_moved, F):
        """F[src] −= w K[moved], F[dst] += w K[moved] for the points that moved."""

    @abstractmethod
    def record_moves(self, moved, src, dst, w_moved):
        """Moves made without updating F (Elkan keeps a log; a source with explicit cluster
        sums updates them here)."""

    @abstractmethod
    def pair_sums(self, points, clusters, labels, weights, F):
        """F[c, i] from scratch for the given (point, cluster) pairs (n_c kernel values each)."""

    @abstractmethod
    def own_outer_sums(self, labels, weights, n_clusters):
        """Σ_{j∈own cluster} w_j K_ij for every point, from scratch (Σ n_c² kernel values)."""

    @abstractmethod
    def rows(self, idx):
        """Rows K[idx] as float64 (k-means++ reads columns of K, which are its rows)."""
