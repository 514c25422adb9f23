"""The graph kernel in the product: ``KernelKMeans(kernel='knn')`` and a sparse affinity with
``kernel='precomputed'`` (the normalized cut as weighted kernel k-means, Dhillon, Guan &
Kulis, "Kernel k-means, spectral clustering and normalized cuts"), its model file, and
``kkmeans fit/predict/info`` with ``--kernel knn``. The engine itself is tested in
test_graph.py; here: the estimator's results equal the engine's (``fit_graph``), predict of
the training points is the labels, the model file round trip is exact, and every refusal is
one error line with nothing written."""
import io
import json
import os

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

from helpers import (OLD, assert_one_error_line, blobs, labels_of, listing, run, run_process,
                     write_csv)
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine.threads import effective_n_threads
from kkmeans_cli.kernels.graph_fit import fit_graph
from kkmeans_cli.model.model_file import load_model
from kkmeans_cli.model.params import InvalidParameterError


def _moons(n=200, seed=0):
    return make_moons(n, noise=0.05, random_state=seed)


def _blocks(sizes, seed=0):
    """A block-diagonal affinity (one clique per size, random positive weights)."""
    rng = np.random.default_rng(seed)
    blocks = []
    for size in sizes:
        B = rng.uniform(0.5, 1.5, (size, size))
        blocks.append((B + B.T) / 2)
    return sparse.block_diag(blocks, format="csr")


# -- the estimator ------------------------------------------------------------------------------
def test_knn_estimator_is_the_engine_fit():
    """The estimator's labels, objective, cut and sums are ``fit_graph``'s with the same
    neighbours, starts and generator; predict(X_fit) == labels_."""
    X, y = _moons()
    est = KernelKMeans(2, kernel="knn", n_neighbors=12, n_init=3, random_state=0).fit(X)
    from kkmeans_cli.model.params import fit_rngs

    _, rng = fit_rngs(0)
    ref = fit_graph(X, 2, n_neighbors=12, n_init=3, random_state=rng, n_threads=1)
    np.testing.assert_array_equal(est.labels_, ref.labels)
    assert est.inertia_ == ref.objective and est.ncut_ == ref.ncut
    np.testing.assert_array_equal(est.cluster_weights_, ref.sums.vol)
    np.testing.assert_array_equal(est.inner_sums_, ref.inner_sums)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    stats = est.fit_stats_
    assert stats["graph"]["n_neighbors"] == 12 and stats["graph"]["n_components"] >= 1
    assert stats["graph"]["nnz"] == ref.graph.info.nnz and stats["ncut"] == ref.ncut
    assert stats["restart_inertias"][stats["best_restart"]] == pytest.approx(est.inertia_)
    # the weights are the degrees: their sums per cluster are the volumes
    np.testing.assert_allclose(np.bincount(est.labels_, weights=est.sample_weight_),
                               est.cluster_weights_, rtol=1e-12)


def test_knn_default_neighbours_and_duplicates():
    """n_neighbors=None is the engine's rule (20 other points, capped for tiny data, on the
    distinct points); copies of a point share its node and label, and predict(X_fit) ==
    labels_ holds for them too."""
    from kkmeans_cli.kernels.graph import default_neighbors

    X, _ = _moons(150, seed=1)
    X = np.vstack([X, X[:10], X[:3]])
    est = KernelKMeans(2, kernel="knn", n_init=2, random_state=3).fit(X)
    info = est.fit_stats_["graph"]
    assert info["n_neighbors"] == default_neighbors(150, 2) == 21
    assert info["n_duplicates"] == 13
    assert info["n_nodes"] == 150 and info["n_points"] == 163
    np.testing.assert_array_equal(est.labels_[150:160], est.labels_[:10])
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    small = KernelKMeans(2, kernel="knn", random_state=0).fit(blobs(n=8, k=2)[0])
    assert small.fit_stats_["graph"]["n_neighbors"] == default_neighbors(8, 2) == 4


def test_knn_transform_and_new_points():
    """transform gives the feature-space distances of the graph kernel's extension; the
    predicted label is their argmin for points off the graph."""
    X, y = _moons(240, seed=2)
    est = KernelKMeans(2, kernel="knn", n_init=2, random_state=0).fit(X)
    new, _ = _moons(60, seed=5)
    D = est.transform(new)
    assert D.shape == (60, 2) and np.all(np.isfinite(D))
    np.testing.assert_array_equal(est.predict(new), np.argmin(D, axis=1))


def test_transform_of_training_points_is_never_negative():
    """A training point's distances take its own list B_J for the fit's symmetrized row
    (docs/engine.md, out-of-sample extension); on a few points that approximation took the
    point's own cluster below 0 (the point (3, 0) here: −0.0051). Squared distances are
    ≥ 0, and the label's is still the least."""
    X = np.array([[7., 7.], [9., 7.], [3., 0.], [8., 7.]])
    est = KernelKMeans(2, random_state=0, whiten=False).fit(X)
    T = est.transform(X)
    assert T.min() == 0.0 and T[2, est.labels_[2]] == 0.0
    rng = np.random.default_rng(0)
    for trial in range(60):
        n, k = int(rng.integers(5, 61)), int(rng.integers(2, 4))
        X = np.round(rng.normal(size=(n, 2)) * 3, 1)
        est = KernelKMeans(k, random_state=trial).fit(X)
        T = est.transform(X)
        assert np.all(T >= 0), trial
        np.testing.assert_array_equal(T[np.arange(n), est.labels_], T.min(axis=1))


def test_points_the_graph_cannot_tell_apart_are_at_one_distance():
    """Two distinct points, each the other's neighbour: rows equal, so every distance is the
    same (0; with copies 0.0225) and either labelling is optimal; predict gives the fit's
    labels, argmin transform the first cluster (docs/engine.md)."""
    for X, value in ((np.array([[0., 0.], [1., 1.]]), 0.0),
                     (np.repeat([[0., 0.], [1., 1.]], 10, axis=0), 0.0225)):
        est = KernelKMeans(2, random_state=0).fit(X)
        np.testing.assert_allclose(est.transform(X), value, atol=1e-15)
        np.testing.assert_array_equal(est.predict(X), est.labels_)
        assert sorted(set(est.labels_)) == [0, 1]


def test_a_refused_fit_leaves_the_model_before_it():
    """scikit-learn's validate_data records n_features_in_ and feature_names_in_ before the
    later checks (finite values, a chi2 kernel's domain, distinct points): a refit they
    refuse puts them back, so that the model before still predicts (as KMeans, which refuses
    NaN first)."""
    import pandas as pd

    X, _ = _moons(100)
    bad = np.c_[X, X[:, 0]]
    bad[0, 2] = np.nan
    fitted = pd.DataFrame(X, columns=["a", "b"])
    for kernel in ("knn", "rbf"):
        est = KernelKMeans(2, kernel=kernel, random_state=0).fit(fitted)
        labels = est.labels_.copy()
        for refit_kernel, refused in ((kernel, pd.DataFrame(bad, columns=["a", "b", "c"])),
                                      (kernel, bad),                    # NaN
                                      (kernel, np.zeros((5, 3))),       # one distinct point
                                      ("chi2", np.c_[X, X[:, :1]])):    # negative values
            with pytest.raises(ValueError):
                est.set_params(kernel=refit_kernel).fit(refused)
            est.set_params(kernel=kernel)
            assert est.n_features_in_ == 2 and list(est.feature_names_in_) == ["a", "b"]
            np.testing.assert_array_equal(est.predict(fitted), labels)
    est = KernelKMeans(2)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad)
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "feature_names_in_")


def test_knn_threads_do_not_change_the_fit():
    # 2,400 points: below 2,000 a fit runs on one thread whatever n_threads says
    X, _ = make_circles(2400, factor=0.5, noise=0.05, random_state=0)
    one = KernelKMeans(2, kernel="knn", n_init=3, random_state=1, n_threads=1).fit(X)
    two = KernelKMeans(2, kernel="knn", n_init=3, random_state=1, n_threads=2).fit(X)
    # (2 where the engine was built with OpenMP; effective_n_threads says how many there are)
    assert (one.fit_stats_["n_threads"], two.fit_stats_["n_threads"]) == (
        1, effective_n_threads(2))
    np.testing.assert_array_equal(one.labels_, two.labels_)
    assert one.inertia_ == two.inertia_ and one.n_iter_ == two.n_iter_
    small = KernelKMeans(2, kernel="knn", n_threads=2).fit(X[:400])
    assert small.fit_stats_["n_threads"] == 1


def test_knn_refit_with_another_kernel_drops_the_graph():
    X, _ = blobs(n=40, k=2)
    est = KernelKMeans(2, kernel="knn", random_state=0, n_init=2).fit(X)
    assert est.graph_model_ is not None
    est.set_params(kernel="rbf").fit(X)
    assert not hasattr(est, "graph_model_") and not hasattr(est, "graph_info_")
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_sparse_precomputed_affinity_is_a_graph_fit():
    """A SciPy sparse X with kernel='precomputed' is an affinity graph: three separate
    cliques are its three components (ncut 0); the model cannot place new points."""
    A = _blocks([5, 7, 6])
    est = KernelKMeans(3, kernel="precomputed", random_state=0).fit(A)
    assert est.ncut_ == 0.0 and est.fit_stats_["best_start"] == "components"
    truth = np.repeat([0, 1, 2], [5, 7, 6])
    assert adjusted_rand_score(truth, est.labels_) == 1.0
    ref = fit_graph(None, 3, affinity=A, random_state=0)
    np.testing.assert_array_equal(est.labels_, ref.labels)
    with pytest.raises(ValueError, match="no coordinates to place new points"):
        est.predict(A.toarray())


@pytest.mark.parametrize("A, needle", [
    (sparse.csr_matrix(np.ones((3, 4))), "square"),
    (sparse.csr_matrix(np.array([[1.0, 2.0], [0.5, 1.0]])), "not symmetric"),
    (sparse.csr_matrix(np.array([[1.0, -1.0], [-1.0, 1.0]])), "negative weight"),
    (sparse.csr_matrix(np.array([[1.0, np.nan], [np.nan, 1.0]])), "not a finite number"),
    (sparse.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0]])), "no positive weight"),
])
def test_bad_sparse_affinity_is_refused(A, needle):
    with pytest.raises(ValueError, match=needle):
        KernelKMeans(1, kernel="precomputed").fit(A)


@pytest.mark.parametrize("params, needle", [
    (dict(approx="nystroem"), "approx='nystroem'"),
    (dict(storage="blocked"), "storage='blocked'"),
    (dict(storage="matrix"), "storage='matrix'"),
    (dict(gamma=0.5), "gamma=0.5"),
    (dict(degree=2), "degree=2"),
    (dict(dtype="float32"), "dtype='float32'"),
    (dict(psd_repair="lingoes"), "psd_repair='lingoes'"),
    (dict(solver="embed"), "solver='embed'"),
    (dict(algorithm="elkan"), "algorithm='elkan'"),
    (dict(refine="none"), "refine='none'"),
    (dict(init="random"), "init='random'"),
    (dict(init=np.zeros(30, dtype=int)), "init labels"),
    (dict(cluster="local:1"), "cluster"),
])
def test_knn_refuses_the_dense_settings(params, needle):
    X, _ = blobs(n=30, k=3)
    with pytest.raises(InvalidParameterError, match=needle) as info:
        KernelKMeans(3, kernel="knn", **params).fit(X)
    assert "kernel='knn'" in str(info.value)


def test_n_neighbors_belongs_to_knn():
    X, _ = blobs(n=30, k=3)
    with pytest.raises(InvalidParameterError, match="n_neighbors=5 sets the graph"):
        KernelKMeans(3, kernel="rbf", n_neighbors=5).fit(X)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidParameterError, match="n_neighbors"):
            KernelKMeans(3, kernel="knn", n_neighbors=bad).fit(X)
    with pytest.raises(ValueError, match="n_neighbors=30 must be less than the number of "
                                         "points"):
        KernelKMeans(3, kernel="knn", n_neighbors=30).fit(X)


def test_self_tuning_estimator_is_the_engine_fit():
    """weighting='self-tuning' is ``fit_graph(weighting='self-tuning')`` with the same
    neighbours, starts and generator; the graph and its model say so, predict(X_fit) ==
    labels_, and the weighting is a parameter as any other (get_params, clone)."""
    from sklearn.base import clone

    from kkmeans_cli.model.params import fit_rngs

    X, y = _moons(200, seed=3)
    est = KernelKMeans(2, kernel="knn", n_neighbors=12, weighting="self-tuning", n_init=3,
                       random_state=0).fit(X)
    _, rng = fit_rngs(0)
    ref = fit_graph(X, 2, n_neighbors=12, weighting="self-tuning", n_init=3, random_state=rng,
                    n_threads=1)
    np.testing.assert_array_equal(est.labels_, ref.labels)
    assert est.inertia_ == ref.objective and est.ncut_ == ref.ncut
    np.testing.assert_array_equal(est.cluster_weights_, ref.sums.vol)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    assert est.fit_stats_["graph"]["weighting"] == "self-tuning"
    assert est.graph_model_.weighting == "self-tuning" and est.graph_model_.scales is not None
    connectivity = KernelKMeans(2, kernel="knn", n_neighbors=12, n_init=3,
                                random_state=0).fit(X)
    assert connectivity.get_params()["weighting"] == "connectivity"
    assert connectivity.fit_stats_["graph"]["weighting"] == "connectivity"
    assert connectivity.ncut_ != est.ncut_  # another graph
    again = clone(est)
    assert again.get_params() == est.get_params() and again.weighting == "self-tuning"
    np.testing.assert_array_equal(again.fit(X).labels_, est.labels_)


def test_self_tuning_model_file_and_sweep(tmp_path):
    """A self-tuning model file keeps its weighting and scales: loaded, it predicts the
    training points as labels_ and new points as the estimator. A sweep with the weighting
    builds its graph with it: every k's labels are the fit's."""
    from kkmeans_cli.model.sweep import sweep

    X, _ = _moons(200, seed=4)
    est = KernelKMeans(2, kernel="knn", n_neighbors=9, weighting="self-tuning", n_init=2,
                       random_state=0).fit(X)
    _save(est, tmp_path / "m.npz")
    loaded = load_model(tmp_path / "m.npz")
    assert loaded.meta["graph"]["weighting"] == "self-tuning"
    model = loaded.result.graph.model
    assert model.weighting == "self-tuning"
    np.testing.assert_array_equal(model.scales, est.graph_model_.scales)
    loaded_est = loaded.estimator
    assert loaded_est.weighting == "self-tuning" and loaded_est.n_neighbors == 9
    np.testing.assert_array_equal(loaded_est.predict(X), est.labels_)
    new, _ = _moons(50, seed=9)
    np.testing.assert_array_equal(loaded_est.predict(new), est.predict(new))
    np.testing.assert_array_equal(loaded_est.transform(new), est.transform(new))

    res = sweep(X, [2, 3], kernel="knn", n_neighbors=9, weighting="self-tuning",
                random_state=3, refit_best=True)
    assert res.graph.weighting == "self-tuning"
    for row, labels in zip(res.rows, res.labels):
        fit = KernelKMeans(row["k"], n_neighbors=9, weighting="self-tuning",
                           random_state=3).fit(X)
        np.testing.assert_array_equal(labels, fit.labels_)
        assert row["objective"] == fit.inertia_
    assert res.best_estimator.weighting == "self-tuning"


def test_weighting_belongs_to_knn():
    """'self-tuning' with a dense kernel is refused as n_neighbors is; the default,
    'connectivity', is what every other kernel has; a value not in the table is refused; the
    table is the engine's."""
    from kkmeans_cli import _options
    from kkmeans_cli.kernels.graph import WEIGHTINGS

    assert _options.WEIGHTINGS == WEIGHTINGS
    X, _ = blobs(n=30, k=3)
    with pytest.raises(InvalidParameterError,
                       match="weighting='self-tuning' sets the edge weights of the graph of "
                             "kernel='knn'; the rbf kernel builds no neighbour graph"):
        KernelKMeans(3, kernel="rbf", weighting="self-tuning").fit(X)
    KernelKMeans(3, kernel="rbf", weighting="connectivity", n_init=1).fit(X)
    for bad in ("gauss", "Self-Tuning", None, 1):
        with pytest.raises(InvalidParameterError, match="'weighting' parameter"):
            KernelKMeans(3, kernel="knn", weighting=bad).fit(X)


def test_unequal_weights_with_knn_name_the_weights_file(tmp_path):
    X, _ = blobs(n=30, k=3)
    write_csv(tmp_path / "x.csv", X)
    np.savetxt(tmp_path / "w.txt", np.arange(1.0, 31.0))
    np.savetxt(tmp_path / "same.txt", np.full(30, 2.0))
    result = run(["fit", tmp_path / "x.csv", "-k", "3", "--weights", tmp_path / "w.txt",
                  "-o", tmp_path / "m.npz"])
    assert_one_error_line(result, f"--weights {tmp_path / 'w.txt'}: must be the same for "
                                  f"every point with --kernel knn (a graph fit weighs points "
                                  f"by their degrees); give equal weights or none", code=1)
    assert sorted(os.listdir(tmp_path)) == ["same.txt", "w.txt", "x.csv"]
    same = run(["fit", tmp_path / "x.csv", "-k", "3", "--weights", tmp_path / "same.txt",
                "--no-model", "--seed", "1"])
    assert same.exit_code == 0
    assert same.stdout == run(["fit", tmp_path / "x.csv", "-k", "3", "--no-model", "--seed",
                               "1"]).stdout


def test_knn_weights_and_distinct_points():
    X, _ = blobs(n=30, k=3)
    same = KernelKMeans(3, kernel="knn", random_state=0, n_init=2)
    np.testing.assert_array_equal(same.fit(X, sample_weight=np.full(30, 2.0)).labels_,
                                  same.fit(X).labels_)
    with pytest.raises(ValueError, match="sample_weight must be the same for every point"):
        same.fit(X, sample_weight=np.arange(1.0, 31.0))
    with pytest.raises(ValueError, match="distinct points"):
        KernelKMeans(4, kernel="knn").fit(np.repeat(X[:3], 10, axis=0))
    with pytest.raises(ValueError, match="NaN"):
        KernelKMeans(2, kernel="knn").fit(np.where(np.eye(30, 2) > 0, np.nan, X))


# -- the model file -----------------------------------------------------------------------------
def _save(est, path):
    from kkmeans_cli.io.scaling import Scaler
    from kkmeans_cli.model.model_file import model_meta, save_model

    with open(path, "wb") as handle:
        save_model(handle, est, Scaler("none"), model_meta(est, Scaler("none")))


def test_knn_model_file_round_trip(tmp_path):
    """Saved and loaded with allow_pickle=False: every array of the GraphModel equal, and the
    loaded model predicts the training points as labels_ and new points as the estimator."""
    X, _ = _moons(200, seed=4)
    X = np.vstack([X, X[:4]])
    est = KernelKMeans(2, kernel="knn", n_neighbors=9, n_init=2, random_state=0).fit(X)
    _save(est, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        assert {"graph_nodes", "graph_counts", "graph_node_labels", "graph_degrees",
                "graph_vol", "graph_links"} <= set(archive.files)
        assert "X_fit" not in archive.files
    loaded = load_model(tmp_path / "m.npz")
    model, again = est.graph_model_, loaded.result.graph.model
    for name, value in model.arrays().items():
        np.testing.assert_array_equal(again.arrays()[name], value)
    assert (again.sigma, again.n_neighbors, again.weighting) == (model.sigma, 9, "connectivity")
    assert loaded.meta["graph"]["n_nodes"] == 200 and loaded.meta["objective"] == "ncut"
    new, _ = _moons(50, seed=9)
    loaded_est = loaded.estimator
    np.testing.assert_array_equal(loaded_est.predict(X), est.labels_)
    np.testing.assert_array_equal(loaded_est.predict(new), est.predict(new))
    np.testing.assert_array_equal(loaded_est.transform(new), est.transform(new))
    assert loaded_est.ncut_ == est.ncut_ and loaded_est.n_neighbors == 9


def test_knn_model_file_checks(tmp_path):
    """A graph model whose arrays do not fit is refused with one ModelFileError."""
    from kkmeans_cli.errors import ModelFileError

    X, _ = blobs(n=40, k=2)
    est = KernelKMeans(2, kernel="knn", n_init=2, random_state=0).fit(X)
    _save(est, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        arrays = dict(archive)
    bad = dict(arrays, graph_node_labels=np.full(40, 5, dtype=np.int32))
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ModelFileError, match="graph_node_labels"):
        load_model(tmp_path / "bad.npz")
    missing = {key: value for key, value in arrays.items() if key != "graph_degrees"}
    np.savez(tmp_path / "missing.npz", **missing)
    with pytest.raises(ModelFileError, match="graph_degrees"):
        load_model(tmp_path / "missing.npz")
    # finite nodes whose distances overflow: refused as fit refuses such points (predict
    # ended in an IndexError of the neighbour search)
    huge = dict(arrays, graph_nodes=arrays["graph_nodes"] * 1e306)
    np.savez(tmp_path / "huge.npz", **huge)
    with pytest.raises(ModelFileError, match=r"'graph_nodes' row \d+, column \d+: the value "
                                             r".* is too large for floating point: 4·‖x‖² "
                                             r"must stay below 1\.8e\+308"):
        load_model(tmp_path / "huge.npz")
    write_csv(tmp_path / "x.csv", X[:5])
    result = run(["predict", tmp_path / "huge.npz", tmp_path / "x.csv"])
    assert result.exit_code == 1 and result.stdout == ""
    line = assert_one_error_line(result, f"{tmp_path / 'huge.npz'}: corrupt model: "
                                         f"'graph_nodes' row ", "is too large for floating point")
    assert "rescale the data" not in line
    # volumes and links that do not fit the degrees and labels, more neighbours than points:
    # predict divided by a zero volume (every point in cluster 0, exit 0)
    for change, message in [
            ({"graph_vol": np.zeros(2)}, "'graph_vol' must be the sums of the degrees"),
            ({"graph_vol": arrays["graph_vol"] * 2}, "'graph_vol' must be the sums"),
            ({"graph_links": arrays["graph_vol"] * 1.5}, "'graph_links' must lie between 0"),
            ({"graph_links": -arrays["graph_links"]}, "'graph_links' must lie between 0")]:
        np.savez(tmp_path / "bad.npz", **dict(arrays, **change))
        with pytest.raises(ModelFileError, match=message):
            load_model(tmp_path / "bad.npz")
        result = run(["predict", tmp_path / "bad.npz", tmp_path / "x.csv", "--labels",
                      tmp_path / "out.txt"])
        assert result.exit_code == 1 and result.stdout == ""
        assert_one_error_line(result, f"{tmp_path / 'bad.npz'}: corrupt model: ", message)
        assert not (tmp_path / "out.txt").exists()
    meta = json.loads(str(arrays["meta"]))
    meta["graph"]["n_neighbors"] = 5000
    np.savez(tmp_path / "many.npz", **dict(arrays, meta=np.array(json.dumps(meta))))
    with pytest.raises(ModelFileError, match=r"'n_neighbors' \(5000\) must not exceed the 40 "):
        load_model(tmp_path / "many.npz")
    # meta that info shows (it ended in an unexpected TypeError or ValueError naming no file,
    # while predict read the model)
    for where, key, value, message in [
            ("optima", "start_kinds", 5, "meta 'optima.start_kinds' must be a list of strings"),
            ("optima", "start_kinds", ["spectral", 2], "'optima.start_kinds' must be a list"),
            ("optima", "best_start", 3, "meta 'optima.best_start' must be a string"),
            ("graph", "bridges", "x", "meta 'graph.bridges' must be an integer from 0 to n"),
            ("graph", "n_duplicates", -1, "meta 'graph.n_duplicates' must be an integer"),
            ("graph", "n_points", 41.0, "meta 'graph.n_points' must be n = 40"),
            ("graph", "n_points", 39, "meta 'graph.n_points' must be n = 40, the training")]:
        changed = json.loads(str(arrays["meta"]))
        changed[where][key] = value
        np.savez(tmp_path / "shown.npz", **dict(arrays, meta=np.array(json.dumps(changed))))
        for command in (["info"], ["predict"]):
            result = run(command + [tmp_path / "shown.npz"]
                         + ([tmp_path / "x.csv"] if command == ["predict"] else []))
            assert result.exit_code == 1 and result.stdout == ""
            assert_one_error_line(result, f"{tmp_path / 'shown.npz'}: corrupt model: ", message)


def _with_meta(arrays, change):
    meta = json.loads(str(arrays["meta"]))
    change(meta)
    return dict(arrays, meta=np.array(json.dumps(meta)))


def test_graph_models_whose_sigma_scales_or_sums_do_not_fit_are_refused(tmp_path):
    """Entries predict reads that were not checked: σ of 10⁶ or of 0.5 beside inner sums of
    another σ (every point took one cluster), self-tuned scales of 0 ("divide by zero", every
    point one cluster) or below, inner sums times 10³⁰⁰, a negative inertia; meta 'graph'
    null (a precomputed-graph model then predicted as a dense one) or deleted (said to miss
    'degrees'). Each refused by predict and info, one line, exit 1, nothing written; the
    model itself is read."""
    X, _ = blobs(n=60, k=3)
    write_csv(tmp_path / "x.csv", X[:5])
    models = {}
    for weighting in ("connectivity", "self-tuning"):
        est = KernelKMeans(3, weighting=weighting, whiten=False, random_state=0).fit(X)
        _save(est, tmp_path / "m.npz")
        load_model(tmp_path / "m.npz")
        with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
            models[weighting] = dict(archive)
    plain, tuned = models["connectivity"], models["self-tuning"]
    cases = [
        (_with_meta(plain, lambda m: m["graph"].update(sigma=1e6)),
         "'sigma' must be a number from 0 to 1"),
        (_with_meta(plain, lambda m: m["graph"].update(sigma=-0.1)),
         "'sigma' must be a number from 0 to 1"),
        (_with_meta(plain, lambda m: m["graph"].update(sigma=0.5 * m["graph"]["sigma"])),
         "'inner_sums' must be σ·vol(c) + links(c, c)"),
        (dict(plain, inner_sums=plain["inner_sums"] * 1e300),
         "'inner_sums' must be σ·vol(c) + links(c, c)"),
        (dict(plain, inertia=np.array(-5.0)), "'inertia' of a graph fit"),
        # integers are read as numbers, and checked as such
        (dict(plain, inertia=np.array(-5)), "'inertia' of a graph fit"),
        (dict(plain, inner_sums=np.array([10 ** 12, 760, 758])),
         "'inner_sums' must be σ·vol(c) + links(c, c)"),
        (dict(tuned, graph_scales=tuned["graph_scales"] * 0), "'graph_scales' must be positive"),
        (dict(tuned, graph_scales=-tuned["graph_scales"]), "'graph_scales' must be positive"),
        (_with_meta(plain, lambda m: m.update(graph=None)), "meta 'graph' must be an object"),
        (_with_meta(plain, lambda m: m.pop("graph")),
         "meta 'graph' (needed by kernel 'knn') is missing"),
        # a shape's free size was shown as the placeholder ('r',)
        (dict(plain, graph_counts=plain["graph_counts"][None]),
         "'graph_counts' has shape (1, 60), expected (r,) from meta (n = 60, d = 2, k = 3, r "
         "any size from 1 to 60)")]
    for arrays, message in cases:
        np.savez(tmp_path / "bad.npz", **arrays)
        for command in (["info", tmp_path / "bad.npz"],
                        ["predict", tmp_path / "bad.npz", tmp_path / "x.csv", "--labels",
                         tmp_path / "out.txt"]):
            result = run(command)
            assert result.exit_code == 1 and result.stdout == "", (message, result.stderr)
            assert_one_error_line(result, f"{tmp_path / 'bad.npz'}: corrupt model: ", message)
            assert not (tmp_path / "out.txt").exists()
    # a model of a graph given as DATA: meta 'graph' null is refused, 'weighting' absent is
    # read as 'precomputed' (info ended in "unexpected KeyError"), and so is a model without
    # the optional 'n_init' (info's own KeyError)
    sparse.save_npz(tmp_path / "g.npz", sparse.block_diag([np.ones((3, 3))] * 3).tocsr())
    assert run(["fit", tmp_path / "g.npz", "--kernel", "precomputed", "-k", "3", "-o",
                tmp_path / "gm.npz", "-q"]).exit_code == 0
    with np.load(tmp_path / "gm.npz", allow_pickle=False) as archive:
        given = dict(archive)
    np.savez(tmp_path / "bad.npz", **_with_meta(given, lambda m: m.update(graph=None)))
    result = run(["info", tmp_path / "bad.npz"])
    assert result.exit_code == 1
    assert_one_error_line(result, f"{tmp_path / 'bad.npz'}: corrupt model: meta 'graph' must "
                                  f"be an object")
    for arrays in (_with_meta(given, lambda m: m["graph"].pop("weighting")),
                   _with_meta(given, lambda m: m.pop("n_init")),
                   _with_meta(plain, lambda m: m.pop("n_init"))):
        np.savez(tmp_path / "old.npz", **arrays)
        result = run(["info", tmp_path / "old.npz"])
        assert result.exit_code == 0, result.stderr
        assert "graph:" in result.stdout and "unexpected" not in result.stderr


def test_an_objective_of_a_cluster_a_node_is_saved_as_zero_and_read_back(tmp_path):
    """k = the distinct points: the objective's two sums of the same terms, added in other
    orders, rounded to −4.4·10⁻¹⁶, which the model check of a graph fit's inertia refused
    (fit exited 0, info and predict 1): it is kept at least 0, as the cut is, and a file
    holding such a rounding is read."""
    rows = "1,1\n1,1\n2,2\n3,1\n3,1\n0,5\n"
    (tmp_path / "d6.csv").write_text(rows)
    for seed in range(4):
        fit = run(["fit", tmp_path / "d6.csv", "-k", "4", "--seed", str(seed), "-o",
                   tmp_path / "m.npz", "-q"])
        assert fit.exit_code == 0, fit.stderr
        for command in (["info", tmp_path / "m.npz"],
                        ["predict", tmp_path / "m.npz", tmp_path / "d6.csv"]):
            result = run(command)
            assert result.exit_code == 0, result.stderr
    rng = np.random.default_rng(0)
    for trial in range(60):
        X = rng.normal(size=(int(rng.integers(3, 9)), 2))
        assert KernelKMeans(len(X), random_state=trial).fit(X).inertia_ >= 0.0
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        arrays = dict(archive)
    np.savez(tmp_path / "old.npz", **dict(arrays, inertia=np.array(-4.4e-16)))
    assert run(["info", tmp_path / "old.npz"]).exit_code == 0


def test_a_cut_of_nothing_is_saved_as_zero_and_read_back(tmp_path):
    """Two blobs 50 apart, self-tuning weights: their cut of nothing rounded to −4·10⁻¹⁶ and
    the model file it was saved in was refused by predict ('ncut' must be from 0 to k). The
    cut is now at least 0; a file written before, holding the rounded value, is read as 0,
    while a clearly negative cut is still refused."""
    from kkmeans_cli.errors import ModelFileError

    for seed in (3, 11):     # −8.9·10⁻¹⁶ and −4.4·10⁻¹⁶ before
        rng = np.random.default_rng(seed)
        X = np.r_[rng.normal(0, 1, (100, 2)), rng.normal(50, 1, (100, 2))]
        assert KernelKMeans(2, weighting="self-tuning").fit(X).ncut_ == 0.0
    write_csv(tmp_path / "x.csv", X)
    result = run(["fit", tmp_path / "x.csv", "-k", "2", "--weighting", "self-tuning", "-o",
                  tmp_path / "m.npz", "--quiet"])
    assert result.exit_code == 0, result.stderr
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        arrays = dict(archive)
    meta = json.loads(str(arrays["meta"]))
    assert 0.0 <= meta["ncut"] < 1e-12
    labels = np.loadtxt(io.StringIO(result.stdout), dtype=int)
    predicted = run(["predict", tmp_path / "m.npz", tmp_path / "x.csv", "--quiet"])
    assert predicted.exit_code == 0, predicted.stderr
    np.testing.assert_array_equal(np.loadtxt(io.StringIO(predicted.stdout), dtype=int), labels)
    for value, readable in ((-4.440892098500626e-16, True), (-1e-3, False)):
        meta["ncut"] = value
        np.savez(tmp_path / "old.npz", **dict(arrays, meta=np.array(json.dumps(meta))))
        if readable:
            assert load_model(tmp_path / "old.npz").result.graph.ncut == 0.0
            shown = run(["info", tmp_path / "old.npz", "--json"])
            assert shown.exit_code == 0, shown.stderr
            assert json.loads(shown.stdout)["ncut"] == 0.0
            assert "ncut = 0 " in run(["info", tmp_path / "old.npz"]).stdout
        else:
            with pytest.raises(ModelFileError, match="meta 'ncut' must be a number from 0 to k"):
                load_model(tmp_path / "old.npz")


def test_sparse_precomputed_model_file(tmp_path):
    est = KernelKMeans(2, kernel="precomputed", random_state=0).fit(_blocks([4, 5]))
    _save(est, tmp_path / "g.npz")
    loaded = load_model(tmp_path / "g.npz")
    assert loaded.meta["graph"]["weighting"] == "precomputed"
    np.testing.assert_array_equal(loaded.result.labels, est.labels_)
    with pytest.raises(ValueError, match="no coordinates"):
        loaded.estimator.predict(np.ones((1, 9)))


# -- the command line ---------------------------------------------------------------------------
@pytest.fixture
def moons_csv(tmp_path):
    X, y = _moons(240, seed=7)
    write_csv(tmp_path / "moons.csv", X, fmt="%.6f")
    return tmp_path


def test_cli_fit_predict_info_knn(moons_csv):
    """fit --kernel knn through CliRunner: labels on stdout as the estimator's, the report
    names the graph, predict of DATA gives the labels, info describes the graph."""
    folder = moons_csv
    fit = run(["fit", folder / "moons.csv", "-k", "2", "--kernel", "knn", "--n-neighbors",
               "12", "--n-init", "3", "--seed", "4", "-o", folder / "m.npz",
               "--summary", folder / "s.json"])
    assert fit.exit_code == 0, fit.stderr
    assert "--n-init counts the starts of --init spectral" in fit.stderr  # warned, not used
    X = np.loadtxt(folder / "moons.csv", delimiter=",", skiprows=1)
    # --memory-limit plans the graph too (test_large_data.py): a generous one changes nothing
    limited = run(["fit", folder / "moons.csv", "-k", "2", "--n-neighbors", "12", "--seed", "4",
                   "--memory-limit", "1G", "--no-model"])
    assert limited.exit_code == 0, limited.stderr
    assert "warning" not in limited.stderr
    assert limited.stdout == fit.stdout
    est = KernelKMeans(2, kernel="knn", n_neighbors=12, n_init=3, random_state=4).fit(X)
    np.testing.assert_array_equal(labels_of(fit.stdout), est.labels_)
    assert "12 neighbours (connectivity), 240 nodes" in fit.stderr
    assert "normalized cut" in fit.stderr and "nnz" in fit.stderr
    summary = json.loads((folder / "s.json").read_text())
    assert summary["kernel"] == "knn" and summary["graph"]["n_neighbors"] == 12
    assert summary["ncut"] == est.ncut_
    predicted = run(["predict", folder / "m.npz", folder / "moons.csv"])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == fit.stdout
    info = run(["info", folder / "m.npz"])
    assert info.exit_code == 0, info.stderr
    n_comp = est.fit_stats_["graph"]["n_components"]
    assert (f"12 neighbours (connectivity), 240 nodes, {n_comp} component"
            in info.stdout)
    shown = json.loads(run(["info", folder / "m.npz", "--json"]).stdout)
    assert shown["graph"]["nnz"] == est.fit_stats_["graph"]["nnz"]
    # --json too: no n_init (it played no part), the starts that ran in its place
    assert "n_init" not in shown and shown["optima"]["start_kinds"] == \
        est.fit_stats_["start_kinds"]
    # the fit line counts the starts that ran (the fit report's), not the unused --n-init
    kinds = est.fit_stats_["start_kinds"]
    fit_line = next(line for line in info.stdout.splitlines() if line.startswith("fit:"))
    assert f"starts={len(kinds)} (" in fit_line
    assert f"best {est.fit_stats_['best_start']})" in fit_line
    assert "n_init" not in fit_line and "--n-init" not in info.stdout
    assert f"restarts:      {len(kinds)} " in fit.stderr


def test_cli_info_of_spectral_graph_starts_keeps_n_init(moons_csv):
    """With --init spectral --n-init counts the graph's starts, so info keeps it."""
    folder = moons_csv
    fit = run(["fit", folder / "moons.csv", "-k", "2", "--init", "spectral", "--n-init", "3",
               "-o", folder / "s.npz"])
    assert fit.exit_code == 0, fit.stderr
    info = run(["info", folder / "s.npz"])
    assert info.exit_code == 0, info.stderr
    assert "--n-init=3" in info.stdout
    fit_line = next(line for line in info.stdout.splitlines() if line.startswith("fit:"))
    assert "starts=3 (3 spectral" in fit_line, fit_line
    assert json.loads(run(["info", folder / "s.npz", "--json"]).stdout)["n_init"] == 3


def test_cli_graph_row_names_the_neighbours_each_node_has(tmp_path):
    """The graph row says the neighbours a node has, not more than there are nodes: five
    copies of one point are one node, its only neighbour itself (the default rule's 2 capped
    by the node). An --n-neighbors of at least the distinct points (8 on three distinct
    points of ten rows) would link every node to every other: refused as at least the rows
    are (one line, exit 1, nothing written). The model keeps the setting, and info says the
    same as fit."""
    write_csv(tmp_path / "five.csv", np.tile([[1.0, 2.0]], (5, 1)))
    fit = run(["fit", tmp_path / "five.csv", "-k", "1", "-o", tmp_path / "five.npz"])
    assert fit.exit_code == 0, fit.stderr
    assert labels_of(fit.stdout).tolist() == [0] * 5
    row = ("graph:         1 neighbour (connectivity; 2 set, capped by the 1 node), 1 node "
           "(4 repeated points merged), 1 component, nnz 1, normalized cut 0\n")
    assert row in fit.stderr and "2 neighbours" not in fit.stderr
    info = run(["info", tmp_path / "five.npz"])
    assert info.exit_code == 0, info.stderr
    assert "1 neighbour (connectivity; 2 set, capped by the 1 node), 1 node" in info.stdout
    X = np.repeat([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [4, 2, 4], axis=0)
    write_csv(tmp_path / "three.csv", X)
    before = sorted(os.listdir(tmp_path))
    for m in (3, 8):
        for args in (["fit", tmp_path / "three.csv", "-k", "2", "--n-neighbors", str(m),
                      "-o", tmp_path / "m.npz", "--labels", tmp_path / "l.txt"],
                     ["sweep", tmp_path / "three.csv", "--k", "2..3", "--n-neighbors", str(m),
                      "--table", tmp_path / "t.csv"]):
            result = run(args)
            assert result.exit_code == 1
            assert result.stderr == (
                f"kkmeans: error: {tmp_path / 'three.csv'}: --n-neighbors {m} must be less "
                f"than the number of distinct points (3 of 10 rows): each point's neighbours "
                f"count itself, so 3 or more would link every point to every other\n")
            assert sorted(os.listdir(tmp_path)) == before
    with pytest.raises(ValueError, match=r"^n_neighbors=8 must be less than the number of "
                       r"distinct points \(3 of 10 rows\)"):
        KernelKMeans(2, n_neighbors=8, random_state=0).fit(X)
    # below the nodes nothing is capped or said (one fit: the default's refit, made and
    # turned down here, would add "whitened refit not kept")
    fit = run(["fit", tmp_path / "three.csv", "-k", "2", "--n-neighbors", "2", "--no-model",
               "--no-whiten"])
    assert "2 neighbours (connectivity), 3 nodes" in fit.stderr and "capped" not in fit.stderr


def test_a_model_of_one_row_is_read_back_by_info_and_predict(tmp_path):
    """One row (in one column or two): the default rule's 2 neighbours are capped by the one
    node, and the model that keeps the setting is read back by info and predict (the row
    gets its label, a new point the one cluster's); more neighbours than the rows in a model
    file is still refused as corrupt."""
    for name, row in (("one.csv", "1,2\n"), ("single.csv", "5\n")):
        (tmp_path / name).write_text(row)
        model = tmp_path / (name + ".npz")
        fit = run(["fit", tmp_path / name, "-k", "1", "-o", model])
        assert fit.exit_code == 0, fit.stderr
        assert "1 neighbour (connectivity; 2 set, capped by the 1 node), 1 node" in fit.stderr
        info = run(["info", model])
        assert info.exit_code == 0, info.stderr
        assert "1 neighbour (connectivity; 2 set, capped by the 1 node)" in info.stdout
        predicted = run(["predict", model, tmp_path / name])
        assert predicted.exit_code == 0, predicted.stderr
        assert labels_of(predicted.stdout).tolist() == [0]
        (tmp_path / "new.csv").write_text(row.replace("1", "3").replace("5", "7") + row)
        predicted = run(["predict", model, tmp_path / "new.csv"])
        assert predicted.exit_code == 0, predicted.stderr
        assert labels_of(predicted.stdout).tolist() == [0, 0]
    # a forged setting above both the rows and the rule's least: corrupt, one line, exit 1
    with np.load(tmp_path / "one.csv.npz") as model:
        arrays = {key: model[key] for key in model.files}
    meta = json.loads(str(arrays["meta"]))
    assert meta["graph"]["n_neighbors"] == 2
    meta["graph"]["n_neighbors"] = 3
    np.savez(tmp_path / "forged.npz", **dict(arrays, meta=np.array(json.dumps(meta))))
    info = run(["info", tmp_path / "forged.npz"])
    assert info.exit_code == 1
    assert info.stderr.startswith("kkmeans: error: ") and \
        "'n_neighbors' (3) must not exceed the 1 training points" in info.stderr


def test_cli_knn_as_subprocesses_and_config(moons_csv):
    """The real command: fit with a YAML config (kernel: knn, n_neighbors:), predict of the
    training rows is the labels (through the model file), on 1 and 2 threads alike."""
    folder = moons_csv
    (folder / "run.yaml").write_text("kernel: knn\nn_neighbors: 10\n")
    outs = []
    for threads in ("1", "2"):
        fit = run_process(["fit", "moons.csv", "-k", "2", "--config", "run.yaml", "--threads",
                           threads, "-o", f"m{threads}.npz", "-q"], cwd=folder)
        assert fit.returncode == 0 and fit.stderr == "", fit.stderr
        predicted = run_process(["predict", f"m{threads}.npz", "moons.csv"], cwd=folder)
        assert predicted.returncode == 0, predicted.stderr
        assert predicted.stdout == fit.stdout
        outs.append(fit.stdout)
    assert outs[0] == outs[1]
    assert load_model(folder / "m1.npz").result.graph.model.n_neighbors == 10


def test_cli_weighting_self_tuning(moons_csv):
    """--weighting self-tuning through CliRunner: the estimator's labels, the report's graph
    row names the weighting, predict through the model gives the labels, info and the sweep
    name it too."""
    folder = moons_csv
    fit = run(["fit", folder / "moons.csv", "-k", "2", "--weighting", "self-tuning",
               "--n-neighbors", "12", "--seed", "4", "-o", folder / "m.npz"])
    assert fit.exit_code == 0, fit.stderr
    X = np.loadtxt(folder / "moons.csv", delimiter=",", skiprows=1)
    est = KernelKMeans(2, n_neighbors=12, weighting="self-tuning", random_state=4).fit(X)
    np.testing.assert_array_equal(labels_of(fit.stdout), est.labels_)
    assert "graph:         12 neighbours (self-tuning), 240 nodes" in fit.stderr
    predicted = run(["predict", folder / "m.npz", folder / "moons.csv"])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == fit.stdout
    info = run(["info", folder / "m.npz"])
    assert "12 neighbours (self-tuning)" in info.stdout and "--weighting=self-tuning" in \
        info.stdout
    swept = run(["sweep", folder / "moons.csv", "--k", "2..3", "--weighting", "self-tuning",
                 "--n-neighbors", "12", "--seed", "4", "--table", folder / "t.csv"])
    assert swept.exit_code == 0, swept.stderr
    assert "12 neighbours (self-tuning)" in swept.stderr
    rbf = run(["fit", folder / "moons.csv", "-k", "2", "--kernel", "rbf", "-o",
               folder / "r.npz", "-q"])
    assert rbf.exit_code == 0 and "--weighting" not in run(["info", folder / "r.npz"]).stdout


def test_cli_weighting_as_subprocess_and_config(moons_csv):
    """The real command with a YAML config (weighting: self-tuning): its model is
    self-tuning and predicts the training rows as the labels; a flag wins over the key."""
    folder = moons_csv
    (folder / "run.yaml").write_text("kernel: knn\nweighting: self-tuning\n")
    fit = run_process(["fit", "moons.csv", "-k", "2", "--config", "run.yaml", "-o", "m.npz",
                       "-q"], cwd=folder)
    assert fit.returncode == 0 and fit.stderr == "", fit.stderr
    model = load_model(folder / "m.npz").result.graph.model
    assert model.weighting == "self-tuning"
    predicted = run_process(["predict", "m.npz", "moons.csv"], cwd=folder)
    assert predicted.returncode == 0, predicted.stderr
    assert predicted.stdout == fit.stdout
    X = np.loadtxt(folder / "moons.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(labels_of(fit.stdout),
                                  KernelKMeans(2, weighting="self-tuning",
                                               random_state=0).fit(X).labels_)
    flag = run(["fit", folder / "moons.csv", "-k", "2", "--config", folder / "run.yaml",
                "--weighting", "connectivity", "-o", folder / "c.npz", "-q"])
    assert flag.exit_code == 0, flag.stderr
    assert load_model(folder / "c.npz").result.graph.model.weighting == "connectivity"


@pytest.mark.parametrize("args, code, needles", [
    (["--n-neighbors", "0"], 2, ["--n-neighbors", "0"]),
    (["--n-neighbors", "-3"], 2, ["--n-neighbors", "-3"]),
    (["--n-neighbors", "2.5"], 2, ["--n-neighbors", "2.5"]),
    (["--n-neighbors", "240"], 1, ["moons.csv", "--n-neighbors 240", "less than the number"]),
    (["--weighting", "gauss"], 2, ["--weighting", "gauss", "connectivity", "self-tuning"]),
    (["--kernel", "rbf", "--weighting", "self-tuning"], 2,
     ["--weighting self-tuning", "--kernel knn", "the rbf kernel builds no neighbour graph"]),
    (["-k", "300"], 1, ["moons.csv", "k = 300"]),
    (["--cluster", "local:1"], 2, ["--cluster", "--kernel knn", "one process"]),
    (["--scheduler", "tcp://127.0.0.1:9"], 2, ["--scheduler", "--kernel knn"]),
    (["--approx", "nystroem"], 2, ["--approx nystroem", "--kernel knn"]),
    (["--storage", "blocked"], 2, ["--storage blocked", "--kernel knn"]),
    (["--gamma", "0.5"], 2, ["--gamma 0.5", "--kernel knn"]),
    (["--algorithm", "elkan"], 2, ["--algorithm elkan", "--kernel knn"]),
    (["--silhouette"], 2, ["--silhouette", "--kernel knn"]),
    (["--init", "random"], 2, ["--init random", "--kernel knn"]),
])
def test_cli_knn_bad_options(moons_csv, args, code, needles):
    """Each refusal is one error line with the exit code of its kind, and the existing
    output is left as it was (no model, no temporary file)."""
    folder = moons_csv
    (folder / "out.npz").write_bytes(OLD)
    before = listing(folder)
    argv = ["fit", folder / "moons.csv", "--kernel", "knn", "-o", folder / "out.npz"]
    argv += args if args[0] == "-k" else ["-k", "2", *args]
    assert_one_error_line(run(argv), *needles, code=code)
    assert listing(folder) == before and (folder / "out.npz").read_bytes() == OLD


def test_cli_knn_bad_data(tmp_path):
    """Too few distinct points for k and NaN in DATA: one error line naming the file, exit 1,
    nothing written."""
    write_csv(tmp_path / "dup.csv", np.repeat([[1.0, 2.0], [3.0, 4.0]], 5, axis=0))
    result = run(["fit", tmp_path / "dup.csv", "-k", "3", "--kernel", "knn", "-o",
                  tmp_path / "m.npz"])
    assert_one_error_line(result, "dup.csv", "2 distinct points", code=1)
    (tmp_path / "nan.csv").write_text("x,y\n1,2\nnan,3\n4,5\n6,7\n")
    result = run(["fit", tmp_path / "nan.csv", "-k", "2", "--kernel", "knn", "-o",
                  tmp_path / "m.npz"])
    assert_one_error_line(result, "nan.csv", "line 3", code=1)
    assert listing(tmp_path) == ["dup.csv", "nan.csv"]


def test_cli_n_neighbors_needs_knn(moons_csv):
    result = run(["fit", moons_csv / "moons.csv", "-k", "2", "--kernel", "rbf",
                  "--n-neighbors", "5", "--no-model"])
    assert_one_error_line(result, "--n-neighbors 5", "--kernel knn", code=2)


@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_cli_weighting_refusals_write_nothing(moons_csv, command):
    """--weighting self-tuning with a dense kernel, and a weighting not in the table as a
    flag or a YAML key: one error line, exit 2, no file written."""
    folder = moons_csv
    (folder / "bad.yaml").write_text("weighting: gauss\n")
    (folder / "rbf.yaml").write_text("kernel: rbf\nweighting: self-tuning\n")
    before = listing(folder)
    k = ["-k", "2"] if command == "fit" else ["--k", "2..3"]
    out = ["-o", folder / "m.npz"] if command == "fit" else ["--model", folder / "m.npz"]
    argv = [command, folder / "moons.csv", *k, *out]
    assert_one_error_line(run([*argv, "--kernel", "rbf", "--weighting", "self-tuning"]),
                          "--weighting self-tuning", "--kernel knn", "rbf", code=2)
    assert_one_error_line(run([*argv, "--weighting", "gauss"]), "--weighting", "gauss",
                          code=2)
    assert_one_error_line(run([*argv, "--config", folder / "bad.yaml"]), "bad.yaml",
                          "weighting", "gauss", code=2)
    assert_one_error_line(run([*argv, "--config", folder / "rbf.yaml"]),
                          "--weighting self-tuning", "--kernel knn", code=2)
    assert listing(folder) == before


# -- a sparse graph as DATA ---------------------------------------------------------------------
@pytest.fixture
def graph_files(tmp_path):
    """Three cliques joined by one weak edge, as .npz (scipy.sparse.save_npz) and .mtx."""
    from scipy import io as scipy_io

    A = _blocks([6, 6, 6]).tolil()
    A[0, 6] = A[6, 0] = 0.01
    A = A.tocsr()
    sparse.save_npz(tmp_path / "g.npz", A)
    scipy_io.mmwrite(str(tmp_path / "g.mtx"), A)
    return tmp_path, A


@pytest.mark.parametrize("name", ["g.npz", "g.mtx"])
def test_cli_fit_sparse_graph(graph_files, name):
    """A sparse affinity as DATA with --kernel precomputed is the estimator's graph fit; its
    model describes the graph and refuses to predict (exit 2, before DATA is read)."""
    folder, A = graph_files
    fit = run(["fit", folder / name, "-k", "3", "--kernel", "precomputed", "-o",
               folder / "m.npz"])
    assert fit.exit_code == 0, fit.stderr
    est = KernelKMeans(3, kernel="precomputed", random_state=0).fit(A)
    np.testing.assert_array_equal(labels_of(fit.stdout), est.labels_)
    assert "affinity given as DATA, 18 nodes" in fit.stderr
    info = run(["info", folder / "m.npz"])
    assert "affinity given as DATA, 18 nodes" in info.stdout
    refused = run(["predict", folder / "m.npz", folder / "nothing.csv"])
    assert_one_error_line(refused, "m.npz", "no coordinates", "fit the points with --kernel knn "
                          "to predict new ones", code=2)


def _edited(A, edit):
    M = A.tolil()
    edit(M)
    return M.tocsr()


@pytest.mark.parametrize("make, needles", [
    (lambda A: sparse.csr_matrix(np.ones((3, 4))), ["must be square"]),
    (lambda A: _edited(A, lambda M: M.__setitem__((0, 1), 5.0)), ["not symmetric", "row 0"]),
    (lambda A: _edited(A, lambda M: (M.__setitem__((0, 1), -1.0),
                                     M.__setitem__((1, 0), -1.0))), ["negative weight"]),
    (lambda A: _edited(A, lambda M: (M.__setitem__((0, 1), np.nan),
                                     M.__setitem__((1, 0), np.nan))), ["not a finite number"]),
    (lambda A: _edited(A, lambda M: (M.__setitem__((2, slice(None)), 0.0),
                                     M.__setitem__((slice(None), 2), 0.0))),
     ["row 2 has no positive weight"]),
])
def test_cli_bad_sparse_graph(graph_files, make, needles):
    """A sparse graph that is no affinity: one error line naming the file, exit 1, the
    existing output unchanged and nothing else written."""
    folder, A = graph_files
    sparse.save_npz(folder / "bad.npz", make(A))
    (folder / "out.npz").write_bytes(OLD)
    before = listing(folder)
    result = run(["fit", folder / "bad.npz", "-k", "2", "--kernel", "precomputed", "-o",
                  folder / "out.npz"])
    assert_one_error_line(result, "bad.npz", *needles, code=1)
    assert listing(folder) == before and (folder / "out.npz").read_bytes() == OLD


def test_cli_sparse_graph_refuses_row_options(graph_files):
    folder, _ = graph_files
    for extra, needle in ((["--columns", "0,1"], "--columns"),
                          (["--with-data"], "--with-data"),
                          (["--silhouette"], "--silhouette")):
        result = run(["fit", folder / "g.npz", "-k", "3", "--kernel", "precomputed",
                      "--no-model", *extra])
        assert_one_error_line(result, needle, code=2)


def test_cli_lanczos_failing_on_a_large_graph_is_one_error_line(tmp_path, monkeypatch):
    """SciPy's eigsh raising ArpackNoConvergence on a graph above the dense solver's 10,000
    nodes: sweep --metric eigengap and fit --init spectral end in one error line (exit 1),
    naming what needed the eigenvectors and the way out, and write nothing; no traceback."""
    import scipy.sparse.linalg
    from scipy.sparse.linalg import ArpackNoConvergence

    def fails(*args, **kwargs):
        raise ArpackNoConvergence("No convergence (105001 iterations, 1/4 eigenvectors "
                                  "converged)", np.empty(0), np.empty((0, 0)))

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", fails)
    write_csv(tmp_path / "big.csv", np.random.default_rng(0).uniform(size=(10_500, 2)))
    swept = run(["sweep", tmp_path / "big.csv", "--k", "2..3", "--metric", "eigengap",
                 "--table", tmp_path / "t.csv", "-o", tmp_path / "m.npz"])
    line = assert_one_error_line(
        swept, "big.csv: the eigengap: Lanczos did not converge to the 4 largest eigenvalues "
        "of the graph's normalized affinity D^-1/2 A D^-1/2 (10,500 nodes, more than the "
        "10,000 the dense solver takes; ARPACK error -1: No convergence (105001 iterations, "
        "1/4 eigenvectors converged)); choose k by another metric than the eigengap", code=1)
    assert line.endswith("eigengap")
    fit = run(["fit", tmp_path / "big.csv", "-k", "2", "--init", "spectral", "-o",
               tmp_path / "m.npz"])
    assert_one_error_line(fit, "big.csv: the spectral start: Lanczos did not converge to the 2 "
                          "largest eigenvalues", "the default starts (--init k-means++) need "
                          "no eigenvectors of a graph this large", code=1)
    assert listing(tmp_path) == ["big.csv"]


def test_cli_sweep_without_the_eigengap_when_lanczos_fails(tmp_path, monkeypatch):
    """A sweep that did not ask for the eigengap ('auto') and whose Lanczos fails above the
    dense limit (lowered to 600 nodes here) warns once, leaves the eigengap column NaN and
    says 'not computed', and chooses k as it would have."""
    import scipy.sparse.linalg
    from scipy.sparse.linalg import ArpackNoConvergence

    from kkmeans_cli.engine import graph_starts

    write_csv(tmp_path / "d.csv", np.random.default_rng(3).normal(size=(700, 2)))
    args = ["sweep", tmp_path / "d.csv", "--k", "2..3", "--metric", "silhouette",
            "--n-neighbors", "10", "--seed", "1"]
    ref = run(args + ["--table", tmp_path / "ref.csv"])
    assert ref.exit_code == 0, ref.stderr

    def fails(*args, **kwargs):
        raise ArpackNoConvergence("No convergence (7001 iterations, 0/4 eigenvectors "
                                  "converged)", np.empty(0), np.empty((0, 0)))

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", fails)
    monkeypatch.setattr(graph_starts, "DENSE_FALLBACK_MAX", 600)
    swept = run(args + ["--table", tmp_path / "t.csv"])
    assert swept.exit_code == 0, swept.stderr
    warnings = [line for line in swept.stderr.splitlines() if "warning" in line]
    assert warnings == ["kkmeans: warning: the eigengap: Lanczos did not converge to the 4 "
                        "largest eigenvalues of the graph's normalized affinity D^-1/2 A "
                        "D^-1/2 (700 nodes, more than the 600 the dense solver takes; ARPACK "
                        "error -1: No convergence (7001 iterations, 0/4 eigenvectors "
                        "converged)); the eigengap is not computed"]
    assert "eigengap:   not computed\n" in swept.stderr
    import csv

    from kkmeans_cli.model.sweep import graph_sweep

    rows = list(csv.DictReader((tmp_path / "t.csv").read_text().splitlines()))
    refs = list(csv.DictReader((tmp_path / "ref.csv").read_text().splitlines()))
    assert [r["eigengap"] for r in rows] == ["nan", "nan"]
    assert all(r["eigengap"] != "nan" for r in refs)
    # the fits are those of a sweep that never asked for the eigengap (the same failing
    # Lanczos sends their starts to the multilevel start)
    X = np.loadtxt(tmp_path / "d.csv", delimiter=",", skiprows=1)
    without = graph_sweep(X, [2, 3], metric="silhouette", eigengap=False, n_neighbors=10,
                          random_state=1, refit_best=False)
    assert [float(r["ncut"]) for r in rows] == [r["ncut"] for r in without.rows]
