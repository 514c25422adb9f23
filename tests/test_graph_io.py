"""Sparse graphs as DATA (io/graphs.py): .npz of scipy.sparse.save_npz and Matrix Market."""
import gzip
import os
import zipfile

import numpy as np
import pytest
import scipy.io
from scipy import sparse

from helpers import run_process
from kkmeans_cli.errors import DataError
from kkmeans_cli.io.graphs import is_graph_file, read_graph
from kkmeans_cli.kernels import graph as kgraph
from kkmeans_cli.kernels.graph_fit import fit_graph


def two_moons_graph(n=300, seed=0):
    from sklearn.datasets import make_moons

    X, _ = make_moons(n, noise=0.05, random_state=seed)
    return kgraph.knn_graph(X, 10).affinity


@pytest.fixture
def graph():
    rng = np.random.default_rng(0)
    A = sparse.random(40, 40, density=0.2, random_state=1, format="csr") * 3.0
    A = (A + A.T).tocsr()
    A.setdiag(rng.uniform(0.5, 1.0, 40))
    return A.tocsr()


def same(A, B):
    assert B.format == "csr" and B.dtype == np.float64 and B.has_sorted_indices
    assert B.shape == A.shape
    assert (abs(A - B)).nnz == 0 or abs(A - B).max() == 0


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "dia"])
def test_save_npz_round_trip(tmp_path, graph, fmt):
    path = tmp_path / "g.npz"
    sparse.save_npz(path, graph.asformat(fmt))
    A = read_graph(path)
    same(graph, A)
    np.testing.assert_array_equal(A.toarray(), graph.toarray())
    assert is_graph_file(path)


@pytest.mark.parametrize("symmetry", ["general", "symmetric"])
def test_mmwrite_round_trip(tmp_path, graph, symmetry):
    path = tmp_path / "g.mtx"
    scipy.io.mmwrite(path, graph, symmetry=symmetry, precision=17)
    A = read_graph(path)
    same(graph, A)
    np.testing.assert_array_equal(A.toarray(), graph.toarray())
    assert is_graph_file(path)


def test_gzipped_mtx_and_pattern_and_integer_files(tmp_path):
    path = tmp_path / "p.mtx.gz"
    with gzip.open(path, "wt") as f:
        f.write("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 2\n3 3\n")
    np.testing.assert_array_equal(read_graph(path).toarray(),
                                  [[0, 1, 0], [1, 0, 1], [0, 1, 1]])
    path = tmp_path / "i.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer general\n2 2 3\n"
                    "1 1 2\n1 1 3\n2 2 4\n")
    A = read_graph(path)
    assert A.dtype == np.float64 and A.nnz == 2          # the duplicate (1, 1) is summed
    np.testing.assert_array_equal(A.toarray(), [[5, 0], [0, 4]])


def test_a_dense_real_mtx_array_is_read(tmp_path):
    dense = np.array([[1.0, 0.5], [0.5, 2.0]])
    path = tmp_path / "d.mtx"
    scipy.io.mmwrite(path, dense)
    np.testing.assert_array_equal(read_graph(path).toarray(), dense)


def test_unsorted_duplicate_entries_become_canonical(tmp_path):
    A = sparse.csr_matrix((np.array([1.0, 2.0, 4.0]), np.array([1, 0, 1]),
                           np.array([0, 3, 3])), shape=(2, 2))
    assert not A.has_canonical_format
    path = tmp_path / "u.npz"
    sparse.save_npz(path, A, compressed=False)
    B = read_graph(path)
    assert B.has_canonical_format
    np.testing.assert_array_equal(B.toarray(), [[2.0, 5.0], [0.0, 0.0]])


def test_model_and_data_archives_are_not_graphs(tmp_path):
    data = tmp_path / "data.npz"
    np.savez(data, X=np.ones((3, 2)))
    model = tmp_path / "model.npz"
    np.savez(model, meta=np.array('{"kind": "model"}'), labels=np.zeros(3, dtype=np.int32))
    for path in (data, model):
        assert not is_graph_file(path)
    with pytest.raises(DataError, match=r"data\.npz: is an \.npz archive without a sparse "
                                        r"matrix \(arrays X\)"):
        read_graph(data)
    with pytest.raises(DataError, match=r"model\.npz: .*\(a model file\)"):
        read_graph(model)
    assert not is_graph_file(tmp_path / "x.csv")
    assert not is_graph_file(tmp_path / "missing.npz")


def corrupt_files(tmp_path, graph):
    """(path, message) of each bad file."""
    out = []
    good = tmp_path / "good.npz"
    sparse.save_npz(good, graph)
    raw = good.read_bytes()
    cut = tmp_path / "truncated.npz"
    cut.write_bytes(raw[: len(raw) // 2])
    out.append((cut, r"truncated\.npz: truncated or not an \.npz archive"))
    text = tmp_path / "text.npz"
    text.write_text("1,2,3\n")
    out.append((text, r"text\.npz: not an \.npz archive \(it does not start as a zip"))
    fmt = tmp_path / "format.npz"
    np.savez(fmt, format=np.array("lil"), data=np.ones(2))
    out.append((fmt, r"format\.npz: its 'format' entry is 'lil', not a sparse format"))
    lacking = tmp_path / "lacking.npz"
    np.savez(lacking, format=np.array("csr"), data=np.ones(2), shape=np.array([2, 2]))
    out.append((lacking, r"lacking\.npz: a csr matrix without its array"))
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, format=np.array([{"a": 1}], dtype=object))
    out.append((pickled, r"pickled\.npz: cannot read \(.*allow_pickle"))
    mtx = tmp_path / "g.mtx"
    scipy.io.mmwrite(mtx, graph)
    lines = mtx.read_text().splitlines(keepends=True)
    short = tmp_path / "short.mtx"
    short.write_text("".join(lines[: len(lines) // 2]))
    out.append((short, r"short\.mtx: truncated Matrix Market coordinate file"))
    banner = tmp_path / "banner.mtx"
    banner.write_text("1 2 3\n4 5 6\n")
    out.append((banner, r"banner\.mtx: not a Matrix Market file"))
    cplx = tmp_path / "complex.mtx"
    scipy.io.mmwrite(cplx, np.array([[1.0, 2.0j], [2.0j, 1.0]]))
    out.append((cplx, r"complex\.mtx: holds complex numbers; an affinity is real"))
    skew = tmp_path / "skew.mtx"
    skew.write_text("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1.0\n")
    out.append((skew, r"skew\.mtx: is skew-symmetric; an affinity is symmetric"))
    huge = tmp_path / "huge.mtx"  # 800 GB of row pointers if it were made
    huge.write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                    "100000000000 100000000000 1\n1 1 1.0\n")
    out.append((huge, r"huge\.mtx: declares 100,000,000,000 rows but holds 1 entry, so some "
                      r"row has no positive weight"))
    out.append((tmp_path / "absent.mtx", r"absent\.mtx: no such file"))
    folder = tmp_path / "folder.npz"
    folder.mkdir()
    out.append((folder, r"folder\.npz: is a folder, not a graph file"))
    out.append((tmp_path / "x.csv", r"x\.csv: not a graph file"))
    return out


def test_each_bad_file_gives_its_one_line_message(tmp_path, graph):
    for path, message in corrupt_files(tmp_path, graph):
        with pytest.raises(DataError, match=message) as err:
            read_graph(path)
        assert "\n" not in str(err.value), path
        assert str(path) in str(err.value)


def test_a_corrupt_member_of_a_graph_archive(tmp_path, graph):
    path = tmp_path / "member.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("format.npy", b"\x93NUMPY garbage")
    with pytest.raises(DataError, match=r"member\.npz: cannot read") as err:
        read_graph(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad, message", [
    (sparse.csr_matrix((0, 0)), r"affinity is empty \(0×0\)"),
    (np.array([1.0, 2.0]), "must be a 2-D matrix, got 1 dimensions"),
    (np.array([["a", "b"], ["b", "a"]]), "must hold real numbers"),
    (sparse.csr_matrix(np.array([[1.0, 1j], [1j, 1.0]])), "must hold real numbers"),
    (np.array([[1.0, np.inf], [np.inf, 1.0]]), "row 0, column 1: inf is not a finite"),
])
def test_the_affinity_checks_of_what_a_file_can_hold(bad, message):
    with pytest.raises(DataError, match=message) as err:
        kgraph.check_affinity(bad)
    assert "\n" not in str(err.value)


def test_more_clusters_than_points_of_a_given_affinity(graph):
    with pytest.raises(DataError, match="affinity has 40 points, fewer than the 41 clusters"):
        fit_graph(affinity=graph, n_clusters=41)


@pytest.mark.parametrize("bad, message", [
    (np.array([[1.0, -2.0], [-2.0, 1.0]]), "row 0, column 1: negative weight -2"),
    (np.array([[1.0, 2.0], [0.5, 1.0]]), "not symmetric: row 0, column 1 holds 2"),
    (np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
     "row 2 has no positive weight"),
    (np.ones((2, 3)), "must be square, got 2×3"),
])
def test_a_bad_graph_read_from_a_file_is_refused_by_the_fit(tmp_path, bad, message):
    path = tmp_path / "bad.mtx"
    scipy.io.mmwrite(path, sparse.coo_matrix(bad))
    with pytest.raises(DataError, match=message):
        fit_graph(affinity=read_graph(path), n_clusters=2)


def test_weights_whose_row_sum_overflows_are_one_line_naming_the_row(tmp_path):
    """Every weight finite, a degree (or the sum of the degrees, the largest volume a cluster
    can have) not: one line (no NumPy overflow warning), exit 1, nothing written."""
    path = tmp_path / "big.mtx"
    head = "%%MatrixMarket matrix coordinate real symmetric\n"
    for body, where in (("3 3 4\n1 1 1e308\n2 1 1e308\n3 2 1e308\n3 3 1e308\n", " row 0:"),
                        ("4 4 2\n2 1 1e308\n4 3 1e308\n", ":")):
        path.write_text(head + body)
        result = run_process(["fit", path, "--kernel", "precomputed", "-k", "2", "-o",
                              tmp_path / "m.npz", "--labels", tmp_path / "l.txt"], cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr == (f"kkmeans: error: {path}{where} its weights sum to more than "
                                 f"the largest float (about 1.8e308); scale the weights down\n")
        assert sorted(os.listdir(tmp_path)) == ["big.mtx"]
    # just below: the fit, its model and the model's description are finite
    path.write_text("%%MatrixMarket matrix coordinate real symmetric\n4 4 2\n2 1 4e307\n"
                    "4 3 4e307\n")
    result = run_process(["fit", path, "--kernel", "precomputed", "-k", "2", "-o",
                          tmp_path / "m.npz"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    labels = result.stdout.split()
    assert labels[0] == labels[1] != labels[2] == labels[3]
    assert "nan" not in result.stderr and "inf" not in result.stderr
    info = run_process(["info", tmp_path / "m.npz", "--json"], cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    # a degree too small to divide by (a subnormal weight): one line, not an overflow warning
    path.write_text("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n2 1 5e-324\n")
    result = run_process(["fit", path, "--kernel", "precomputed", "-k", "1", "--no-model"],
                         cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (f"kkmeans: error: {path} row 0: its weights sum to 4.94e-324, too "
                             f"small to divide by (below about 5.6e-309); scale the weights "
                             f"up\n")


@pytest.mark.parametrize("name, written", [("g.npz", "scipy.sparse.save_npz"),
                                           ("g.mtx", "Matrix Market")])
def test_a_graph_without_kernel_precomputed_says_how_to_cluster_it(tmp_path, graph, name,
                                                                   written):
    path = tmp_path / name
    if name.endswith(".npz"):
        sparse.save_npz(path, graph)
    else:
        scipy.io.mmwrite(path, graph)
    for command in (["fit", path, "-k", "2", "--labels", tmp_path / "l.txt"],
                    ["fit", path, "-k", "2", "--kernel", "rbf", "-o", tmp_path / "m.npz"],
                    ["sweep", path, "--k", "2..3", "--table", tmp_path / "t.csv"]):
        result = run_process(command, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr == (f"kkmeans: error: {path}: is a sparse graph ({written}): DATA "
                                 f"of fit and sweep with --kernel precomputed\n"), command
        assert sorted(os.listdir(tmp_path)) == [name]


def test_kernel_settings_with_a_precomputed_kernel_are_warned_about(tmp_path, graph):
    """--gamma (and, for a matrix, --degree and --coef0) set kernels computed from the data:
    with --kernel precomputed they are warned about and change nothing; a graph refuses
    --degree (one line, no warning before it)."""
    sparse.save_npz(tmp_path / "g.npz", graph)
    np.save(tmp_path / "K.npy", graph.toarray())
    for name, extra, flags, what in (
            ("K.npy", ["--gamma", "2", "--degree", "4"], ["--gamma", "--degree"],
             "the kernel matrix"),
            ("g.npz", ["--gamma", "2"], ["--gamma"], "the graph")):
        plain = run_process(["fit", tmp_path / name, "--kernel", "precomputed", "-k", "2",
                             "--no-model"], cwd=tmp_path)
        result = run_process(["fit", tmp_path / name, "--kernel", "precomputed", "-k", "2",
                              "--no-model", *extra], cwd=tmp_path)
        assert result.returncode == 0 and result.stdout == plain.stdout
        warned = [line for line in result.stderr.splitlines() if "is a setting" in line]
        assert warned == [f"kkmeans: warning: {flag} is a setting of the kernels computed "
                          f"from the data; with --kernel precomputed DATA is {what}; ignored"
                          for flag in flags]
    result = run_process(["fit", tmp_path / "g.npz", "--kernel", "precomputed", "-k", "2",
                          "--degree", "2", "--no-model"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("kkmeans: error: --degree 2 is a setting of the dense "
                                    "kernels") and len(result.stderr.splitlines()) == 1


def test_npz_and_mtx_of_one_graph_give_the_same_labels(tmp_path):
    A = two_moons_graph()
    npz, mtx = tmp_path / "moons.npz", tmp_path / "moons.mtx"
    sparse.save_npz(npz, A)
    scipy.io.mmwrite(mtx, A, symmetry="symmetric", precision=17)
    from_npz = fit_graph(affinity=read_graph(npz), n_clusters=2, random_state=0)
    from_mtx = fit_graph(affinity=read_graph(mtx), n_clusters=2, random_state=0)
    direct = fit_graph(affinity=A, n_clusters=2, random_state=0)
    np.testing.assert_array_equal(from_npz.labels, from_mtx.labels)
    np.testing.assert_array_equal(from_npz.labels, direct.labels)
    assert from_npz.ncut == from_mtx.ncut
