"""The approximate neighbour search of the graph kernel above 15 dimensions
(``kernels.graph.approximate_nearest``: pynndescent's nearest-neighbour descent, Dong, Charikar
& Li, "Efficient k-nearest neighbor graph construction for generic similarity measures"):
its recall against the exact search, the point itself first, rows fixed up when the descent
misses, which route ``neighbor_search`` takes, the fit through it, the setting on the
command line and in the model file, and the usage error when pynndescent is missing.
pynndescent is in the ``test`` extra: nothing here is skipped."""
import json
import os
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from helpers import assert_one_error_line, listing, run, write_csv
from kkmeans_cli import KernelKMeans
from kkmeans_cli.kernels import graph as kgraph
from kkmeans_cli.kernels.graph_fit import fit_graph, search_seed
from kkmeans_cli.model.params import InvalidParameterError

# The recall of approximate_nearest against exact_nearest on 2,000 × 32 (21 neighbours,
# itself included), measured over random states 0–3 and 1 and 2 threads: standard normal
# points (no clusters, the hardest case) 0.9795–0.9822; ten normal clusters 0.9997–1.0.
RECALL_NORMAL = 0.95
RECALL_CLUSTERS = 0.99


def _clusters(n, d, k, seed=0, box=8.0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-box, box, size=(k, d))
    y = rng.integers(0, k, n)
    return centres[y] + rng.normal(size=(n, d)), y


def _recall(a, b):
    return np.mean([len(set(u) & set(v)) / a.shape[1] for u, v in zip(a, b)])


@pytest.mark.parametrize("data, bound", [("normal", RECALL_NORMAL),
                                         ("clusters", RECALL_CLUSTERS)])
def test_recall_against_the_exact_search(data, bound):
    X = (np.random.default_rng(0).normal(size=(2000, 32)) if data == "normal"
         else _clusters(2000, 32, 10)[0])
    d_exact, i_exact = kgraph.exact_nearest(X, X, 21, 2, self_first=True)
    dist, idx = kgraph.approximate_nearest(X, 21, 2, 0)
    assert idx.shape == (2000, 21) and dist.shape == (2000, 21)
    assert _recall(i_exact, idx) >= bound
    assert np.array_equal(idx[:, 0], np.arange(2000)) and np.all(dist[:, 0] == 0)
    assert np.all(np.diff(dist, axis=1) >= 0)
    # the distances are the float64 ‖x − y‖ of the listed pairs, not pynndescent's float32
    assert np.allclose(dist, np.linalg.norm(X[:, None, :] - X[idx], axis=2), rtol=1e-12,
                       atol=0)
    # a neighbour the descent found is as far as the exact search says
    both = idx == i_exact
    assert np.allclose(dist[both], d_exact[both], rtol=1e-12, atol=1e-12)


def test_the_same_random_state_gives_the_same_lists_with_any_threads():
    """The descent runs on one thread (its parallel updates depend on the thread count): the
    same random state, the same lists with 1 and 2 threads, as the exact search."""
    X = np.random.default_rng(1).normal(size=(1500, 24))
    a = kgraph.approximate_nearest(X, 11, 2, 7)
    b = kgraph.approximate_nearest(X, 11, 1, 7)
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[0], b[0])
    c = kgraph.approximate_nearest(X, 11, 2, 8)
    assert not np.array_equal(a[1], c[1])       # another random state, another descent


def test_scale_and_offset_do_not_change_the_lists():
    """The points go to pynndescent centred and divided by their largest coordinate: data
    near 1e100 or 1e-100 (outside float32) gets the lists of the same data near 1."""
    X = _clusters(600, 20, 4, seed=2)[0]
    base = kgraph.approximate_nearest(X, 9, 1, 0)[1]
    for scale, shift in [(1e100, 0.0), (1e-100, 0.0), (1.0, 1e6)]:
        assert np.array_equal(kgraph.approximate_nearest(X * scale + shift, 9, 1, 0)[1], base)


class _Descent:
    """pynndescent's NNDescent stand-in whose lists miss the point itself in rows 3 and 5
    and hold −1 (nothing found) in row 8, the rest exact."""

    def __init__(self, data, n_neighbors, random_state, n_jobs, compressed):
        X = np.asarray(data, dtype=np.float64)
        _, idx = kgraph.exact_nearest(X, X, n_neighbors, 1, self_first=True)
        idx[3] = np.r_[idx[3, 1:], (idx[3, -1] + 1) % X.shape[0]]
        idx[5, 0] = idx[5, 1]
        idx[8, -3:] = -1
        self.neighbor_graph = (idx, np.zeros(idx.shape, dtype=np.float32))


def test_rows_where_the_descent_missed_are_searched_exactly(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynndescent", types.SimpleNamespace(NNDescent=_Descent))
    X = _clusters(300, 20, 3, seed=3)[0]
    dist, idx = kgraph.approximate_nearest(X, 8, 1, 0)
    d_exact, i_exact = kgraph.exact_nearest(X, X, 8, 1, self_first=True)
    assert np.array_equal(idx, i_exact)
    assert np.allclose(dist, d_exact, rtol=1e-12, atol=1e-12)


def test_copies_are_merged_before_the_approximate_search():
    """Repeated rows are one node whatever the search: the graph through the approximate
    search has the exact graph's nodes, counts and labels of points."""
    X = _clusters(400, 20, 4, seed=4)[0]
    X = np.vstack([X, X[:50], X[:10]])
    exact = kgraph.knn_graph(X, 9, n_threads=1, neighbor_search="exact")
    approx = kgraph.knn_graph(X, 9, n_threads=1, neighbor_search="approximate")
    assert approx.info.search == "approximate" and exact.info.search == "exact"
    assert approx.info.n_nodes == exact.info.n_nodes == 400
    assert approx.info.n_duplicates == 60
    assert np.array_equal(approx.counts, exact.counts)
    assert np.array_equal(approx.nodes[approx.node_of], X)
    assert abs(approx.affinity - approx.affinity.T).max() == 0
    assert np.all(approx.affinity.diagonal() > 0)


def test_the_route_of_each_setting(monkeypatch):
    route = kgraph.search_route
    big = kgraph.APPROX_MIN_POINTS
    assert route("auto", 10 ** 7, kgraph.TREE_MAX_DIM) == "kd-tree"
    assert route("approximate", 100, 2) == "kd-tree"
    assert route("auto", big - 1, 64) == "exact"
    assert route("auto", big, 64) == "approximate"
    assert route("exact", 10 ** 7, 64) == "exact"
    assert route("approximate", 100, 16) == "approximate"
    monkeypatch.setitem(sys.modules, "pynndescent", None)     # `import pynndescent` fails
    assert not kgraph.ann_available()
    assert route("auto", 10 ** 7, 64) == "exact"
    with pytest.raises(ValueError, match="neighbor_search must be one of"):
        route("fast", 100, 64)


def test_auto_below_the_threshold_is_exact():
    X, _ = _clusters(600, 20, 3, seed=5)
    assert fit_graph(X, 3, random_state=0, n_threads=1).graph.info.search == "exact"
    assert fit_graph(X[:, :5], 3, random_state=0, n_threads=1).graph.info.search == "kd-tree"
    est = KernelKMeans(3, random_state=0, n_threads=1).fit(X)
    assert est.fit_stats_["graph"]["search"] == "exact"


def test_a_fit_through_the_approximate_search_finds_separated_blobs():
    X, y = _clusters(3000, 40, 5, seed=6, box=10.0)
    est = KernelKMeans(5, neighbor_search="approximate", random_state=0, n_threads=2).fit(X)
    assert est.fit_stats_["graph"]["search"] == "approximate"
    assert adjusted_rand_score(y, est.labels_) == 1.0
    again = KernelKMeans(5, neighbor_search="approximate", random_state=0, n_threads=1).fit(X)
    assert np.array_equal(again.labels_, est.labels_) and again.inertia_ == est.inertia_
    # predict searches the training points exactly: the training points get their labels
    assert np.array_equal(est.predict(X), est.labels_)


def test_a_sweep_searches_as_the_fit_does():
    from kkmeans_cli.model.sweep import sweep

    X, y = _clusters(1500, 40, 4, seed=3, box=10.0)
    result = sweep(X, [3, 4, 5], kernel="knn", neighbor_search="approximate", random_state=0,
                   n_threads=1)
    assert result.graph.search == "approximate"
    assert result.best_k == 4 and adjusted_rand_score(y, result.labels[1]) == 1.0
    # each k's labels are a direct fit's through the same search (the same seed)
    est = KernelKMeans(4, neighbor_search="approximate", random_state=0, n_threads=1,
                       n_neighbors=result.graph.n_neighbors).fit(X)
    assert np.array_equal(est.labels_, result.labels[1])
    assert sweep(X, [3, 4], kernel="knn", random_state=0).graph.search == "exact"


def test_the_search_seed_leaves_the_fit_generator_alone():
    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[1])
    twin = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[1])
    assert search_seed(rng) == search_seed(twin)
    assert rng.integers(1 << 30) == twin.integers(1 << 30)


def test_dense_kernels_refuse_the_setting():
    X, _ = _clusters(50, 20, 2)
    for value in ("exact", "approximate"):
        with pytest.raises(InvalidParameterError, match="neighbour graph"):
            KernelKMeans(2, kernel="rbf", neighbor_search=value).fit(X)
    with pytest.raises(InvalidParameterError):
        KernelKMeans(2, neighbor_search="fast").fit(X)


# -- the command line ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def high_dim(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ann")
    X, y = _clusters(900, 20, 3, seed=7, box=10.0)
    return folder, write_csv(folder / "X.csv", X, fmt="%.6f"), y


def test_fit_info_and_predict_on_the_command_line(high_dim):
    folder, path, y = high_dim
    fit = run(["fit", path, "-k", "3", "--neighbor-search", "approximate", "--seed", "0",
               "--threads", "2", "-o", folder / "m.npz", "--labels", folder / "l.txt"])
    assert fit.exit_code == 0, fit.stderr
    assert "(connectivity; approximate search)" in fit.stderr
    labels = np.loadtxt(folder / "l.txt", dtype=int)
    assert adjusted_rand_score(y, labels) == 1.0
    info = run(["info", folder / "m.npz"])
    assert "neighbour search" in info.stdout and "approximate" in info.stdout
    assert "--neighbor-search=approximate" in info.stdout
    meta = json.loads(run(["info", folder / "m.npz", "--json"]).stdout)
    assert meta["graph"]["search"] == "approximate"
    predicted = run(["predict", folder / "m.npz", path])
    assert predicted.exit_code == 0, predicted.stderr
    assert np.array_equal(np.array(predicted.stdout.split(), dtype=int), labels)
    exact = run(["fit", path, "-k", "3", "--neighbor-search", "exact", "--seed", "0",
                 "-o", folder / "e.npz"])
    assert exact.exit_code == 0, exact.stderr
    assert "search" not in exact.stderr.split("graph:")[1].splitlines()[0]
    assert json.loads(run(["info", folder / "e.npz", "--json"]).stdout)["graph"][
        "search"] == "exact"


def test_a_model_written_before_the_search_was_recorded_loads(high_dim, tmp_path):
    folder, path, _ = high_dim
    assert run(["fit", path, "-k", "3", "--seed", "0", "-o", tmp_path / "m.npz"]).exit_code == 0
    with np.load(tmp_path / "m.npz", allow_pickle=False) as f:
        arrays = dict(f)
    meta = json.loads(str(arrays["meta"]))
    del meta["graph"]["search"]
    meta["options"].pop("neighbor_search", None)
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "old.npz", **arrays)
    info = run(["info", tmp_path / "old.npz"])
    assert info.exit_code == 0, info.stderr
    assert "neighbour search" not in info.stdout
    predicted = run(["predict", tmp_path / "old.npz", path])
    assert predicted.exit_code == 0, predicted.stderr


@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_approximate_without_pynndescent_is_a_usage_error(high_dim, tmp_path, monkeypatch,
                                                          command):
    _, path, _ = high_dim
    monkeypatch.setitem(sys.modules, "pynndescent", None)     # `import pynndescent` fails
    args = ([command, path, "-k", "3", "--labels", tmp_path / "l.txt"] if command == "fit"
            else [command, path, "--k", "2..3", "--table", tmp_path / "t.csv"])
    result = run([*args, "--neighbor-search", "approximate", "-o", tmp_path / "m.npz"])
    assert_one_error_line(result, "pip install 'kkmeans-cli[ann]'", "pynndescent", code=2)
    assert listing(tmp_path) == []
    with pytest.raises(InvalidParameterError, match=r"pip install 'kkmeans-cli\[ann\]'"):
        KernelKMeans(3, neighbor_search="approximate").fit(np.zeros((10, 20)))


def test_a_dense_kernel_with_the_option_is_a_usage_error(high_dim, tmp_path):
    _, path, _ = high_dim
    result = run(["fit", path, "-k", "3", "--kernel", "rbf", "--neighbor-search", "exact",
                  "-o", tmp_path / "m.npz"])
    assert_one_error_line(result, "--neighbor-search exact", "knn", code=2)
    assert "neighbor_search=" not in result.stderr
    assert listing(tmp_path) == []


def test_predict_and_help_do_not_import_pynndescent(high_dim, tmp_path):
    """pynndescent (and numba) are imported by the approximate search alone: not by
    ``kkmeans --help``, nor by a fit through the exact search, nor by predict."""
    folder, path, _ = high_dim
    code = (
        "import sys\n"
        "from kkmeans_cli.cli import cli\n"
        f"for args in (['--help'], ['fit', {path!r}, '-k', '3', '-o', {str(tmp_path / 'm.npz')!r}],"
        f" ['predict', {str(tmp_path / 'm.npz')!r}, {path!r}]):\n"
        "    try:\n"
        "        cli.main(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('ANN', sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pynndescent', 'numba')), file=sys.stderr)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=300)
    assert res.returncode == 0, res.stderr
    assert "ANN []" in res.stderr, res.stderr
    assert (tmp_path / "m.npz").exists()


def test_a_pynndescent_that_fails_to_import(tmp_path, monkeypatch):
    """Installed but broken (numba behind a new NumPy, say): 'auto' warns and takes the exact
    search, with the same graph as 'exact'; 'approximate' is one usage error naming the
    import error."""
    from kkmeans_cli.errors import KKMeansWarning, UsageError

    fake = tmp_path / "pynndescent"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('Numba needs NumPy 2.2 or less')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynndescent", raising=False)
    monkeypatch.setattr(kgraph, "APPROX_MIN_POINTS", 100)
    X, y = _clusters(400, 20, 3, seed=2)
    assert kgraph.search_route("auto", 400, 20) == "approximate"     # found, not imported
    with pytest.warns(KKMeansWarning, match=r"pynndescent could not be imported \(ImportError: "
                                            r"Numba needs NumPy 2\.2 or less\): the exact "
                                            r"neighbour search is used"):
        auto = kgraph.knn_graph(X, 9, neighbor_search="auto")
    exact = kgraph.knn_graph(X, 9, neighbor_search="exact")
    assert auto.info.search == "exact"
    assert (auto.affinity != exact.affinity).nnz == 0
    with pytest.raises(UsageError, match=r"could not be imported \(ImportError: Numba needs "
                                         r"NumPy 2\.2 or less\); repair it with pip install"):
        kgraph.knn_graph(X, 9, neighbor_search="approximate")
    # once a fit, though the whitened refit builds a second graph
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = KernelKMeans(3, whiten=True, random_state=0).fit(X)
    assert [str(w.message)[:33] for w in caught] == ["pynndescent could not be imported"]
    assert fit.fit_stats_["graph"]["search"] == "exact"
