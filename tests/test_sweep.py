"""The sweep over k, its CSV table and the plots."""
import csv
import io

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from kkmeans_cli import KernelKMeans
from kkmeans_cli.model.sweep import COLUMNS, choose_k, parse_ks, sweep, to_csv

PARAMS = dict(kernel="rbf", gamma="median", n_init=3, random_state=0, n_threads=2)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def blobs():
    centres = [[-6, -6], [-6, 6], [6, -6], [6, 6]]
    X, y = make_blobs(400, centers=centres, cluster_std=1.0, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def result(blobs):
    X, _ = blobs
    calls = []
    res = sweep(X, "2..7", metric="silhouette", progress=lambda *a: calls.append(a), **PARAMS)
    res.calls = calls
    return res


def test_sweep_picks_four(result):
    assert result.best_k == 4
    assert [r["k"] for r in result.rows] == [2, 3, 4, 5, 6, 7]
    assert all(list(r) == list(COLUMNS) for r in result.rows)
    assert [c[0] for c in result.calls] == [1, 2, 3, 4, 5, 6]
    assert all(c[1] == 6 for c in result.calls)
    assert result.silhouette_n_used == [400] * 6


@pytest.mark.parametrize("metric", ["simplified_silhouette", "calinski_harabasz",
                                    "davies_bouldin", "inertia"])
def test_every_metric_picks_four(blobs, metric):
    X, _ = blobs
    assert sweep(X, [2, 3, 4, 5, 6, 7], metric=metric, **PARAMS).best_k == 4


def test_rows_parse_back_as_csv(result):
    text = to_csv(result.rows)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0] == ",".join(COLUMNS)
    assert len(parsed) == len(result.rows)
    for row, back in zip(result.rows, parsed):
        assert int(back["k"]) == row["k"] and int(back["n_iter"]) == row["n_iter"]
        for col in COLUMNS[1:-2]:
            assert float(back[col]) == row[col]  # repr round-trips exactly
    buf = io.StringIO()
    result.to_csv(buf)
    assert buf.getvalue() == text


def test_best_estimator_predicts_like_direct_fit(blobs, result):
    X, _ = blobs
    direct = KernelKMeans(result.best_k, **{"kernel": "rbf", **PARAMS}).fit(X)
    best = result.best_estimator
    assert best.n_clusters == result.best_k
    assert np.array_equal(best.labels_, direct.labels_)
    assert best.inertia_ == pytest.approx(direct.inertia_, rel=1e-12)
    Xnew = np.random.default_rng(1).uniform(-9, 9, size=(50, 2))
    assert np.array_equal(best.predict(Xnew), direct.predict(Xnew))


def test_parse_ks():
    assert parse_ks("2..5") == [2, 3, 4, 5]
    assert parse_ks("2,3,5") == [2, 3, 5]
    assert parse_ks("8, 2..3") == [2, 3, 8]
    assert parse_ks(" 2 .. 4 , 8 ") == [2, 3, 4, 8]
    for bad in ("", "a", "5..2", "2..", "0"):
        with pytest.raises(ValueError):
            parse_ks(bad)
    for bad in ("2 3", "1 0", "2..1 0"):    # a space inside a number: not 23, 10 or 2..10
        with pytest.raises(ValueError, match=f"invalid k '{bad}'"):
            parse_ks(bad)


def test_sweep_rejects_bad_input(blobs):
    X, _ = blobs
    with pytest.raises(ValueError, match="between 2"):
        sweep(X, [1, 2], **PARAMS)
    with pytest.raises(ValueError, match="unknown metric"):
        sweep(X, [2, 3], metric="accuracy", **PARAMS)


def test_choose_k_elbow_and_directions():
    rows = [{"k": k, "inertia": v, "davies_bouldin": d}
            for k, v, d in [(2, 100.0, 0.9), (3, 60.0, 0.5), (4, 20.0, 0.5), (5, 18.0, 0.7),
                            (6, 17.0, 0.8)]]
    assert choose_k(rows, "inertia") == 4
    assert choose_k(rows, "davies_bouldin") == 3  # min, ties to the smaller k


def test_plots_are_png(tmp_path, blobs, result):
    pytest.importorskip("matplotlib")
    from kkmeans_cli.cli.plotting import plot_clusters, plot_sweep

    X, _ = blobs
    p = tmp_path / "sweep.png"
    plot_sweep(result.rows, result.metric, result.best_k, p)
    assert p.read_bytes()[:8] == PNG_SIGNATURE
    q = tmp_path / "clusters.png"
    X5 = np.column_stack([X, X[:, :1] * 0.5, np.ones(len(X)), X[:, 1]])  # d > 2: PCA
    plot_clusters(X5, result.best_estimator.labels_, q)
    assert q.read_bytes()[:8] == PNG_SIGNATURE


def test_missing_matplotlib_message(monkeypatch, tmp_path):
    import builtins

    from kkmeans_cli.errors import UsageError
    from kkmeans_cli.cli.plotting import plot_clusters

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(UsageError, match=r"pip install 'kkmeans-cli\[plot\]'"):
        plot_clusters(np.zeros((3, 2)), [0, 1, 1], tmp_path / "x.png")


@pytest.mark.parametrize("objective", ["kmeans", "ncut"])
@pytest.mark.parametrize("weighted", [False, True])
def test_every_row_measures_like_a_direct_fit(blobs, objective, weighted):
    """The sweep measures all ks in one pass, reusing the fits' final outer sums where the
    fit ran on K itself: each row equals the measures of a direct fit's labels computed alone
    (kmeans reuses the sums, ncut — a transformed kernel — cannot)."""
    from kkmeans_cli.measures import metrics

    X, _ = blobs
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X)) if weighted else None
    params = dict(PARAMS, objective=objective)
    res = sweep(X, [2, 3, 5, 8], sample_weight=w, **params)
    K = KernelKMeans(2, **{"kernel": "rbf", **params}).kernel_matrix(X)
    for row in res.rows:
        direct = KernelKMeans(row["k"], **{"kernel": "rbf", **params}).fit(X, sample_weight=w, kernel_matrix=K)
        alone = metrics.scores(K, direct.labels_, sample_weight=w)
        for name in ("silhouette", "simplified_silhouette", "calinski_harabasz",
                     "davies_bouldin"):
            assert row[name] == pytest.approx(alone[name], rel=1e-9, abs=1e-12), name
    # the fits' outer sums (k×n) are not kept after the measures
    best = res.best_estimator
    assert not any(np.shape(v) == (best.n_clusters, len(X)) for v in vars(best).values())


def test_sweep_with_the_embedding_solver(blobs):
    # The embedding solver's results carry no outer sums (found in review: AttributeError).
    X, _ = blobs
    res = sweep(X, [3, 4], solver="embed", **PARAMS)
    assert res.best_k == 4
    assert all(np.isfinite(r["silhouette"]) for r in res.rows)
