"""The iterations from one start on a kernel source: the scheme (Lloyd or Elkan) that
``algorithm`` and the source's capability flags choose, and the lazy source's hand-off from
kernel values in blocks to the kernel matrix."""
from ..errors import OptionConflictError
from .elkan import elkan
from .lloyd import LloydResult, lloyd

# algorithm='auto': Elkan's bounds prune little in many dimensions with few clusters
# (benchmarks/bench_elkan.py).
ELKAN_MAX_FEATURES = 32
ELKAN_MIN_CLUSTERS = 20


def elkan_pays_blocked(n_clusters, n_features):
    """Elkan on a blocked kernel unless d ≥ ``ELKAN_MAX_FEATURES`` and k <
    ``ELKAN_MIN_CLUSTERS`` (there the bounds prune little)."""
    return not (n_features >= ELKAN_MAX_FEATURES and n_clusters < ELKAN_MIN_CLUSTERS)


def scheme(source, spec):
    """'lloyd' or 'elkan' for this source and :class:`~kkmeans_cli.engine.records.FitSpec`.

    Rule for 'auto', measured with benchmarks/bench_elkan.py (n = 20,000, blobs, rbf,
    k ∈ {5, 20, 50, 200}, d ∈ {2, 10, 20, 50}; Lloyd time / Elkan time):

    - kernel matrix in memory: Lloyd (Elkan 0.25–0.63× at d = 2, 1.2–2.3× only at d = 50
      with k ≥ 50): one streaming pass over K is cheaper than Elkan's bookkeeping and
      scattered reads of K;
    - blocked kernel: Elkan (2.8–31×: it computes 2–100× fewer kernel values), except in
      many dimensions with few clusters (d = 50, k = 5: 0.75×), where the bounds prune
      little — Lloyd when d ≥ ``ELKAN_MAX_FEATURES`` and k < ``ELKAN_MIN_CLUSTERS``;
    - Nyström features: Elkan for data of d < ``ELKAN_MAX_FEATURES`` (1.25–3.2× at
      d ≤ 20), Lloyd above (0.41–0.66× at d = 50: one BLAS product per iteration wins).

    Elkan's bounds need the triangle inequality, so a kernel that is not positive
    semidefinite (and not repaired: ``source.not_euclidean``) always runs Lloyd; asking for
    Elkan there is an error.
    """
    why = source.not_euclidean
    if spec.algorithm == "elkan" and why is not None:
        # (kernel values computed in blocks hold no matrix to repair: psd_repair needs
        # storage='matrix')
        remedy = ("algorithm='lloyd', or storage='matrix' with psd_repair='lingoes'"
                  if source.computes_rows else "algorithm='lloyd' or psd_repair='lingoes'")
        raise OptionConflictError(
            f"algorithm='elkan' needs a positive semidefinite kernel (its bounds use the "
            f"triangle inequality in feature space); {why}. Use {remedy}")
    if spec.algorithm != "auto":
        return spec.algorithm
    if why is not None:
        return "lloyd"
    if source.explicit_features:  # explicit Nyström features
        return "elkan" if spec.n_features < ELKAN_MAX_FEATURES else "lloyd"
    if source.computes_rows:
        return "elkan" if elkan_pays_blocked(spec.n_clusters, spec.n_features) else "lloyd"
    return "lloyd"


def iterate(source, weights, start, spec, iterations_done=0):
    """Iterations from the labels ``start`` (the scheme of :func:`scheme`)."""
    if source.lazy:
        return _iterate_lazy(source, weights, start, spec)
    run = elkan if scheme(source, spec) == "elkan" else lloyd
    return run(source, weights, start, spec.n_clusters, max_iter=spec.max_iter, tol=spec.tol,
               n_threads=spec.n_threads, iterations_done=iterations_done)


def _iterate_lazy(source, weights, start, spec):
    """Elkan on kernel values computed in blocks, within the source's budget; past it, the
    kernel matrix is built and the iterations go on from where Elkan stopped (Elkan's
    labels after t updates are Lloyd's, so the result is the same)."""
    if source.matrix is not None:
        return iterate(source.matrix, weights, start, spec)
    first = elkan(source.blocked, weights, start, spec.n_clusters, max_iter=spec.max_iter,
                  tol=spec.tol, n_threads=spec.n_threads, kernel_budget=source.budget)
    if not first.interrupted:
        return first
    rest = iterate(source.materialize(), weights, first.labels, spec,
                   iterations_done=first.n_iter)
    return LloydResult(labels=rest.labels, distances=rest.distances,
                       inner_sums=rest.inner_sums, cluster_weights=rest.cluster_weights,
                       inertia=rest.inertia, n_iter=rest.n_iter,
                       converged=rest.converged,
                       n_relocated=first.n_relocated + rest.n_relocated,
                       objective_trace=first.objective_trace + rest.objective_trace[1:],
                       n_distances=first.n_distances + rest.n_distances,
                       outer_sums=rest.outer_sums)
