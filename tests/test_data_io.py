"""Readers and atomic writers of ``kkmeans_cli.io.readers`` and ``kkmeans_cli.io.outputs``."""
import io
import os

import h5py
import numpy as np
import pytest

from kkmeans_cli.io.outputs import (AtomicOutputs, check_output_path, format_json, format_labels,
                                    write_matrix)
from kkmeans_cli.io.readers import read_data, read_vector, split_hdf5_spec
from kkmeans_cli.errors import DataError, OutputError, UsageError

X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5], [-7.0, 8.0, 9.25]])


def _text(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    return str(path)


@pytest.mark.parametrize("content", [
    "a,b,c\n1,2,3\n4,5,6.5\n-7,8,9.25\n",
    "1,2,3\n4,5,6.5\n-7,8,9.25\n",
    "a\tb\tc\n1\t2\t3\n4\t5\t6.5\n-7\t8\t9.25\n",
    "1;2;3\n4;5;6.5\n-7;8;9.25\n\n\n",
    "1 2   3\n4 5 6.5\n-7 8 9.25\n",
    '"a","b","c"\n"1",2,3\n4,5,6.5\n-7,8,9.25\n',
])
def test_text_formats_and_header_detection(tmp_path, content):
    data = read_data(_text(tmp_path, "d.txt", content))
    assert np.array_equal(data.X, X)
    assert data.kept.all() and data.n_rows == 3
    assert data.columns == (["a", "b", "c"] if content[0] in 'a"' else None)


@pytest.mark.parametrize("content, names", [
    # a header whose names hold another candidate: the row of numbers holds one alone
    ("weight, kg\theight, cm, total\tc\n1\t2\t3\n4\t5\t6.5\n-7\t8\t9.25\n",
     ["weight, kg", "height, cm, total", "c"]),
    ("Gewicht, kg;Groesse, cm;c\n# a comment\n1;2;3\n4;5;6.5\n-7;8;9.25\n",
     ["Gewicht, kg", "Groesse, cm", "c"]),
    # a candidate inside quotes is part of a name
    ('"a,b"\tc\td\n1\t2\t3\n4\t5\t6.5\n-7\t8\t9.25\n', ["a,b", "c", "d"]),
    ('"a;b",c,d\n1,2,3\n4,5,6.5\n-7,8,9.25\n', ["a;b", "c", "d"]),
    # the row decides, though the names then fall short
    ("a,b;c\n1,2,3\n", None),
])
def test_the_delimiter_told_past_the_names_of_a_header(tmp_path, content, names):
    """Without --delimiter the first line tells it, the first of ',', tab and ';' it holds
    outside quotes; where it holds several, the next line of data decides (a row of numbers
    holds the delimiter alone). It was the first anywhere on the line: 'line 2 has 1 field,
    expected 3'."""
    path = _text(tmp_path, "d.tsv", content)
    if names is None:
        with pytest.raises(DataError, match="line 2 has 3 fields, expected 2"):
            read_data(path)
        return
    data = read_data(path)
    np.testing.assert_array_equal(data.X, X)
    assert data.columns == names


def test_one_quoted_name_holding_a_comma(tmp_path):
    data = read_data(_text(tmp_path, "d.csv", '"a,b"\n1\n2\n'))
    assert data.columns == ["a,b"] and np.array_equal(data.X, [[1], [2]])


def test_header_flag_and_delimiter(tmp_path):
    path = _text(tmp_path, "d.csv", "10|20\n1|2\n")
    assert np.array_equal(read_data(path, delimiter="|").X, [[10, 20], [1, 2]])
    data = read_data(path, delimiter="|", header=True)
    assert np.array_equal(data.X, [[1, 2]]) and data.columns == ["10", "20"]
    tabbed = _text(tmp_path, "t.txt", "1\t2\n3\t4\n")
    assert np.array_equal(read_data(tabbed, delimiter="tab").X, [[1, 2], [3, 4]])
    with pytest.raises(UsageError, match="one character"):
        read_data(path, delimiter="||")


def test_zero_bytes_are_no_text(tmp_path):
    """Zero bytes are valid UTF-8 but in no text: a file of them (space set aside and never
    written) was 'has a header line but no data rows', UTF-16 without its byte-order mark
    "'\\x003\\x00' is not a number"."""
    zeros = tmp_path / "zeros.csv"
    zeros.write_bytes(b"\0" * 4096)
    with pytest.raises(DataError, match=r"zeros\.csv: not a text file \(a zero byte at byte "
                                        r"0, line 1\); .*; it begins with zero bytes only"):
        read_data(str(zeros))
    utf16 = tmp_path / "u16.csv"
    utf16.write_bytes("1,2\n3,4\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=r"u16\.csv: not a text file \(a zero byte at byte 1, "
                                        r"line 1\); .*it looks like UTF-16 text"):
        read_data(str(utf16))
    late = tmp_path / "late.csv"
    late.write_bytes(b"a,b\n1,2\n3\0,4\n")
    with pytest.raises(DataError, match=r"late\.csv: not a text file \(a zero byte at byte 9, "
                                        r"line 3\); binary data must be .npy, HDF5, Parquet "
                                        r"or Feather \(given as a file\)$"):
        read_data(str(late))


def test_columns_by_name_and_index(tmp_path):
    path = _text(tmp_path, "d.csv", "id,a,b\n1,2,3\n4,5,6\n")
    data = read_data(path, columns="b,a")
    assert np.array_equal(data.X, [[3, 2], [6, 5]]) and data.columns == ["b", "a"]
    assert np.array_equal(read_data(path, columns="2,0").X, [[3, 1], [6, 4]])
    with pytest.raises(UsageError, match="has no column 'c'; its columns are id, a, b"):
        read_data(path, columns="c")
    with pytest.raises(UsageError, match="index 3 is out of range"):
        read_data(path, columns="3")
    with pytest.raises(UsageError, match="no header line"):
        read_data(_text(tmp_path, "n.csv", "1,2\n"), columns="a")


def test_text_errors_name_file_line_and_column(tmp_path):
    path = _text(tmp_path, "d.csv", "a,b\n1,2\n3,x\n")
    with pytest.raises(DataError, match=r"d\.csv: line 3, column 2 \('b'\): 'x' is not a number"):
        read_data(path)
    with pytest.raises(DataError, match="line 3 has 3 fields, expected 2"):
        read_data(_text(tmp_path, "r.csv", "1,2\n3,4\n5,6,7\n"))
    with pytest.raises(DataError, match="the file is empty"):
        read_data(_text(tmp_path, "e.csv", ""))
    with pytest.raises(DataError, match=r"e\.csv: holds no data \(only blank lines\)"):
        read_data(_text(tmp_path, "e.csv", "\n\n"))
    with pytest.raises(DataError, match=r"w\.csv: holds no data \(only blank lines\)"):
        read_data(_text(tmp_path, "w.csv", "  \t \n\n"))        # was 'the file is empty'
    with pytest.raises(DataError, match=r"c\.csv: holds no data \(only comments and blank"):
        read_data(_text(tmp_path, "c.csv", "# a\n\n"))
    with pytest.raises(DataError, match="no data rows"):
        read_data(_text(tmp_path, "h.csv", "a,b\n"))
    with pytest.raises(DataError, match="no such file"):
        read_data(str(tmp_path / "none.csv"))


def test_missing_values_error_or_drop(tmp_path):
    path = _text(tmp_path, "d.csv", "a,b\n1,2\n,4\n5,NA\n\n7,8\n")
    with pytest.raises(DataError, match="line 3, column 1 \\('a'\\): missing value"):
        read_data(path)
    data = read_data(path, missing="drop")
    assert data.kept.tolist() == [True, False, False, False, True]
    assert np.array_equal(data.X, [[1, 2], [7, 8]]) and data.n_dropped == 3


def test_stdin_stream():
    data = read_data("-", stdin=io.StringIO("x,y\n1,2\n3,4\n"))
    assert data.source == "<stdin>"
    assert np.array_equal(data.X, [[1, 2], [3, 4]])


def test_npy(tmp_path):
    np.save(tmp_path / "d.npy", X.astype(np.float32))
    data = read_data(str(tmp_path / "d.npy"), columns="0,2")
    assert data.X.dtype == np.float64
    assert np.array_equal(data.X, X[:, [0, 2]])
    np.save(tmp_path / "v.npy", np.arange(3.0))
    with pytest.raises(DataError, match="2-D array.*reshape"):
        read_data(str(tmp_path / "v.npy"))
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="holds Python objects"):
        read_data(str(tmp_path / "o.npy"))
    np.save(tmp_path / "s.npy", np.array([["a", "b"]]))
    with pytest.raises(DataError, match="numeric array is needed"):
        read_data(str(tmp_path / "s.npy"))


def test_hdf5(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("/g/x", data=X)
    assert np.array_equal(read_data(f"{path}:/g/x").X, X)
    assert np.array_equal(read_data(str(path), dataset="/g/x").X, X)
    assert np.array_equal(read_data(str(path)).X, X)  # the only dataset
    with pytest.raises(DataError, match="is an HDF5 group"):
        read_data(f"{path}:/g")
    with pytest.raises(DataError, match="no such dataset.*datasets: /g/x"):
        read_data(f"{path}:/y")
    (tmp_path / "fake.h5").write_text("not hdf5")
    with pytest.raises(DataError, match="not a readable HDF5 file"):
        read_data(f"{tmp_path / 'fake.h5'}:/x")


def test_split_hdf5_spec():
    assert split_hdf5_spec("a.h5:/g/x") == ("a.h5", "/g/x")
    assert split_hdf5_spec("C:/data/a.hdf5:/x") == ("C:/data/a.hdf5", "/x")
    assert split_hdf5_spec("data.csv") == ("data.csv", None)
    assert split_hdf5_spec("weird:name.csv") == ("weird:name.csv", None)


def test_read_vector(tmp_path):
    path = _text(tmp_path, "w.txt", "weight\n1\n2.5\n0\n")
    assert np.array_equal(read_vector(path, "weights"), [1, 2.5, 0])
    with pytest.raises(DataError, match=r"initial labels value 2 \(2.5\) is not a whole number"):
        read_vector(path, "initial labels", integer=True)
    ints = read_vector(_text(tmp_path, "l.txt", "0\n1\n1\n"), "labels", integer=True)
    assert ints.dtype == np.int64 and ints.tolist() == [0, 1, 1]
    with pytest.raises(DataError, match="one value per line; found 2 columns"):
        read_vector(_text(tmp_path, "two.txt", "1,2\n"), "weights")


def test_format_labels_and_json():
    assert format_labels(np.array([1, 0, 2])) == "1\n0\n2\n"
    kept = np.array([True, False, True, True])
    assert format_labels(np.array([1, 0, 2]), kept) == "1\n-1\n0\n2\n"
    assert format_json({"a": [1, 2]}) == '{\n  "a": [\n    1,\n    2\n  ]\n}\n'


def test_atomic_outputs_commit(tmp_path):
    (tmp_path / "b.txt").write_text("old")
    with AtomicOutputs() as out:
        out.open(str(tmp_path / "a.txt"), "a").write(b"new a")
        out.open(str(tmp_path / "b.txt"), "b").write(b"new b")
        assert (tmp_path / "b.txt").read_text() == "old"  # nothing in place until the end
        assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "a.txt").read_text() == "new a"
    assert (tmp_path / "b.txt").read_text() == "new b"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_atomic_outputs_discard_on_error(tmp_path, error):
    (tmp_path / "b.txt").write_text("old")
    with pytest.raises(error):
        with AtomicOutputs() as out:
            out.open(str(tmp_path / "a.txt"), "a").write(b"new a")
            out.open(str(tmp_path / "b.txt"), "b").write(b"half")
            raise error
    assert sorted(os.listdir(tmp_path)) == ["b.txt"]
    assert (tmp_path / "b.txt").read_text() == "old"


def test_check_output_path(tmp_path):
    check_output_path("-", "labels")
    check_output_path(str(tmp_path / "new.txt"), "labels")
    with pytest.raises(OutputError, match="folder .*missing does not exist"):
        check_output_path(str(tmp_path / "missing" / "x.txt"), "labels")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        check_output_path(str(tmp_path / "file" / "sub" / "x.txt"), "model")
    with pytest.raises(OutputError, match="it is a folder"):
        check_output_path(str(tmp_path), "model")


def test_write_matrix(tmp_path):
    M = np.array([[0.5, 1.25], [np.nan, 3.0]])
    with open(tmp_path / "m.csv", "wb") as f:
        write_matrix(f, "m.csv", M)
    assert (tmp_path / "m.csv").read_text() == "0.5,1.25\nnan,3\n"
    with open(tmp_path / "m.npy", "wb") as f:
        write_matrix(f, "m.npy", M)
    assert np.array_equal(np.load(tmp_path / "m.npy"), M, equal_nan=True)
