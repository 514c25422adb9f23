"""Text DATA through NumPy's parser in blocks (``io/text.py``): the same rows and the same first
error as the cell-by-cell reference reader, for any cut of the input into blocks; a quoted cell
spanning lines refused; standard input streamed; gzip text."""
import gzip
import io
import os
import random
import subprocess

import numpy as np
import pytest

from helpers import FAST, blobs, kkmeans_command, labels_of, run, write_csv
from kkmeans_cli.io import text
from kkmeans_cli.io.readers import read_data


def outcome(raw, **options):
    """What ``read_data('-')`` makes of the bytes ``raw``: the data, or the error."""
    try:
        data = read_data("-", stdin=io.TextIOWrapper(io.BytesIO(raw)), **options)
    except ValueError as exc:  # DataError and UsageError
        return type(exc).__name__, str(exc)
    return "ok", repr(data.X.tolist()), data.kept.tolist(), data.columns


def reference(monkeypatch, raw, **options):
    """The reference reader: one block, cell by cell."""
    with monkeypatch.context() as m:
        m.setattr(text, "FAST", False)
        m.setattr(text, "BLOCK_BYTES", 2 ** 30)
        return outcome(raw, **options)


CELLS = ["1", "2.5", "-3e2", "nan", "NA", "", "inf", "x", " 4 ", '"5"', '"1,2"', '""', "7_0",
         "é", "8#", "#", "  ", "1e999", "+.5", "?", "None", "٣", "\x00", "1\x1c"]
ENDS = ["\n"] * 12 + ["\r\n"] * 3 + ["\r", "\x0b", "\u2028", "\n\n", "\n# c\n", "\n  \n"]


def random_text(rng):
    """Small delimited text with the hard cases of docs/cli.md mixed in."""
    width, n, sep = rng.randint(1, 3), rng.randint(0, 6), rng.choice([",", ",", ";", "\t", " "])
    out = ["\ufeff"] if rng.random() < .1 else []
    if rng.random() < .3:
        out.append("# comment" + rng.choice(ENDS))
    if rng.random() < .2:
        out.append(rng.choice(["", "  "]) + "\n")
    if rng.random() < .5:
        out.append(sep.join(rng.choice(["a", "b", "c", "d é"]) for _ in range(width))
                   + rng.choice(ENDS))
    for i in range(n):
        cells = [rng.choice(CELLS) if rng.random() < .3 else
                 str(round(rng.uniform(-9, 9), rng.randint(0, 3)))
                 for _ in range(width if rng.random() < .9 else rng.randint(1, 4))]
        out.append(sep.join(cells) + (rng.choice(ENDS) if i < n - 1 or rng.random() < .8
                                      else ""))
    if rng.random() < .2:
        out.append(rng.choice(["\n", "\n\n", "  \n", "# end\n"]))
    raw = "".join(out).encode()
    if rng.random() < .05:
        cut = rng.randint(0, len(raw))
        raw = raw[:cut] + b"\xff" + raw[cut:]
    return raw


@pytest.mark.parametrize("seed", range(4))
def test_blocks_read_as_the_reference_reader(monkeypatch, seed):
    """For random texts and options, any block size with the fast path gives exactly the
    result or the first error of the reference reader on the whole input."""
    rng = random.Random(seed)
    for _ in range(150):
        raw = random_text(rng)
        options = dict(header=rng.choice([None, None, True, False]),
                       delimiter=rng.choice([None] * 5 + [",", "tab", "whitespace", "ab"]),
                       columns=rng.choice([None] * 5 + ["0", "1,0", "b", "7"]),
                       missing=rng.choice(["error", "drop"]))
        expected = reference(monkeypatch, raw, **options)
        monkeypatch.setattr(text, "BLOCK_BYTES", rng.choice([1, 2, 3, 5, 8, 13, 64, 2 ** 20]))
        assert outcome(raw, **options) == expected, (raw, options, text.BLOCK_BYTES)


def test_numbers_as_python_reads_them(monkeypatch):
    """NumPy's parser gives the float64 that Python's float gives, bit for bit."""
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-300, 300, 3000),
                             [5e-324, 1.7976931348623157e308, -0.0, 0.1, 2 ** 53 + 1.0]]).tolist()
    cells = ([repr(v) for v in values] + [f"{v:.17e}" for v in values[:500]]
             + [f"{v:.3f}" for v in values[:500]] + ["1E5", "-.5e-3", "+7.", "0001.5"])
    raw = ("\n".join(cells) + "\n").encode()
    monkeypatch.setattr(text, "BLOCK_BYTES", 4096)
    X = read_data("-", stdin=io.TextIOWrapper(io.BytesIO(raw)), header=False).X[:, 0]
    assert X.tobytes() == np.array([float(c) for c in cells]).tobytes()


def test_quoted_cell_across_lines_is_refused(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('x,y\n1,2\n3,"1\n.5"\n4,5\n')
    (tmp_path / "labels.txt").write_text("OLD\n")
    result = run(["fit", "--kernel", "rbf", path, "-k", "1", "--labels", tmp_path / "labels.txt", "--no-model"])
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {path}: line 3, column 2 ('y'): a quoted cell "
                             f"does not close on its line (a cell cannot span lines)\n")
    assert sorted(os.listdir(tmp_path)) == ["labels.txt", "q.csv"]
    assert (tmp_path / "labels.txt").read_text() == "OLD\n"
    # quoted numbers on one line are numbers
    path.write_text('x,y\n"1","2"\n"3",4\n')
    assert read_data(str(path)).X.tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("head", ['"a\nx",b,c\n', 'a,"b\nx",c\n', 'a\t"b\nx"\tc\n'])
def test_quoted_header_cell_across_lines_is_refused(tmp_path, head):
    path = tmp_path / "q.csv"
    path.write_text(head + "1,2,3\n4,5,6\n7,8,9\n")
    result = run(["fit", "--kernel", "rbf", path, "-k", "2", "--labels", tmp_path / "l.txt",
                  "--no-model"])
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {path}: line 1: a quoted cell does not close on "
                             f"its line (a cell cannot span lines)\n")
    assert sorted(os.listdir(tmp_path)) == ["q.csv"]
    # a quote inside a header cell, not opening it, is a character of its name; quoted
    # cells that close are names, whatever quotes other cells hold
    for line, names in (('a"b,c', ['a"b', "c"]), ('"a",b"c', ["a", 'b"c']),
                        ('x,"y",z"', ["x", "y", 'z"']), ('"p,q",r', ["p,q", "r"])):
        path.write_text(line + "\n" + "\n".join(",".join(["1"] * len(names))
                                                 for _ in range(3)) + "\n")
        assert read_data(str(path)).columns == names, line


def test_bad_cell_in_a_late_block(tmp_path, monkeypatch):
    X, _ = blobs(n=3000, d=3)
    path = write_csv(tmp_path / "big.csv", X)
    with open(path) as f:
        lines = f.read().splitlines(keepends=True)
    lines[2900] = "1.0,oops,2.0\n"
    with open(path, "w") as f:
        f.writelines(lines)
    monkeypatch.setattr(text, "BLOCK_BYTES", 4096)
    with pytest.raises(ValueError, match=r"big.csv: line 2901, column 2 \('x1'\): 'oops' is "
                                         r"not a number$"):
        read_data(path)
    # a line that cannot be split later in the file comes first, as does a decode error
    with open(path, "w") as f:
        f.writelines(lines + ['1,2,"3\n'])
    with pytest.raises(ValueError, match=r"line 3002, column 3 \('x2'\): a quoted cell does "
                                         r"not close"):
        read_data(path)
    with open(path, "wb") as f:
        f.write("".join(lines).encode() + b"1,2,\xff\n")
    with pytest.raises(ValueError, match=r"not a text file \(invalid start byte at byte "):
        read_data(path)


def test_csv_stdin_and_npy_give_the_same_labels(tmp_path):
    X, _ = blobs(n=4000, d=4, k=5)
    csv_path = write_csv(tmp_path / "X.csv", X)
    np.save(tmp_path / "X.npy", read_data(csv_path).X)
    args = ["-k", "5", "--no-model", "-q", *FAST]
    from_npy = run(["fit", "--kernel", "rbf", tmp_path / "X.npy", *args])
    from_csv = run(["fit", "--kernel", "rbf", csv_path, *args])
    assert from_npy.exit_code == from_csv.exit_code == 0
    assert from_csv.stdout == from_npy.stdout
    with open(csv_path, "rb") as f:
        piped = subprocess.run(kkmeans_command() + ["fit", "--kernel", "rbf", "-", *args], stdin=f,
                               capture_output=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.decode() == from_npy.stdout


def test_stdin_is_read_in_blocks(monkeypatch):
    """A stream is read a block at a time (never whole): the reads are bounded."""
    sizes = []
    raw = b"x,y\n" + b"".join(b"%d,%d\n" % (i, -i) for i in range(5000))
    stream = io.BytesIO(raw)

    def read(n=-1):
        sizes.append(n)
        return stream.read(n)
    monkeypatch.setattr(text, "BLOCK_BYTES", 1000)
    holder = type("Stdin", (), {"buffer": type("B", (), {"read": staticmethod(read)})()})()
    data = read_data("-", stdin=holder)
    assert data.X.shape == (5000, 2) and data.X[-1].tolist() == [4999, -4999]
    assert sizes and set(sizes) == {1000}


def test_gzip_text(tmp_path):
    X, _ = blobs(n=50, d=2)
    path = write_csv(tmp_path / "X.csv", X)
    with open(path, "rb") as f, gzip.open(tmp_path / "X.csv.gz", "wb") as g:
        g.write(f.read())
    packed = read_data(str(tmp_path / "X.csv.gz"))
    plain = read_data(path)
    assert packed.X.tobytes() == plain.X.tobytes() and packed.columns == plain.columns
    (tmp_path / "cut.csv.gz").write_bytes((tmp_path / "X.csv.gz").read_bytes()[:60])
    result = run(["fit", "--kernel", "rbf", tmp_path / "cut.csv.gz", "-k", "2", "--no-model"])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"kkmeans: error: {tmp_path / 'cut.csv.gz'}: cannot read (")


def test_whitespace_crlf_comments_and_blank_lines_in_blocks(monkeypatch):
    raw = (b"# made by hand\r\n\r\n a   b \r\n" + b"".join(b" %d  %d \r\n" % (i, i) for i in range(300))
           + b"# note\r\n7 7\r\n\r\n  \r\n8 8\r\n\r\n# end\r\n")
    monkeypatch.setattr(text, "BLOCK_BYTES", 64)
    data = read_data("-", stdin=io.TextIOWrapper(io.BytesIO(raw)), missing="drop")
    assert data.columns == ["a", "b"]
    assert data.X[-2:].tolist() == [[7, 7], [8, 8]] and data.n_rows == 304
    assert data.kept.tolist() == [True] * 301 + [False, False, True]
    with pytest.raises(ValueError, match=r"line 306, column 1 \('a'\): missing value; use "):
        read_data("-", stdin=io.TextIOWrapper(io.BytesIO(raw)))
