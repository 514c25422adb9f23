"""Many starts for the price of a few: candidates run to convergence on a seeded sample, the
best few completed on all the data.

Running ``n_init`` independent Lloyd runs on all n points costs ``n_init`` full runs. The
objective of a converged start is decided mostly by which basin it lands in, and a sample of
tens of thousands of points shows that as well as the full data: so every candidate start is
drawn and iterated to convergence on one seeded sample (cheap), the candidates are ranked by
their objective on that sample (the same points for all, so the comparison is fair), and only
the ``n_complete`` best are iterated on all the data from their sample solution, where they
converge in a few passes. The lowest full-data objective wins (the first on ties). This is
the "candidates scored on a sample, the best refined on all data" scheme of Bradley & Fayyad
("Refining initial points for k-means clustering", ICML 1998), with the sample solutions
themselves as the refined starts.

The function is generic over the kernel source: the caller says how to solve on the sample
and how to complete on all data (explicit features: ``features.py``; a kernel matrix or
kernel rows in blocks work the same way, with the sample solution's labels as the state).
``benchmarks/bench_nystroem.py`` measures the final objective against ``n_init`` full runs.
"""
from dataclasses import dataclass, field

import numpy as np

from .. import memory

#: Sample size: max(SAMPLE_MIN, SAMPLE_PER_CLUSTER · k) points (all of them when fewer).
SAMPLE_MIN = 20_000
SAMPLE_PER_CLUSTER = 500
#: Candidates completed on all the data (the memory plan counts their labels).
N_COMPLETE = memory.RESTARTS_COMPLETED
#: Objectives this close (relative) are one solution: sample objectives are completed once,
#: and of restarts that end this close the first wins.
SAME_RTOL = 1e-12


def improves(objective, best):
    """Whether a run ending at ``objective`` beats the best so far, ``best`` (None: no run
    yet) by more than rounding (``SAME_RTOL``). Runs that reach the same solution differ only
    in the last bits, which depend on the BLAS kernels and on a common shift of the data;
    the first of them wins, so neither can decide which label numbering is returned."""
    return best is None or objective < best - SAME_RTOL * abs(best)


@dataclass
class Restarts:
    """What stage 2 of a fit (every start, iterated) hands back, whatever the route: the
    winning run, the full-data objective of every run completed (in order; the lowest is the
    winner's, up to rounding: ``best_index`` names the winner where rounding ties were
    resolved by :func:`improves`, else it is the lowest) and what the route adds to
    ``fit_stats_`` (the screening's sample, candidates and times; empty for plain
    restarts)."""

    best: object
    inertias: list
    stats: dict = field(default_factory=dict)
    best_index: int = None

    @property
    def winner(self):
        """The index of the winning run in ``inertias``."""
        return self.best_index if self.best_index is not None else int(np.argmin(self.inertias))


def default_sample_size(n, n_clusters):
    """min(n, max(``SAMPLE_MIN``, ``SAMPLE_PER_CLUSTER``·k))."""
    return int(min(n, max(SAMPLE_MIN, SAMPLE_PER_CLUSTER * int(n_clusters))))


def sample_indices(n, size, rng):
    """A seeded uniform sample of ``size`` of the n points, sorted (all of them when
    size ≥ n)."""
    if size >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size=size, replace=False))


def distinct_best(objectives, count):
    """Indices of the ``count`` lowest objectives, best first, skipping a candidate whose
    objective equals one already chosen to ``SAME_RTOL``: starts that reached the same sample
    solution (the usual case on well-separated data) are completed once. Of such a group the
    lowest index stands for it, so rounding (another BLAS kernel, data shifted far from the
    origin) cannot decide which of two equal solutions, and which label numbering, wins."""
    chosen = []
    for i in np.argsort(np.asarray(objectives), kind="stable"):
        i = int(i)
        same = [p for p, j in enumerate(chosen)
                if abs(objectives[i] - objectives[j]) <= SAME_RTOL * abs(objectives[j])]
        if not same:
            chosen.append(i)
        elif i < chosen[same[0]]:
            chosen[same[0]] = i
    return chosen[:count]


@dataclass
class RestartsOutcome:
    """What :func:`sampled_restarts` did.

    ``best``: the winning full-data result; ``sample``: the sample's indices;
    ``sample_objectives``: each candidate's objective on the sample; ``completed``: the
    candidates completed on all data (best first); ``full_objectives``: their full-data
    objectives, in that order; ``best_candidate``: the index of the winning candidate;
    ``states``: the candidates' sample solutions (what ``solve_sample`` returned).
    """

    best: object
    sample: np.ndarray
    sample_objectives: list
    completed: list
    full_objectives: list
    best_candidate: int
    states: list = field(default_factory=list, repr=False)


def sampled_restarts(n, n_init, rng, solve_sample, complete, *, sample_size,
                     n_complete=N_COMPLETE, progress=None, promising_rtol=None):
    """Run ``n_init`` candidate starts on a seeded sample, complete the best on all data.

    Parameters
    ----------
    n : int
        Points in the data.
    n_init : int
        Candidate starts.
    rng : numpy Generator
        Draws the sample, then is passed to each ``solve_sample`` call in turn.
    solve_sample : callable
        ``solve_sample(sample, restart, rng) -> (objective, state)``: draw start number
        ``restart`` on the points ``sample`` (indices into the data), iterate it to
        convergence there, return its objective on the sample and whatever ``complete``
        needs (e.g. the centres, or the sample's labels).
    complete : callable
        ``complete(state) -> result`` with ``result.inertia``: the iterations on all data
        from a sample solution.
    sample_size : int
        Points in the sample (all n when larger).
    n_complete : int
        Candidates completed on all data: the best distinct ones on the sample (at most
        ``n_init``; fewer when fewer distinct sample objectives were reached).
    progress : callable, optional
        ``progress(done, total, what)`` after each candidate and each completion.
    promising_rtol : float, optional
        Complete only candidates whose sample objective is within this relative distance of
        the best one (the best is always completed): a solution that much worse on the
        sample is another basin, not sampling noise.

    Returns
    -------
    RestartsOutcome
    """
    sample = sample_indices(n, sample_size, rng)
    n_complete = max(1, min(int(n_complete), int(n_init)))
    total = n_init + n_complete
    objectives, states = [], []
    for restart in range(n_init):
        obj, state = solve_sample(sample, restart, rng)
        objectives.append(float(obj))
        states.append(state)
        if progress is not None:
            progress(restart + 1, total, "restarts on a sample")
    order = distinct_best(objectives, n_complete)
    if promising_rtol is not None:
        bound = objectives[order[0]] + promising_rtol * abs(objectives[order[0]])
        order = [c for c in order if objectives[c] <= bound]
    best, best_obj, best_candidate, full = None, np.inf, order[0], []
    for j, c in enumerate(order):
        result = complete(states[c])
        full.append(float(result.inertia))
        tie = best is not None and abs(result.inertia - best_obj) <= SAME_RTOL * abs(best_obj)
        if best is None or (result.inertia < best_obj and not tie) or (tie and c < best_candidate):
            best, best_obj, best_candidate = result, result.inertia, c
        if progress is not None:
            progress(n_init + j + 1, n_init + len(order), "best starts on all data")
    return RestartsOutcome(best=best, sample=sample, sample_objectives=objectives,
                           completed=order, full_objectives=full,
                           best_candidate=best_candidate, states=states)
