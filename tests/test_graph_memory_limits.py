"""``--memory-limit`` and ``--neighbor-search`` on the graph kernel: a sparse graph given as
DATA is planned from its rows and entries (``memory.given_graph_plan``) and refused before it
is checked or fitted; ``auto`` takes the exact search when the approximate one does not fit
and the exact one does; a refusal names ``--neighbor-search exact`` only when that fits, and
a sweep's largest k that fits; an explicit approximate search that cannot apply says why the
exact one ran; the need printed always exceeds the limit printed (docs/cli.md, "The graph
kernel"; docs/engine.md, "Memory")."""
import json
import re
import tracemalloc

import warnings

import numpy as np
import pytest
import scipy.io
from scipy import sparse

from helpers import assert_one_error_line, listing, run, run_process, write_csv
from kkmeans_cli import KernelKMeans, memory
from kkmeans_cli.errors import KKMeansWarning, MemoryPlanError
from kkmeans_cli.kernels import graph as kgraph
from kkmeans_cli.model.planning import check_graph_memory
from kkmeans_cli.model.sweep import graph_sweep


def _points(n, d, seed=0):
    return np.random.default_rng(seed).uniform(size=(n, d))


def _graph(n, neighbours=21, seed=0):
    return kgraph.knn_graph(_points(n, 2, seed), neighbours).affinity


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("given")
    A = _graph(4000)
    sparse.save_npz(folder / "g.npz", A)
    scipy.io.mmwrite(folder / "g.mtx", A)
    return folder, A


def _need(A, k=3, **kwargs):
    return memory.given_graph_plan(A.shape[0], A.nnz, k, **kwargs).total


# -- a sparse graph given as DATA --------------------------------------------------------------
@pytest.mark.parametrize("name", ["g.npz", "g.mtx"])
def test_a_given_graph_past_the_limit_is_refused_before_the_fit(graph_files, tmp_path, name):
    folder, A = graph_files
    need = _need(A)
    limit = need - 1
    result = run(["fit", folder / name, "-k", "3", "--kernel", "precomputed",
                  "--memory-limit", str(limit), "-o", tmp_path / "m.npz",
                  "--summary", tmp_path / "s.json", "--labels", tmp_path / "l.txt"])
    shown_need, shown_limit = memory.format_need(need, limit)   # a byte apart: bytes, or
    line = assert_one_error_line(                                 # MiB to 6 decimals
        result, "kkmeans: error: not enough memory: the fit of the given graph of 4,000 "
        f"nodes and {A.nnz:,} entries needs {shown_need} (fit ", " MiB + affinity checks ",
        f"the limit is {shown_limit} (--memory-limit); try a smaller graph", code=1)
    assert line.endswith("try a smaller graph")
    assert listing(tmp_path) == []
    sweep = run(["sweep", folder / name, "--k", "2..4", "--kernel", "precomputed",
                 "--memory-limit", "1M", "--table", tmp_path / "t.csv", "-o",
                 tmp_path / "m.npz"])
    assert_one_error_line(sweep, "not enough memory: the fit of the given graph of 4,000 "
                          "nodes", "the limit is 1 MiB (--memory-limit)", code=1)
    assert listing(tmp_path) == []


def test_a_given_graph_within_the_limit_is_the_fit_without_one(graph_files, tmp_path):
    folder, A = graph_files
    need = _need(A)
    free = run(["fit", folder / "g.npz", "-k", "3", "--kernel", "precomputed", "--no-model"])
    limited = run(["fit", folder / "g.npz", "-k", "3", "--kernel", "precomputed",
                   "--no-model", "--memory-limit", str(need)])
    assert free.exit_code == limited.exit_code == 0, limited.stderr
    assert limited.stdout == free.stdout and "warning" not in limited.stderr
    with pytest.raises(MemoryPlanError, match="the fit of the given graph of 4,000 nodes"):
        KernelKMeans(3, kernel="precomputed", memory_limit=need - 1).fit(A)
    with pytest.raises(MemoryPlanError, match="the fit of the given graph of 4,000 nodes"):
        graph_sweep(A, [2, 3], kernel="precomputed", memory_limit="1M")
    est = KernelKMeans(3, kernel="precomputed", memory_limit=need, random_state=0).fit(A)
    assert np.array_equal(est.labels_, KernelKMeans(3, kernel="precomputed",
                                                    random_state=0).fit(A).labels_)


def test_a_given_graph_is_refused_in_a_process(graph_files, tmp_path):
    folder, _ = graph_files
    result = run_process(["fit", folder / "g.npz", "-k", "3", "--kernel", "precomputed",
                          "--memory-limit", "1M", "-o", "m.npz"], cwd=tmp_path)
    assert_one_error_line(result, "not enough memory: the fit of the given graph",
                          "try a smaller graph", code=1)
    assert listing(tmp_path) == []


def test_the_plan_is_checked_before_the_affinity_is():
    """The refusal comes before the checks that copy the affinity (an asymmetric matrix past
    the limit is refused for memory, not for its asymmetry)."""
    A = _graph(2000).tolil()
    A[0, 1] = 5.0
    with pytest.raises(MemoryPlanError, match="not enough memory"):
        KernelKMeans(2, kernel="precomputed", memory_limit="100K").fit(A.tocsr())


@pytest.mark.parametrize("sweep", [False, True])
def test_the_given_graph_plan_bounds_what_the_fit_allocates(sweep):
    """At least the peak NumPy and SciPy allocate (tracemalloc) for checking and fitting (or
    sweeping) a given graph of 12,000 nodes, and within 2.5 times it."""
    small = _graph(800, seed=1)
    A = _graph(12_000)

    def run_it(G):
        if sweep:
            graph_sweep(G, [2, 3, 4], kernel="precomputed", random_state=0, n_threads=1,
                        refit_best=False, metric="silhouette")
        else:
            KernelKMeans(4, kernel="precomputed", random_state=0, n_threads=1).fit(G)

    run_it(small)               # imports and first calls: not measured
    tracemalloc.start()
    try:
        run_it(A)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plan = memory.given_graph_plan(12_000, A.nnz, 5 if sweep else 4,
                                   sweep_ks=3 if sweep else 0, eigengap=sweep)
    assert peak <= plan.total <= 2.5 * peak, (peak, plan.describe())


# -- the neighbour search under a limit --------------------------------------------------------
@pytest.fixture
def ann_from_600(monkeypatch):
    """'auto' takes the approximate search from 600 rows (instead of 100,000)."""
    monkeypatch.setattr(kgraph, "APPROX_MIN_POINTS", 600)
    X = np.round(_points(600, 20, seed=3), 4)
    return X


def test_auto_takes_the_exact_search_when_only_it_fits(ann_from_600, tmp_path):
    X = ann_from_600
    assert check_graph_memory(600, 20, [3]) == "auto"
    assert check_graph_memory(600, 20, [3], memory_limit="100M") == "exact"
    path = write_csv(tmp_path / "X.csv", X)
    fit = run(["fit", path, "-k", "3", "--memory-limit", "100M", "-o", tmp_path / "m.npz",
               "--labels", tmp_path / "l.txt"])
    assert fit.exit_code == 0, fit.stderr
    assert "search" not in fit.stderr.split("graph:")[1].splitlines()[0]
    meta = json.loads(run(["info", tmp_path / "m.npz", "--json"]).stdout)
    assert meta["graph"]["search"] == "exact"
    est = KernelKMeans(3, memory_limit="100M", random_state=0).fit(X)
    assert est.fit_stats_["graph"]["search"] == "exact"
    exact = KernelKMeans(3, neighbor_search="exact", random_state=0).fit(X)
    assert np.array_equal(est.labels_, exact.labels_)
    # a sweep takes it too, and its refit of the best k the same graph
    result = graph_sweep(X, [2, 3], memory_limit="100M", random_state=0)
    assert result.graph.search == "exact"
    assert result.best_estimator.fit_stats_["graph"]["search"] == "exact"
    sweep = run(["sweep", path, "--k", "2..3", "--memory-limit", "100M", "-o",
                 tmp_path / "s.npz", "--table", tmp_path / "t.csv"])
    assert sweep.exit_code == 0, sweep.stderr
    meta = json.loads(run(["info", tmp_path / "s.npz", "--json"]).stdout)
    assert meta["graph"]["search"] == "exact"


def test_the_exact_search_is_named_only_when_it_fits(ann_from_600, tmp_path):
    X = ann_from_600
    path = write_csv(tmp_path / "X.csv", X)
    exact = memory.graph_plan(600, 21, 20, 3, search="exact").total
    result = run(["fit", path, "-k", "3", "--neighbor-search", "approximate", "--memory-limit",
                  "100M", "-o", tmp_path / "m.npz", "--labels", tmp_path / "l.txt"])
    assert_one_error_line(result, "not enough memory: the neighbour graph of 600 points",
                          "(neighbour search 4", "the limit is 100 MiB (--memory-limit); try "
                          f"--neighbor-search exact (needs {memory.format_bytes(exact)})",
                          code=1)
    assert listing(tmp_path) == ["X.csv"]
    for search in ("auto", "approximate"):     # neither fits: the exact search is not named
        result = run(["fit", path, "-k", "3", "--neighbor-search", search, "--memory-limit",
                      str(exact - 1), "-o", tmp_path / "m.npz"])
        if search == "approximate":
            line = assert_one_error_line(result, "not enough memory", "(neighbour search 4",
                                         code=1)
        else:   # 'auto' is refused with what it runs once the limit allows: the exact search
            need = memory.format_need(exact, exact - 1)[0]
            line = assert_one_error_line(result, "not enough memory", f"needs {need}",
                                         code=1)
            assert "neighbour search" not in line
        assert "--neighbor-search exact" not in line
    assert listing(tmp_path) == ["X.csv"]
    # the Python API names the parameters, not the options
    with pytest.raises(MemoryPlanError, match=r"\(memory_limit\); try neighbor_search='exact' "
                                              r"\(needs "):
        KernelKMeans(3, neighbor_search="approximate", memory_limit="100M").fit(X)


def test_a_wide_sweep_names_the_largest_k_that_fits(tmp_path):
    X = _points(3000, 2, seed=4)
    path = write_csv(tmp_path / "X.csv", X)
    limit = 64 * 2**20
    result = run(["sweep", path, "--k", "2..1500", "--memory-limit", "64M", "-o",
                  tmp_path / "m.npz", "--table", tmp_path / "t.csv"])
    line = assert_one_error_line(result, "not enough memory: the neighbour graph of 3,000 "
                                 "points", "the limit is 64 MiB (--memory-limit); try --k 2..",
                                 code=1)
    assert listing(tmp_path) == ["X.csv"]
    top = int(re.search(r"try --k 2\.\.(\d+) \(needs ", line).group(1))
    assert 2 < top < 1500

    def plan(top):
        return check_graph_memory(3000, 2, range(2, top + 1), memory_limit=limit,
                                  sweep=True, refit=True, eigengap="auto")

    assert plan(top) == "auto"              # it fits, one more k does not
    with pytest.raises(MemoryPlanError):
        plan(top + 1)
    # ks that are no range: the largest of them that fits
    with pytest.raises(MemoryPlanError, match=r"try ks up to \d+ \(needs "):
        graph_sweep(X, [2, 3, 5, 8, 1400], memory_limit=limit)
    with pytest.raises(MemoryPlanError, match=r"try ks='2\.\.\d+' \(needs "):
        graph_sweep(X, "2..1500", memory_limit=limit)
    # no k fits: none is named
    with pytest.raises(MemoryPlanError) as info:
        check_graph_memory(3000, 2, range(2, 10), memory_limit="1M", sweep=True)
    assert "ks up to" not in str(info.value) and "ks=" not in str(info.value)


# -- an explicit approximate search that cannot apply ------------------------------------------
@pytest.mark.parametrize("rows, columns, extra, reason", [
    (300, 2, [], "does not apply to data of 15 columns or fewer (here 2): the k-d tree's "
                 "exact search, quicker there, was used"),
    (60, 20, [], "needs more than 4 distinct points per neighbour, and there are 60 distinct "
                 "points for 20 neighbours: the exact search was used"),
    (200, 20, ["--n-neighbors", "190"], "needs more than 4 distinct points per neighbour, "
     "and there are 200 distinct points for 190 neighbours: the exact search was used"),
])
def test_an_approximate_search_that_cannot_apply_says_so(tmp_path, rows, columns, extra,
                                                        reason):
    X = np.round(_points(rows, columns, seed=5), 4)
    path = write_csv(tmp_path / "X.csv", X)
    fit = run(["fit", path, "-k", "3", "--neighbor-search", "approximate", *extra,
               "--no-model"])
    assert fit.exit_code == 0, fit.stderr
    warned = [w for w in fit.stderr.splitlines() if w.startswith("kkmeans: warning:")]
    assert warned == [f"kkmeans: warning: the approximate neighbour search {reason}"]
    graph_row = fit.stderr.split("graph:")[1].splitlines()[0]
    assert "approximate" not in graph_row
    sweep = run(["sweep", path, "--k", "2..3", "--neighbor-search", "approximate", *extra,
                 "-o", tmp_path / "m.npz", "--table", tmp_path / "t.csv"])
    assert sweep.exit_code == 0, sweep.stderr
    # one line, though the best k is fitted again; a sweep's default neighbours are k = 2's
    assert [w for w in sweep.stderr.splitlines() if "warning" in w] == \
        [warned[0].replace("for 20 neighbours", "for 21 neighbours")]
    n_neighbors = int(extra[1]) if extra else None
    # once in Python too, though the whitened refit builds a second graph
    for whiten in ("auto", True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = KernelKMeans(3, neighbor_search="approximate", n_neighbors=n_neighbors,
                               whiten=whiten, random_state=0).fit(X)
        assert [str(w.message) for w in caught] == [
            warned[0].removeprefix("kkmeans: warning: ")], whiten
        assert issubclass(caught[0].category, KKMeansWarning)
        assert est.fit_stats_["graph"]["search"] in ("exact", "kd-tree")


def test_memory_limit_takes_numpy_numbers():
    """np.int64(10**9) was refused ('must be a positive number of bytes ... got
    np.int64(1000000000)') where np.float64 was taken; an infinite limit is refused, not an
    OverflowError."""
    for value in (np.int64(10 ** 9), np.int32(10 ** 9), np.float64(1e9), 10 ** 9):
        assert memory.resolve_limit(value) == 10 ** 9
    X = _points(60, 2, seed=1)
    est = KernelKMeans(2, kernel="rbf", memory_limit=np.int64(10 ** 9), random_state=0).fit(X)
    assert est.labels_.shape == (60,)
    for bad in (float("inf"), np.float64("nan"), 0, True):
        with pytest.raises(ValueError, match="memory_limit must be a positive number of bytes"):
            memory.resolve_limit(bad)


def test_copies_count_as_one_point_for_the_approximate_search(tmp_path):
    X = np.repeat(np.round(_points(50, 20, seed=6), 4), 8, axis=0)
    with pytest.warns(KKMeansWarning, match=r"there are 50 distinct points \(of 400 rows\) "
                                            r"for 13 neighbours: the exact search was used"):
        kgraph.knn_graph(X, 13, neighbor_search="approximate")


def test_the_warning_in_a_process(tmp_path):
    write_csv(tmp_path / "X.csv", _points(100, 2, seed=7))
    result = run_process(["fit", "X.csv", "-k", "2", "--neighbor-search", "approximate",
                          "--no-model"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [w for w in result.stderr.splitlines() if "warning" in w] == [
        "kkmeans: warning: the approximate neighbour search does not apply to data of 15 "
        "columns or fewer (here 2): the k-d tree's exact search, quicker there, was used"]
    assert listing(tmp_path) == ["X.csv"]


def test_auto_and_exact_do_not_warn(tmp_path):
    X = np.round(_points(60, 20, seed=5), 4)
    path = write_csv(tmp_path / "X.csv", X)
    for search in ("auto", "exact"):
        fit = run(["fit", path, "-k", "3", "--neighbor-search", search, "--no-model"])
        assert fit.exit_code == 0 and "warning" not in fit.stderr, fit.stderr


# -- sizes at the boundary -----------------------------------------------------------------
@pytest.mark.parametrize("need, limit, shown", [
    (12 * 2**30, 8 * 2**30, ("12 GiB", "8 GiB")),
    (100 * 2**20 + 5000, 100 * 2**20, ("100.005 MiB", "100 MiB")),
    (100 * 2**20 + 1, 100 * 2**20, ("100.000001 MiB", "100 MiB")),
    (2**30 + 10, 2**30 - 1000, ("1024 MiB", "1023.999 MiB")),
    (1025, 1024, ("1.001 KiB", "1 KiB")),
    (2**40 + 1, 2**40, ("1,099,511,627,777 B", "1,099,511,627,776 B")),
])
def test_the_need_printed_exceeds_the_limit_printed(need, limit, shown):
    assert memory.format_need(need, limit) == shown


def test_a_refusal_one_byte_past_the_limit_shows_the_difference(graph_files, tmp_path):
    folder, A = graph_files
    need = _need(A)
    result = run(["fit", folder / "g.npz", "-k", "3", "--kernel", "precomputed",
                  "--memory-limit", str(need - 1), "--no-model"])
    line = assert_one_error_line(result, "not enough memory", code=1)
    found = re.search(r"needs ([\d.,]+) (\w+) \(.*the limit is ([\d.,]+) (\w+) ", line)
    assert found and found.group(2) == found.group(4), line
    assert float(found.group(1).replace(",", "")) > float(found.group(3).replace(",", ""))


@pytest.mark.parametrize("n, k", [(1000, 300), (600, 90), (2000, 50)])
def test_the_plan_of_a_large_k_on_small_data_bounds_what_the_fit_allocates(n, k):
    """The default starts of a large k keep r = 2k eigenvectors (from k = 34: the finer
    starts only up to 100 pieces) and split into up to r pieces (the k-means of their rows,
    the merges' r × r tables): the plan covers the fit's traced peak (NumPy's arrays;
    LAPACK's workspace is not traced) with room to spare."""
    X = _points(n, 2, seed=n)
    tracemalloc.start()
    try:
        KernelKMeans(k, random_state=0, n_threads=1).fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plan = memory.graph_plan(n, kgraph.default_neighbors(n, k) + 1, 2, k)
    assert peak <= plan.total <= 4 * peak, (peak, plan.describe())


def test_a_sweep_is_planned_with_the_most_eigenvectors_of_any_k_it_fits():
    """The starts of k = 25 take 4k = 100 eigenvectors, those of k = 34 only 2k = 68: a sweep
    of k = 2..33 (planned at 34, the k + 1 of its last ratio) plans at least what its k = 25
    fit needs (on 700 points r = 100 ≥ n/7 takes a dense eigh: 28 MiB, where r = 68 planned
    5.6)."""
    sweep = memory.graph_plan(700, 21, 2, 34, sweep_ks=32)
    fit = memory.graph_plan(700, 21, 2, 25)
    assert sweep.total >= fit.total
