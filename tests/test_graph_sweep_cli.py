"""``kkmeans sweep`` on a graph: --kernel knn (the default) and --kernel precomputed with a
sparse graph as DATA, through CliRunner and as a subprocess.

Normalized-cut kernel k-means on a neighbour graph (Dhillon, Guan & Kulis, "Kernel k-means,
spectral clustering and normalized cuts", KDD 2004); the eigengap λ_{k+1} − λ_k of the
normalized Laplacian (von Luxburg, "A tutorial on spectral clustering", 2007) is checked
against a dense ``numpy.linalg.eigh``, the cut ratio (ncut(k+1) + ε)/(ncut(k) + ε) against the
normalized cuts of direct fits.
"""
import csv
import io
import json
import os

import numpy as np
import pytest
from scipy import sparse

from helpers import ROOT, run, run_process
from kkmeans_cli.errors import KKMeansWarning

GRAPH_HEADER = "k,objective,ncut,cut_ratio,silhouette,eigengap,n_iter,seconds"
MOONS = os.path.join(ROOT, "examples", "moons.csv")


def table(text):
    rows = list(csv.DictReader(io.StringIO(text)))
    return {int(r["k"]): {key: float(v) for key, v in r.items() if key != "k"} for r in rows}


def small_rings(per=20, seed=0):
    """Three rings of ``per`` points, radius 1, centred 20 apart: with ``per`` neighbours each
    ring is a clique of its own (a component), so k = 3 cuts nothing, every other k has a
    larger within distance (k = 2) or splits a clique (k > 3), and the Laplacian's eigenvalues
    are 0 three times then 1: the eigengap is 1 at k = 3 and 0 elsewhere."""
    rng = np.random.default_rng(seed)
    t = 2 * np.pi * (np.arange(per) + rng.uniform(0, 0.3, per)) / per
    ring = np.c_[np.cos(t), np.sin(t)]
    X = np.vstack([ring + c for c in ([0, 0], [20, 0], [0, 20])])
    return np.round(X, 6), np.repeat(np.arange(3), per)


def dense_laplacian_eigenvalues(A):
    A = A.toarray() if sparse.issparse(A) else np.asarray(A)
    s = 1.0 / np.sqrt(A.sum(axis=1))
    return np.linalg.eigvalsh(np.eye(A.shape[0]) - A * s[:, None] * s[None, :])


@pytest.fixture
def rings_csv(tmp_path):
    X, y = small_rings()
    path = tmp_path / "rings.csv"
    np.savetxt(path, X, delimiter=",", header="x,y", comments="")
    return path, X, y


def test_knn_sweep_picks_the_true_k_by_cut_ratio_silhouette_and_eigengap(rings_csv,
                                                                           tmp_path):
    path, X, y = rings_csv
    result = run(["sweep", path, "--k", "2..6", "--n-neighbors", "20", "-o", tmp_path / "best.npz"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == GRAPH_HEADER
    rows = table(result.stdout)
    assert sorted(rows) == [2, 3, 4, 5, 6]
    assert max(rows, key=lambda k: rows[k]["silhouette"]) == 3
    assert max(rows, key=lambda k: rows[k]["eigengap"]) == 3
    assert rows[3]["ncut"] == 0.0 and rows[3]["eigengap"] == pytest.approx(1.0, abs=1e-10)
    for k in (2, 4, 5, 6):
        assert rows[k]["eigengap"] == pytest.approx(0.0, abs=1e-10)
    # the cut ratio of k from the rows (k + 1 swept) and, for k = 6, from a fit of 7; for
    # k = 2 (the three components joined by bridges) k = 3's labels, the rings, are cut on
    # the joined graph: Σ_c cut(c)/vol(c) by dense NumPy
    seven = run(["sweep", path, "--k", "7", "--n-neighbors", "20", "-q"])
    ncut = {k: rows[k]["ncut"] for k in rows} | {7: table(seven.stdout)[7]["ncut"]}
    for k in range(3, 7):
        assert rows[k]["cut_ratio"] == pytest.approx((ncut[k + 1] + 1e-6) / (ncut[k] + 1e-6),
                                                      rel=1e-12)
    from kkmeans_cli.kernels.graph import join_components, knn_graph

    joined = join_components(knn_graph(X, 20))
    A = joined.affinity.toarray()
    z = np.empty_like(y)
    z[joined.node_of if joined.node_of is not None else np.arange(y.size)] = y
    ring_cut = sum(A[z == c][:, z != c].sum() / A[z == c].sum() for c in range(3))
    assert rows[2]["ncut"] < ring_cut < 0.02          # one bridge cut, then two
    assert rows[2]["cut_ratio"] == pytest.approx((ring_cut + 1e-6) / (ncut[2] + 1e-6),
                                                  rel=1e-9)
    assert rows[3]["cut_ratio"] > 1e4          # three cliques: the fourth cluster cuts one
    assert [k for k in rows if rows[k]["cut_ratio"] >= 3] == [3]
    err = result.stderr
    assert "* marks the k chosen by cut-ratio, ^ the largest eigengap" in err
    following = rows[3]["cut_ratio"] * 1e-6 - 1e-6        # ncut(3) = 0
    assert (f"chosen k:   3 by cut-ratio = {rows[3]['cut_ratio']:.4g}: ncut 0 → "
            f"{following:.4g} at k = 4 (the largest k whose next cluster multiplies the "
            f"normalized cut by 3 or more)") in err
    assert f"{following:.4g}" == f"{ncut[4]:.4g}"
    assert "largest at k = 3: λ4 − λ3 = 1" in err
    assert "20 neighbours (connectivity), 60 nodes, 3 components" in err
    marked = [line.split()[1] for line in err.splitlines() if line.lstrip().startswith("*^")]
    assert marked == ["3"]
    # The model is the k = 3 fit, its labels the rings, the sweep's measures in its meta.
    info = json.loads(run(["info", tmp_path / "best.npz", "--json"]).stdout)
    assert info["n_clusters"] == 3 and info["kernel"] == "knn"
    sweep = info["sweep"]
    assert sweep["best_k"] == 3 and sweep["eigengap_k"] == 3 and sweep["metric"] == "cut_ratio"
    assert sweep["measures"]["cut_ratio"] == pytest.approx([rows[k]["cut_ratio"] for k in rows],
                                                           rel=1e-12)
    assert sweep["measures"]["eigengap"] == pytest.approx([rows[k]["eigengap"] for k in rows])
    assert sweep["measures"]["silhouette"] == pytest.approx(
        [rows[k]["silhouette"] for k in rows], rel=1e-12)
    assert sweep["measures"]["ncut"] == pytest.approx([rows[k]["ncut"] for k in rows])
    text = run(["info", tmp_path / "best.npz"]).stdout
    assert "k = 3 chosen by cut-ratio among [2, 3, 4, 5, 6]" in text
    labels = run(["predict", tmp_path / "best.npz", path, "-q"]).stdout.split()
    labels = np.array(labels, dtype=int)
    assert len({(a, b) for a, b in zip(labels, y)}) == 3
    for metric in ("silhouette", "eigengap"):
        other = run(["sweep", path, "--k", "2..6", "--n-neighbors", "20", "--metric", metric])
        assert other.exit_code == 0, other.stderr
        assert f"chosen k:   3 by {metric} = " in other.stderr
        assert table(other.stdout)[3] == pytest.approx(
            {key: v for key, v in rows[3].items() if key != "seconds"} | {
                "seconds": table(other.stdout)[3]["seconds"]}, rel=1e-12)


@pytest.mark.parametrize("name, k", [("circles", 2), ("moons", 2), ("blobs", 4)])
def test_the_default_sweep_names_the_bundled_examples_k(name, k):
    """The bundled rings, moons (one component) and four blobs: by the cut ratio the sweep
    of 2..6 names their k, where the graph silhouette names 6, 6 and 3 and the eigengap 6, 6
    and 4 (docs/cli.md)."""
    path = os.path.join(ROOT, "examples", f"{name}.csv")
    result = run(["sweep", path, "--k", "2..6", "--seed", "0"])
    assert result.exit_code == 0, result.stderr
    assert f"chosen k:   {k} by cut-ratio" in result.stderr
    rows = table(result.stdout)
    assert rows[k]["cut_ratio"] >= 3
    assert all(rows[j]["cut_ratio"] < 3 for j in rows if j > k)


def test_each_k_has_the_labels_of_fit_with_the_same_seed(tmp_path):
    # 300 points > 21·5: the default neighbours of every k are the sweep's graph, so each k's
    # row is fit -k K's (objective, normalized cut), and a sweep's model is its k's fit: the
    # fit without the whitened refit, which a sweep does not make (--no-whiten).
    ks = [2, 3, 4, 5]
    swept = run(["sweep", MOONS, "--k", "2..5", "--seed", "3", "-q"])
    assert swept.exit_code == 0, swept.stderr
    rows = table(swept.stdout)
    for k in ks:
        one = run(["sweep", MOONS, "--k", str(k), "--seed", "3", "-q",
                   "-o", tmp_path / f"s{k}.npz"])
        assert one.exit_code == 0, one.stderr
        fitted = run(["fit", "--kernel", "knn", MOONS, "-k", str(k), "--seed", "3", "-q",
                      "--no-whiten", "-o", tmp_path / f"f{k}.npz", "--summary",
                      tmp_path / f"f{k}.json"])
        assert fitted.exit_code == 0, fitted.stderr
        np.testing.assert_array_equal(np.load(tmp_path / f"s{k}.npz")["labels"],
                                      np.load(tmp_path / f"f{k}.npz")["labels"])
        summary = json.loads((tmp_path / f"f{k}.json").read_text())
        assert rows[k]["objective"] == pytest.approx(summary["inertia"], rel=1e-12)
        assert table(one.stdout)[k]["objective"] == rows[k]["objective"]


def test_the_sweep_labels_equal_fit_labels_through_the_api():
    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.model.sweep import sweep

    X = np.loadtxt(MOONS, delimiter=",", skiprows=1)
    res = sweep(X, [2, 3, 4, 5], kernel="knn", random_state=3, refit_best=True)
    assert res.columns[1:6] == ("objective", "ncut", "cut_ratio", "silhouette", "eigengap")
    assert res.metric == "cut_ratio" and res.best_k == 2
    for row, labels in zip(res.rows, res.labels):
        est = KernelKMeans(row["k"], random_state=3, whiten=False).fit(X)
        np.testing.assert_array_equal(labels, est.labels_)
        assert row["objective"] == est.inertia_
    np.testing.assert_array_equal(res.best_estimator.labels_,
                                  res.labels[[r["k"] for r in res.rows].index(res.best_k)])


def test_eigengaps_equal_a_dense_eigh_reference(tmp_path, rings_csv):
    from kkmeans_cli.kernels.graph import knn_graph

    # knn: the sweep's graph (20 neighbours) against eigh of that affinity.
    path, X, _ = rings_csv
    rows = table(run(["sweep", path, "--k", "2..7", "--n-neighbors", "20", "-q"]).stdout)
    lam = dense_laplacian_eigenvalues(knn_graph(X, 20).affinity)
    for k, row in rows.items():
        assert row["eigengap"] == pytest.approx(lam[k] - lam[k - 1], abs=1e-8)
    # A sparse graph given as DATA: two components of 600 nodes (Lanczos on each) and a
    # component of 40; the reference is eigh of the whole matrix.
    rng = np.random.default_rng(5)
    blocks = []
    for size in (600, 600, 40):
        ring = sparse.diags([np.ones(size - 1), np.ones(size - 1)], [-1, 1], shape=(size, size))
        extra = sparse.random(size, size, density=8 / size, random_state=rng)
        B = (ring + extra + extra.T).tocsr()
        B.data[:] = rng.uniform(0.5, 1.5, B.nnz)
        blocks.append((B + B.T) / 2)
    A = sparse.block_diag(blocks).tocsr()
    sparse.save_npz(tmp_path / "g.npz", A)
    result = run(["sweep", tmp_path / "g.npz", "--kernel", "precomputed", "--k", "2..6",
                  "--table", tmp_path / "t.csv"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    rows = table((tmp_path / "t.csv").read_text())
    lam = dense_laplacian_eigenvalues(A)
    assert lam[:3] == pytest.approx([0, 0, 0], abs=1e-10)
    for k, row in rows.items():
        assert row["eigengap"] == pytest.approx(lam[k] - lam[k - 1], abs=1e-8)
    assert max(rows, key=lambda k: rows[k]["eigengap"]) == 3
    assert rows[2]["eigengap"] == 0.0
    assert ("kkmeans: warning: the graph has 3 connected components, more than the clusters "
            "asked for") in result.stderr
    assert "sparse affinity graph of 1240 nodes" in result.stderr
    assert "affinity given as DATA" in result.stderr


def test_the_repeated_eigenvalue_zero_of_many_components_has_no_gap(tmp_path):
    """36 components (tight blobs of 50 points): λ_1 … λ_36 are all 0, and their differences
    rounding (about 1e-16); gaps below the eigensolver's tolerance are
    reported as 0."""
    import warnings

    from kkmeans_cli.engine import graph_starts
    from kkmeans_cli.kernels.graph import knn_graph
    from kkmeans_cli.measures.graph_sweep import sweep_graph

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal([3.0 * b, 60.0 * g], 0.2, size=(50, 2))
                   for g in range(3) for b in range(12)])
    A = knn_graph(X, 10).affinity

    def gaps():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KKMeansWarning)     # (components grouped)
            return [r.eigengap for r in sweep_graph(affinity=A, ks=range(2, 8),
                                                    random_state=0)]

    assert gaps() == [0.0] * 6
    # (the rounding itself depends on the platform; the rule, on given eigenvalues:)
    lam = [0.0, 2.2e-16, -1e-17, 3e-9, 0.5, 0.5 + 2 ** -20]
    assert graph_starts.eigengaps(lam, [1, 2, 3, 4, 5, 6]) == [0.0, 0.0, 0.0,
                                                                0.5 - 3e-9, 2 ** -20, None]
    # and no gap names no k: the eigengap's choice is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        records = sweep_graph(affinity=A, ks=range(2, 8), random_state=0)
    assert not any(r.eigengap_choice for r in records)
    # and the report says so, not "not computed"
    sparse.save_npz(tmp_path / "g.npz", A)
    result = run(["sweep", tmp_path / "g.npz", "--kernel", "precomputed", "--k", "2..7",
                  "--table", tmp_path / "t.csv"])
    assert result.exit_code == 0
    assert ("eigengap:   0 at every k swept (the eigenvalue 0 repeats: the graph has more "
            "components than any of them)\n") in result.stderr


def test_sweep_of_a_graph_file_equals_fit_of_it(tmp_path):
    from kkmeans_cli.kernels.graph import knn_graph

    X = np.loadtxt(MOONS, delimiter=",", skiprows=1)
    sparse.save_npz(tmp_path / "g.npz", knn_graph(X, 12).affinity)
    swept = run(["sweep", tmp_path / "g.npz", "--kernel", "precomputed", "--k", "2,3", "-q",
                 "--seed", "1", "-o", tmp_path / "s.npz"])
    assert swept.exit_code == 0, swept.stderr
    best = json.loads(run(["info", tmp_path / "s.npz", "--json"]).stdout)["n_clusters"]
    fitted = run(["fit", tmp_path / "g.npz", "--kernel", "precomputed", "-k", str(best),
                  "--seed", "1", "-q", "-o", tmp_path / "f.npz"])
    assert fitted.exit_code == 0, fitted.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "s.npz")["labels"],
                                  np.load(tmp_path / "f.npz")["labels"])


def test_knn_is_the_sweep_default_and_a_subprocess_writes_the_same(tmp_path, rings_csv):
    path, _, _ = rings_csv
    inproc = run(["sweep", path, "--k", "2..4", "--n-neighbors", "20", "-q"])
    proc = run_process(["sweep", path, "--k", "2..4", "--n-neighbors", "20", "--kernel", "knn",
                        "--table", "t.csv", "--plot", "p.png"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    got, want = table((tmp_path / "t.csv").read_text()), table(inproc.stdout)
    for k in want:
        for key in ("objective", "ncut", "cut_ratio", "silhouette", "eigengap", "n_iter"):
            assert got[k][key] == want[k][key]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert "--kernel" in run(["sweep", "--help"]).stdout
    assert "[default: knn]" in " ".join(run(["sweep", "--help"]).stdout.split())


def _refused(args, code, fragment, tmp_path):
    before = sorted(os.listdir(tmp_path))
    result = run(args)
    assert result.exit_code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: "), result.stderr
    assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("extra, fragment", [
    (["--cluster", "local:2"], "No such option '--cluster'"),
    (["--gamma", "0.5"], "gamma"),
    (["--storage", "blocked"], "storage"),
    (["--approx", "nystroem"], "approx"),
    (["--dtype", "float32"], "dtype"),
    (["--algorithm", "elkan"], "elkan"),
    (["--init", "random"], "--init random"),
    (["--metric", "davies-bouldin"], "--metric davies-bouldin is measured on a kernel matrix"),
    (["--metric", "inertia"], "--metric inertia"),
])
def test_knn_sweep_refusals_are_usage_errors(rings_csv, tmp_path, extra, fragment):
    path, _, _ = rings_csv
    _refused(["sweep", path, "--k", "2..4", "-o", tmp_path / "m.npz", *extra], 2, fragment,
             tmp_path)


def test_knn_sweep_data_refusals(tmp_path):
    X = np.repeat(np.arange(4.0)[:, None], 5, axis=0) * np.ones((1, 2))   # 4 distinct points
    np.savetxt(tmp_path / "few.csv", X, delimiter=",")
    _refused(["sweep", tmp_path / "few.csv", "--k", "2..5", "-o", tmp_path / "m.npz"], 1,
             "4 distinct points", tmp_path)
    _refused(["sweep", tmp_path / "few.csv", "--k", "2..3", "--n-neighbors", "20", "-o",
              tmp_path / "m.npz"], 1, "--n-neighbors 20 must be less than", tmp_path)
    _refused(["sweep", tmp_path / "few.csv", "--k", "2..3", "--kernel", "rbf", "--metric",
              "eigengap"], 2, "--metric eigengap", tmp_path)
    _refused(["sweep", tmp_path / "few.csv", "--k", "2..3", "--kernel", "rbf", "--n-neighbors", "5"], 2,
             "--n-neighbors 5 sets the graph of --kernel knn", tmp_path)
    _refused(["sweep", tmp_path / "few.csv", "--k", "2..3", "--kernel", "rbf", "--metric",
              "cut-ratio"], 2, "--metric cut-ratio is the ratio of a graph's normalized cuts; "
             "--kernel rbf has no graph", tmp_path)
    # 4 nodes: no 5th cluster and no λ5 for k = 4: the one k swept is chosen by the cut ratio
    # (NaN), but there is no eigengap to choose by
    one = run(["sweep", tmp_path / "few.csv", "--k", "4", "--table", tmp_path / "t.csv"])
    assert one.exit_code == 0, one.stderr
    assert ("chosen k:   4 by cut-ratio, the one k swept (a graph of 4 nodes cannot be cut "
            "into 5 clusters to compare)") in one.stderr
    assert np.isnan(table((tmp_path / "t.csv").read_text())[4]["cut_ratio"])
    os.remove(tmp_path / "t.csv")
    _refused(["sweep", tmp_path / "few.csv", "--k", "4", "--metric", "eigengap", "-o",
              tmp_path / "m.npz"], 1, "few.csv: no k has a finite eigengap; λ_(k+1) − λ_k "
             "needs a graph of more than k nodes: sweep smaller ks or choose k by the "
             "silhouette", tmp_path)


def test_a_graph_sweep_takes_k_up_to_its_nodes_when_every_row_is_distinct(tmp_path):
    """Every row distinct: a k of every point is swept as with duplicates (the one k swept,
    cut ratio NaN), on points and on a given graph, in process and as a subprocess; k above
    them, and a dense sweep's k = rows, are one line, exit 1, nothing written."""
    from kkmeans_cli.model.sweep import graph_sweep

    X = np.random.default_rng(0).normal(size=(6, 2))
    np.savetxt(tmp_path / "six.csv", X, delimiter=",")
    A = sparse.csr_matrix(np.ones((5, 5)) + np.eye(5))
    sparse.save_npz(tmp_path / "g.npz", A)
    for args, k in ((["six.csv"], 6), (["g.npz", "--kernel", "precomputed"], 5)):
        said = (f"chosen k:   {k} by cut-ratio, the one k swept (a graph of {k} nodes cannot "
                f"be cut into {k + 1} clusters to compare)")
        one = run(["sweep", tmp_path / args[0], *args[1:], "--k", str(k), "--table",
                   tmp_path / "t.csv"])
        assert one.exit_code == 0, one.stderr
        assert said in one.stderr
        assert np.isnan(table((tmp_path / "t.csv").read_text())[k]["cut_ratio"])
        os.remove(tmp_path / "t.csv")
        process = run_process(["sweep", *args, "--k", f"2..{k}"], cwd=tmp_path)
        assert process.returncode == 0, process.stderr
        assert sorted(table(process.stdout)) == list(range(2, k + 1))
    assert graph_sweep(X, [6], random_state=0).best_k == 6
    with pytest.raises(ValueError, match="every k must be between 2 and n_samples = 6"):
        graph_sweep(X, [2, 7], random_state=0)
    _refused(["sweep", tmp_path / "six.csv", "--k", "2..7", "-o", tmp_path / "m.npz"], 1,
             "six.csv: k = 7 is too large for 6 rows (a sweep on a graph needs k ≤ rows = 6)",
             tmp_path)
    _refused(["sweep", tmp_path / "g.npz", "--kernel", "precomputed", "--k", "6", "-o",
              tmp_path / "m.npz"], 1, "g.npz: k = 6 is too large for a graph of 5 nodes (a "
             "sweep on a graph needs k ≤ 5)", tmp_path)
    _refused(["sweep", tmp_path / "six.csv", "--k", "6", "--kernel", "rbf", "-o",
              tmp_path / "m.npz"], 1, "six.csv: k = 6 is too large for 6 rows (a sweep needs "
             "k ≤ rows − 1 = 5)", tmp_path)


@pytest.mark.parametrize("rows", ["1,2\n3,4\n", "0,0\n0,0\n5,5\n5,5\n5,5\n"])
def test_a_sweep_of_two_distinct_points_writes_its_model(tmp_path, rows):
    """Two distinct points (two rows, or five with repeats): the default rule's least
    neighbours, 2, link both, which no --n-neighbors given may do; the sweep's model of k = 2
    is that graph's fit all the same, as fit's is, and predict gives its labels back."""
    (tmp_path / "two.csv").write_text(rows)
    sweep = run(["sweep", tmp_path / "two.csv", "--k", "2", "-o", tmp_path / "s.npz", "-q"])
    assert sweep.exit_code == 0, sweep.stderr
    fit = run(["fit", tmp_path / "two.csv", "-k", "2", "-o", tmp_path / "f.npz", "-q"])
    assert fit.exit_code == 0, fit.stderr
    labels = fit.stdout.split()
    assert len(set(labels)) == 2 and labels[0] != labels[-1]
    for model in ("s.npz", "f.npz"):
        got = run(["predict", tmp_path / model, tmp_path / "two.csv", "-q"])
        assert got.exit_code == 0, got.stderr
        assert got.stdout.split() == labels
        info = run(["info", tmp_path / model])
        assert info.exit_code == 0 and "2 neighbours" in info.stdout, info.stdout


def test_fit_report_and_model_say_when_components_were_joined(tmp_path):
    """Four far blobs and k = 2: the fit joins the four components by three bridges
    (kernels.graph.join_components), and the report and the model's meta say so, since the
    cut is then the joined graph's."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(400, centers=[[0, 0], [40, 0], [0, 40], [40, 40]], cluster_std=0.5,
                      random_state=0)
    path = tmp_path / "blobs.csv"
    np.savetxt(path, X, delimiter=",")
    result = run(["fit", path, "-k", "2", "-o", tmp_path / "m.npz"])
    assert result.exit_code == 0, result.stderr
    assert "400 nodes, 4 components joined by 3 bridges, nnz" in result.stderr
    info = run(["info", tmp_path / "m.npz", "--json"])
    graph = json.loads(info.stdout)["graph"]
    assert graph["n_components"] == 4 and graph["bridges"] == 3
    text = run(["info", tmp_path / "m.npz"]).stdout
    assert "4 components joined by 3 bridges" in text
    # the dense kernels' settings took no part in a graph fit: info does not list them
    options = next(line for line in text.splitlines() if line.startswith("options:"))
    assert "--kernel=knn" in options and "--n-clusters=2" in options
    for unused in ("--gamma", "--degree", "--coef0", "--objective", "--algorithm", "--tol",
                   "--dtype", "--refine", "--storage", "--approx", "--psd-repair", "--solver"):
        assert unused not in options
    assert "algorithm=" not in next(line for line in text.splitlines()
                                    if line.startswith("fit:"))
    dense = run(["fit", path, "-k", "2", "--kernel", "rbf", "-o", tmp_path / "rbf.npz"])
    assert dense.exit_code == 0, dense.stderr
    text = run(["info", tmp_path / "rbf.npz"]).stdout
    assert "--gamma=median" in text and "--objective=kmeans" in text and "algorithm=auto" in text
    # one component: no bridges named
    one = run(["fit", MOONS, "-k", "2", "--no-model"])     # (no model.npz in the working folder)
    assert one.exit_code == 0 and "bridge" not in one.stderr


def _four_blobs(path):
    from sklearn.datasets import make_blobs

    X, y = make_blobs(600, centers=[[0, 0], [8, 0], [0, 8], [8, 8]], cluster_std=0.5,
                      random_state=0)
    np.savetxt(path, np.round(X, 6), delimiter=",")
    return X, y


def test_the_ratio_before_the_components_is_cut_on_one_graph_and_the_table_is_whole(tmp_path):
    """Four far blobs: k < 4 fits join the four components by bridges, k ≥ 4 do not; the ratio
    of k = 3 cuts k = 4's labels (the blobs) on k = 3's joined graph, so it is above 1 (not
    0 against 0.001), and 4 is chosen. The table on stderr, no terminal (80 columns), is as
    wide as its numbers need: none cut short."""
    X, y = _four_blobs(tmp_path / "b.csv")
    result = run(["sweep", tmp_path / "b.csv", "--k", "2..6", "--seed", "0"])
    assert result.exit_code == 0, result.stderr
    rows = table(result.stdout)
    assert rows[4]["ncut"] == 0.0 and rows[3]["ncut"] > 0
    assert all(rows[k]["cut_ratio"] >= 1 for k in rows)
    assert "chosen k:   4 by cut-ratio" in result.stderr
    assert "…" not in result.stderr
    lines = result.stderr.splitlines()
    assert max(len(line) for line in lines if line.lstrip().startswith(("k ", "2 ", "*"))) > 80


def test_a_longer_range_of_ks_changes_neither_the_graph_nor_the_choice(tmp_path):
    """400 moons: with the default neighbours the graph is the smallest k's, so --k 2..8 and
    --k 2..30 share their rows for k = 2..8 (k = 8's ratio comes from a fit of 9 in the
    first, from the swept 9 in the second: the same) and choose the same k. (Before, the
    graph was the largest k's: 2..80 had 5 neighbours, 3 components, and chose 5.)"""
    from sklearn.datasets import make_moons

    X, _ = make_moons(400, noise=0.05, random_state=0)
    np.savetxt(tmp_path / "m.csv", X, delimiter=",")
    short = run(["sweep", tmp_path / "m.csv", "--k", "2..8", "--seed", "1"])
    long = run(["sweep", tmp_path / "m.csv", "--k", "2..30", "--seed", "1"])
    assert short.exit_code == 0 and long.exit_code == 0, short.stderr + long.stderr
    a, b = table(short.stdout), table(long.stdout)
    for k in a:
        for key in ("objective", "ncut", "cut_ratio", "silhouette"):
            assert a[k][key] == b[k][key], (k, key)
    assert "21 neighbours" in short.stderr and "chosen k:   2 by cut-ratio" in short.stderr
    assert "default neighbours of k = 2; fit a larger k with --n-neighbors 21" not in \
        short.stderr                    # 400 > 21·8: every k's default graph is the same
    long_report = long.stderr
    assert "chosen k:   2 by cut-ratio" in long_report
    assert ("(the default neighbours of k = 2; fit a larger k with --n-neighbors 21 "
            "--no-whiten for the sweep's labels)") in long_report


def test_cut_ratio_spelled_as_the_model_writes_it_in_a_config(tmp_path, rings_csv):
    path, _, _ = rings_csv
    (tmp_path / "c.yaml").write_text("metric: cut_ratio\nn_neighbors: 20\n")
    by_config = run(["sweep", path, "--k", "2..4", "--config", tmp_path / "c.yaml",
                     "-o", tmp_path / "m.npz"])
    assert by_config.exit_code == 0, by_config.stderr
    assert "chosen k:   3 by cut-ratio" in by_config.stderr
    info = json.loads(run(["info", tmp_path / "m.npz", "--json"]).stdout)
    assert info["sweep"]["metric"] == "cut_ratio"
    (tmp_path / "bad.yaml").write_text("metric: cut_ration\n")
    _refused(["sweep", path, "--k", "2..4", "--config", tmp_path / "bad.yaml"], 2,
             "key 'metric'", tmp_path)


def test_graph_sweep_of_a_sparse_affinity_through_the_api_needs_no_other_settings():
    from kkmeans_cli.kernels.graph import knn_graph
    from kkmeans_cli.model.sweep import graph_sweep, sweep

    X, y = small_rings()
    A = knn_graph(X, 20).affinity
    results = []
    for run_sweep in (graph_sweep, sweep):
        # k = 2 groups the three rings' components by volume, and says so
        with pytest.warns(KKMeansWarning, match="the graph has 3 connected components"):
            results.append(run_sweep(A, [2, 3, 4], kernel="precomputed", random_state=0))
    for result in results:
        assert result.metric == "cut_ratio" and result.best_k == 3
        labels = result.labels[1]
        assert len({(a, b) for a, b in zip(labels, y)}) == 3


def test_hints_name_what_works_for_the_data_given(tmp_path):
    from kkmeans_cli.kernels.graph import knn_graph

    X, _ = small_rings()
    sparse.save_npz(tmp_path / "g.npz", knn_graph(X, 20).affinity)
    before = ["g.npz"]
    result = run(["sweep", tmp_path / "g.npz", "--kernel", "precomputed", "--k", "2..4",
                  "--metric", "davies-bouldin"])
    assert result.exit_code == 2
    assert result.stderr == ("kkmeans: error: --metric davies-bouldin is measured on a kernel "
                             "matrix; a sparse graph as DATA (" + str(tmp_path / "g.npz")
                             + ") is swept on its graph: use --metric cut-ratio, silhouette "
                             "or eigengap\n")
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    np.save(tmp_path / "K.npy", K)
    result = run(["sweep", tmp_path / "K.npy", "--kernel", "precomputed", "--k", "2..4",
                  "--metric", "cut-ratio"])
    assert result.exit_code == 2
    assert result.stderr == ("kkmeans: error: --metric cut-ratio is the ratio of a graph's "
                             "normalized cuts; --kernel precomputed has no graph (give a "
                             "sparse graph (.npz of scipy.sparse.save_npz, or .mtx) as DATA, "
                             "or another --metric)\n")
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["K.npy"])


@pytest.mark.parametrize("kernel", ["knn", "rbf"])
def test_info_of_a_sweep_model_gives_options_the_sweep_takes_back(tmp_path, kernel):
    """info's options line of a sweep model names the options given, spelled as the sweep
    command takes them: no --n-clusters (the k chosen has its own rows, and sweep takes
    --k), no neighbour count the default rule chose; run again from that line (the model
    renamed), the sweep writes the same table and a model of the same k and labels."""
    args = ["sweep", MOONS, "--k", "2..4", "--kernel", kernel, "-o", tmp_path / "s.npz",
            "--table", tmp_path / "t.csv"]
    first = run(args)
    assert first.exit_code == 0, first.stderr
    info = run(["info", tmp_path / "s.npz"])
    assert info.exit_code == 0, info.stderr
    line = next(row for row in info.stdout.splitlines() if row.startswith("options:"))
    options = line.split(":", 1)[1].split()
    assert "--k=2..4" in options and f"--kernel={kernel}" in options
    assert not any(option.startswith(("--n-clusters", "--n-neighbors")) for option in options)
    again = [option.replace(str(tmp_path / "s.npz"), str(tmp_path / "again.npz"))
             .replace(str(tmp_path / "t.csv"), str(tmp_path / "again.csv"))
             for option in options]
    second = run(["sweep", MOONS, *again])
    assert second.exit_code == 0, second.stderr
    rows = [[{key: value for key, value in row.items() if key != "seconds"}
             for row in csv.DictReader(io.StringIO((tmp_path / name).read_text()))]
            for name in ("t.csv", "again.csv")]
    assert rows[0] == rows[1] and len(rows[0]) == 3
    models = [json.loads(run(["info", tmp_path / name, "--json"]).stdout)
              for name in ("s.npz", "again.npz")]
    assert models[0]["n_clusters"] == models[1]["n_clusters"] == models[0]["sweep"]["best_k"]
    labels = [run(["predict", tmp_path / name, MOONS, "--quiet"]).stdout
              for name in ("s.npz", "again.npz")]
    assert labels[0] == labels[1] and labels[0].count("\n") == 300
    given = run(["sweep", MOONS, "--k", "2..3", "--n-neighbors", "12", "-o",
                 tmp_path / "g.npz", "--table", tmp_path / "g.csv"])
    assert given.exit_code == 0, given.stderr
    assert "--n-neighbors=12" in run(["info", tmp_path / "g.npz"]).stdout


def test_ks_that_are_not_whole_numbers_are_refused_and_an_iterator_of_ks_is_read_once():
    """``sweep`` and ``graph_sweep`` took int(k): 2.9 and 3.7 swept 2 and 3, True swept 1; a
    sparse affinity's sweep read an iterator of ks twice (for its memory plan, then for the
    fits) and found none left. Whole floats and strings of digits are ks."""
    from kkmeans_cli.kernels.graph import knn_graph
    from kkmeans_cli.model.sweep import sweep

    X, _ = small_rings()
    for ks, bad in (([2.9, 3.7], "2.9"), ([True, 3], "True"), (["3", 4.5], "4.5"),
                    ([2, None], "None"), ([2, "x"], "'x'")):
        for kernel in ("knn", "rbf"):
            with pytest.raises(ValueError, match=f"^every k must be a whole number of "
                                                 f"clusters; got {bad}$"):
                sweep(X, ks, kernel=kernel, random_state=0)
    assert [r["k"] for r in sweep(X, np.array([3.0, 2.0]), kernel="knn",
                                  random_state=0).rows] == [2, 3]
    assert [r["k"] for r in sweep(X, ["2", 3], kernel="rbf", random_state=0).rows] == [2, 3]
    A = knn_graph(X, 20).affinity
    want = sweep(A, [3, 4], kernel="precomputed", random_state=0)
    for ks in (iter([3, 4]), (k for k in (4, 3))):
        got = sweep(A, ks, kernel="precomputed", random_state=0)
        assert [r["k"] for r in got.rows] == [3, 4] and got.best_k == want.best_k == 3
        for a, b in zip(got.labels, want.labels):
            np.testing.assert_array_equal(a, b)


def test_eigengap_refuses_to_choose_where_every_gap_is_0(tmp_path):
    """Six isolated nodes: λ_1 … λ_6 are all 0, so every gap of ks 2..4 is 0 and the eigengap
    names no k (``eigengap_k`` None): ``metric='eigengap'`` chose the smallest k swept; now
    it says why it cannot choose (exit 1 on the command line, one line, nothing written)."""
    from kkmeans_cli.model.sweep import sweep

    A = sparse.identity(6, format="csr")
    message = ("every eigengap λ_(k+1) − λ_k of the ks swept is 0 (more than k connected "
               "components, or a repeated eigenvalue), so it chooses none: sweep other ks, "
               "or choose k by the cut ratio or the silhouette")
    with pytest.warns(KKMeansWarning, match="6 connected components"):
        with pytest.raises(ValueError, match=r"^every eigengap λ_\(k\+1\) − λ_k of the ks"):
            sweep(A, "2..4", kernel="precomputed", metric="eigengap", random_state=0)
        # the other measures still choose, and the eigengap's choice is None
        result = sweep(A, "2..4", kernel="precomputed", random_state=0)
    assert result.eigengap_k is None and [r["eigengap"] for r in result.rows] == [0.0] * 3
    sparse.save_npz(tmp_path / "g.npz", A)
    command = ["sweep", tmp_path / "g.npz", "--kernel", "precomputed", "--k", "2..4",
               "--metric", "eigengap", "-o", tmp_path / "m.npz", "--table", tmp_path / "t.csv"]
    for out, code in ((lambda r: (r, r.exit_code))(run(command)),
                      (lambda r: (r, r.returncode))(run_process(command, cwd=tmp_path))):
        assert code == 1
        assert out.stderr.splitlines()[-1] == f"kkmeans: error: {tmp_path / 'g.npz'}: {message}"
        assert out.stdout == ""
        assert sorted(os.listdir(tmp_path)) == ["g.npz"]


def test_the_best_estimator_of_a_graph_sweep_keeps_a_data_frames_column_names():
    """It is fitted on the data as given, as a direct fit is: its ``feature_names_in_`` are
    the DataFrame's, and predict checks them."""
    import pandas as pd

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.model.sweep import sweep

    X, _ = small_rings()
    frame = pd.DataFrame(X, columns=["a", "b"])
    best = sweep(frame, "2..4", kernel="knn", random_state=0).best_estimator
    np.testing.assert_array_equal(best.feature_names_in_, ["a", "b"])
    np.testing.assert_array_equal(
        best.feature_names_in_, KernelKMeans(3, random_state=0).fit(frame).feature_names_in_)
    np.testing.assert_array_equal(best.predict(frame), best.labels_)
    with pytest.raises(ValueError, match="feature names"):
        best.predict(frame.rename(columns={"a": "c"}))


def test_the_report_says_why_no_eigengap_names_a_k(tmp_path):
    """The complete graph of 8 nodes is one component whose eigenvalues past 0 are all 8/7:
    every gap of ks 2..4 is 0 because an eigenvalue repeats (the report said the eigenvalue
    0 repeated in more components than k); a k of every node has no λ(k+1) (the report said
    only "not computed")."""
    sparse.save_npz(tmp_path / "k8.npz", sparse.csr_matrix(np.ones((8, 8)) - np.eye(8)))
    for ks, line in (("2..4", "eigengap:   0 at every k swept (a repeated eigenvalue)\n"),
                     ("8", "eigengap:   not computed (λ(k+1) needs more than k nodes)\n")):
        result = run(["sweep", tmp_path / "k8.npz", "--kernel", "precomputed", "--k", ks,
                      "--table", tmp_path / "t.csv"])
        assert result.exit_code == 0, result.stderr
        assert line in result.stderr
        assert "more components" not in result.stderr


@pytest.mark.parametrize("kernel", ["knn", "rbf"])
def test_a_sweep_models_meta_that_does_not_fit_the_model_is_refused(tmp_path, rings_csv, kernel):
    """meta 'sweep' was checked for its types only: best_k null or 7 on a k = 3 model, ks
    null, a metric 'bogus' (or a graph's on a dense model), an eigengap_k no k swept, and a
    silhouette of 5 were shown by info ('k = None chosen by bogus among None')."""
    path, X, y = rings_csv
    assert run(["sweep", path, "--kernel", kernel, "--k", "2..4", "-o", tmp_path / "s.npz",
                "-q"]).exit_code == 0
    with np.load(tmp_path / "s.npz", allow_pickle=False) as archive:
        arrays = dict(archive)
    meta = json.loads(str(arrays["meta"]))
    k = meta["n_clusters"]
    cases = [({"best_k": None, "ks": None, "metric": "bogus"}, "meta 'sweep' must hold ks "
              f"that include best_k, the model's k = {k}"),
             ({"best_k": 7}, f"meta 'sweep' must hold ks that include best_k, the model's "
                             f"k = {k}"),
             ({"ks": [k + 1, k + 2]}, "meta 'sweep' must hold ks that include best_k"),
             ({"metric": "bogus"}, "meta 'sweep.metric' must be one of"),
             ({"metric": "inertia" if kernel == "knn" else "cut_ratio"},
              "meta 'sweep.metric' must be one of")]
    if kernel == "knn":
        cases.append(({"eigengap_k": 9}, "meta 'sweep.eigengap_k' must be one of its ks"))
    for change, message in cases + [(None, "meta 'silhouette' must lie between −1 and 1")]:
        changed = json.loads(str(arrays["meta"]))
        if change is None:
            changed["silhouette"] = 5
        else:
            changed["sweep"].update(change)
        np.savez(tmp_path / "bad.npz", **dict(arrays, meta=np.array(json.dumps(changed))))
        for command in (["info", tmp_path / "bad.npz"],
                        ["predict", tmp_path / "bad.npz", path]):
            result = run(command)
            assert result.exit_code == 1 and result.stdout == "", (change, result.stderr)
            assert result.stderr.startswith(
                f"kkmeans: error: {tmp_path / 'bad.npz'}: corrupt model: {message}")
            assert result.stderr.count("\n") == 1, result.stderr


def test_the_python_sweep_takes_the_estimators_default_kernel(rings_csv):
    """sweep(X, ks) swept the rbf kernel where KernelKMeans() and `kkmeans sweep` take the
    graph kernel: now the same default, the same rows as graph_sweep's, and the best
    estimator a knn fit; kernel='rbf' still sweeps the kernel matrix."""
    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.model.sweep import COLUMNS, GRAPH_COLUMNS, graph_sweep, sweep

    _, X, y = rings_csv
    default, graph = sweep(X, "2..4", random_state=0), graph_sweep(X, "2..4", random_state=0)
    assert KernelKMeans().kernel == "knn" == default.best_estimator.kernel
    assert default.columns == GRAPH_COLUMNS and default.metric == "cut_ratio"
    assert default.best_k == graph.best_k == 3
    for a, b in zip(default.labels, graph.labels):
        np.testing.assert_array_equal(a, b)
    dense = sweep(X, "2..4", kernel="rbf", random_state=0)
    assert dense.columns == COLUMNS and dense.metric == "silhouette"
