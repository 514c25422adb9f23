"""Stage 2 of a fit: every start, iterated on the kernel source; the lowest objective wins.

:func:`run_restarts` takes the kernel source, the weights the iterations use, the starting
labels (or None), the generator of the starts and the fit's frozen
:class:`~kkmeans_cli.engine.records.FitSpec`, and returns one
:class:`~kkmeans_cli.engine.restarts.Restarts` whatever the route: the embedding solver
(``embed.py``), a source that runs its own restarts (Nyström's explicit-feature engine,
``runs_restarts``), restarts screened on a sample (a kernel computed in blocks,
``exact_restarts.py``) or plain restarts with the start mix and Hartigan's refinement of
``optima.py`` (``spectral.py``, ``hartigan.py``). Its ``stats`` are what the route adds to ``fit_stats_``.
"""
from . import exact_restarts
from .embed import solve
from .iterate import iterate
from .optima import OptimaState
from .restarts import Restarts, improves


def run_restarts(source, weights, init_labels, rng, spec, progress=None):
    """Every start, iterated; the lowest inertia wins (the first of those equal up to
    rounding: ``restarts.improves``).

    Parameters
    ----------
    source : kernel source (``engine/sources.py``)
    weights : ndarray of float64, shape (n,)
        The weights the iterations use.
    init_labels : ndarray of int32, shape (n,), or None
        Starting labels (one run), or None for the fit's own starts.
    rng : numpy Generator
        Draws the starts.
    spec : FitSpec
    progress : callable, optional
        The fit's progress callback (``kkmeans_cli/progress.py``), told of the stages of a
        source that runs its own restarts.

    Returns
    -------
    Restarts
    """
    if spec.solver == "embed":
        best, inertias = solve(source, weights, spec.n_clusters, rng, spec.n_init,
                               spec.max_iter, init_labels=init_labels,
                               n_threads=spec.n_threads)
        return Restarts(best, inertias)
    if source.runs_restarts:  # Nyström's explicit-feature engine
        return source.run_restarts(weights, init_labels, rng, spec, progress)
    n_init = 1 if init_labels is not None else spec.n_init
    state = OptimaState(spec, n_init)
    if init_labels is None and n_init >= 2 and (
            spec.screen or exact_restarts.applies(source, init_labels, n_init, spec.n_clusters)):
        # storage='auto' chose screening by its cost model, or no kernel matrix to share:
        # candidates on a sample, the one that stands out completed, or the full restarts
        # in blocks when none does
        restarts, state = exact_restarts.adaptive_restarts(
            source, weights, rng, spec, n_init,
            lambda target, generator, fresh: plain_restarts(target, weights, None, generator,
                                                            spec, n_init, fresh))
    else:
        restarts = plain_restarts(source, weights, init_labels, rng, spec, n_init, state)
    return Restarts(restarts.best, restarts.inertias,
                    {**state.finish(restarts.inertias), **restarts.stats},
                    best_index=restarts.best_index)


def plain_restarts(source, weights, init_labels, rng, spec, n_init, state):
    """``n_init`` runs on all the data (or one from ``init_labels``), each from its start of
    ``state`` (an :class:`OptimaState`) and refined by it; the first of the lowest wins."""
    best, best_index, inertias = None, None, []
    for restart in range(n_init):
        start = (init_labels if init_labels is not None
                 else state.start(source, weights, rng, restart))
        result = iterate(source, weights, start, spec)
        result = state.refine(source, weights, result, start)
        inertias.append(result.inertia)
        if improves(result.inertia, None if best is None else best.inertia):
            best, best_index = result, restart
    return Restarts(best, inertias, best_index=best_index)
