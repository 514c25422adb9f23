"""Reading data: header detection, comment lines and their line numbers, binary input, HDF5
links, data files given where a model belongs, .npy headers, and the notice when standard input
is a terminal. Each failure is one ``kkmeans: error:`` line with exit code 1 (2 for usage), and
nothing is written."""
import io
import os
import pty
import select
import subprocess
import time

import h5py
import numpy as np
import pytest

from helpers import FAST, OLD, kkmeans_command, labels_of, listing, run, run_process
from kkmeans_cli.io.readers import read_data


def fails(work, args, code, line, input=None):
    """The command fails with exactly ``line`` on stderr, nothing on stdout, and leaves the
    folder as it was (the labels file untouched, no model, no temporary files). A line ending
    in ``(...)`` matches any reason in the brackets (the HDF5 library's words vary by
    version)."""
    before = listing(work)
    extra = (["--labels", work / "labels.txt"] + (["-o", work / "new.npz"]
                                                  if args[0] == "fit" else []))
    result = run(list(args) + extra, input=input)
    assert result.exit_code == code, result.stderr
    if line.endswith("(...)"):
        assert result.stderr.startswith(f"kkmeans: error: {line[:-4]}"), result.stderr
        assert result.stderr.endswith(")\n") and len(result.stderr.splitlines()) == 1
    else:
        assert result.stderr == f"kkmeans: error: {line}\n"
    assert result.stdout == ""
    assert listing(work) == before
    assert (work / "labels.txt").read_bytes() == OLD


# -- header detection -----------------------------------------------------------------------
def test_first_line_with_a_number_is_data_so_a_typo_is_reported(work):
    (work / "typo.csv").write_text("1.0,2.O\n1,2\n3,4\n5,6\n")
    fails(work, ["fit", "--kernel", "rbf", work / "typo.csv", "-k", "2"], 1,
          f"{work / 'typo.csv'}: line 1, column 2: '2.O' is not a number; line 1 holds "
          f"numbers, so it was read as data (pass --header if it is a header)")


@pytest.mark.parametrize("first, header", [
    ("x,y", True), ("x,NA", True), ("1.0,y", False), ("NA,NA", False), (",", False),
    ("nan,3", False), ("inf,y", False), ("a b,c", True)])
def test_header_only_when_no_field_is_a_number(first, header):
    text = f"{first}\n1,2\n3,4\n"
    try:
        data = read_data("-", stdin=io.StringIO(text), missing="drop")
    except ValueError as exc:  # data with a bad value: reported on line 1
        assert not header and "line 1" in str(exc)
        return
    assert (data.columns is not None) == header
    assert data.n_rows == (2 if header else 3)


def test_header_option_still_wins(work):
    (work / "num.csv").write_text("1,2\n3,4\n5,6\n7,8\n")
    result = run(["fit", "--kernel", "rbf", work / "num.csv", "-k", "2", "--header", "--no-model", *FAST, "-q"])
    assert result.exit_code == 0 and labels_of(result.stdout).shape == (3,)


# -- comments and line numbers --------------------------------------------------------------
def test_comment_lines_are_skipped_and_counted(work):
    (work / "c.csv").write_text("# made by hand\n# x, y in metres\nx,y\n1,2\n# a note\n3,4\n"
                                "5\n")
    fails(work, ["fit", "--kernel", "rbf", work / "c.csv", "-k", "2"], 1,
          f"{work / 'c.csv'}: line 7 has 1 field, expected 2 (as on line 3)")
    (work / "d.csv").write_text("# no header\n\n1,2\n3,x\n")
    fails(work, ["fit", "--kernel", "rbf", work / "d.csv", "-k", "2"], 1,
          f"{work / 'd.csv'}: line 4, column 2: 'x' is not a number")
    (work / "e.csv").write_text("# only\n# comments\n\n")
    fails(work, ["fit", "--kernel", "rbf", work / "e.csv", "-k", "2"], 1,
          f"{work / 'e.csv'}: holds no data (only comments and blank lines)")


def test_comment_lines_do_not_shift_labels(work):
    (work / "c.csv").write_text("# header follows\nx,y\n0,0\n# between rows\n0,0.1\n10,10\n"
                                "10,10.1\n")
    result = run(["fit", "--kernel", "rbf", work / "c.csv", "-k", "2", "--no-model", *FAST, "-q"])
    assert result.exit_code == 0, result.stderr
    labels = labels_of(result.stdout)
    assert labels.shape == (4,) and labels[0] == labels[1] != labels[2] == labels[3]


def test_comment_line_numbers_as_subprocess(work):
    (work / "c.csv").write_text("# comment\nx,y\n1,2\n3\n")
    result = run_process(["fit", "--kernel", "rbf", "c.csv", "-k", "1", "--no-model"], work)
    assert result.returncode == 1
    assert result.stderr == "kkmeans: error: c.csv: line 4 has 1 field, expected 2 (as on " \
                            "line 2)\n"
    assert result.stdout == ""


# -- binary and undecodable input -----------------------------------------------------------
def test_binary_data_on_stdin(work):
    fails(work, ["fit", "--kernel", "rbf", "-", "-k", "2"], 1,
          "<stdin>: not a text file (invalid start byte at byte 0, line 1); binary data must "
          "be .npy, HDF5, Parquet or Feather (given as a file); text is read as UTF-8: save a "
          "Latin-1 (or other) text file as UTF-8", input=b"\x93NUMPY\x01\x00\xff\xfe binary")
    proc = subprocess.run(kkmeans_command() + ["fit", "--kernel", "rbf", "-", "-k", "2", "--no-model"],
                          input=os.urandom(64) + b"\xff", capture_output=True, cwd=work,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith(b"kkmeans: error: <stdin>: not a text file (")
    assert len(proc.stderr.splitlines()) == 1 and b"unexpected" not in proc.stderr


def test_undecodable_file_and_split_errors(work):
    (work / "latin.csv").write_bytes(b"x,y\n1,2\n3,\xe9\n")
    fails(work, ["fit", "--kernel", "rbf", work / "latin.csv", "-k", "1"], 1,
          f"{work / 'latin.csv'}: not a text file (invalid continuation byte at byte 10, "
          f"line 3); binary data must be .npy, HDF5, Parquet or Feather (given as a file); "
          f"text is read as UTF-8: save a Latin-1 (or other) text file as UTF-8")
    (work / "utf16.csv").write_bytes("x,y\n1,2\n".encode("utf-16"))
    fails(work, ["fit", "--kernel", "rbf", work / "utf16.csv", "-k", "1"], 1,
          f"{work / 'utf16.csv'}: not a text file (invalid start byte at byte 0, line 1); "
          f"binary data must be .npy, HDF5, Parquet or Feather (given as a file); it looks "
          f"like UTF-16 text: save it as UTF-8")
    (work / "long.csv").write_text("x,y\n1," + "9" * 200_000 + "\n")
    fails(work, ["fit", "--kernel", "rbf", work / "long.csv", "-k", "1"], 1,
          f"{work / 'long.csv'}: line 2: cannot be split into fields (field larger than "
          f"field limit (131072))")


# -- HDF5 -----------------------------------------------------------------------------------
@pytest.fixture
def links(work):
    path = work / "links.h5"
    with h5py.File(path, "w") as f:
        f["good"] = np.ones((4, 2))
        f["external"] = h5py.ExternalLink("missing.h5", "/data")
        f["soft"] = h5py.SoftLink("/nowhere")
        f.create_group("group")
    return path


@pytest.mark.parametrize("dataset, message", [
    ("/external", "is an external link to missing.h5:/data, which cannot be opened (...)"),
    ("/soft", "is a link to /nowhere, which does not exist"),
    ("/group", "is an HDF5 group, not a dataset"),
    ("/good/deeper", "no such dataset in {path} (datasets: /good)"),
])
def test_hdf5_links_and_names_that_cannot_be_read(work, links, dataset, message):
    fails(work, ["fit", "--kernel", "rbf", f"{links}:{dataset}", "-k", "1"], 1,
          f"{links}:{dataset}: " + message.format(path=links))


def test_hdf5_external_link_to_a_good_file_is_read(work):
    with h5py.File(work / "target.h5", "w") as f:
        f["data"] = np.arange(12.0).reshape(6, 2)
    with h5py.File(work / "outer.h5", "w") as f:
        f["x"] = h5py.ExternalLink("target.h5", "/data")
    result = run(["fit", "--kernel", "rbf", f"{work / 'outer.h5'}:/x", "-k", "2", "--no-model", *FAST, "-q"],
                 env={"HDF5_EXT_PREFIX": str(work)})
    assert result.exit_code == 0, result.stderr
    assert labels_of(result.stdout).shape == (6,)


# -- a data file where a model belongs --------------------------------------------------------
@pytest.mark.parametrize("command", ["info", "predict"])
def test_data_file_given_as_model(work, command):
    args = (["info", work / "data.csv"] if command == "info"
            else ["predict", work / "data.csv", work / "data.csv", "--labels",
                  work / "labels.txt"])
    result = run(args)
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {work / 'data.csv'}: not a kkmeans model file "
                             f"(a model is the .npz archive 'kkmeans fit' writes; this file "
                             f"is not a zip archive)\n")
    assert "allow_pickle" not in result.stderr and "pickle.load" not in result.stderr
    assert (work / "labels.txt").read_bytes() == OLD
    np.save(work / "array.npy", np.ones((3, 2)))
    result = run(["info", work / "array.npy"])
    assert result.exit_code == 1
    assert "not a kkmeans model file (it is a single .npy array" in result.stderr


# -- .npy headers ---------------------------------------------------------------------------
def test_npy_header_checked_against_the_file_size(work):
    np.save(work / "ok.npy", np.ones((5, 2)))
    data = (work / "ok.npy").read_bytes()
    (work / "cut.npy").write_bytes(data[:-8])
    fails(work, ["fit", "--kernel", "rbf", work / "cut.npy", "-k", "1"], 1,
          f"{work / 'cut.npy'}: truncated: its header declares a float64 array of shape "
          f"(5, 2) (208 bytes with the header), the file has 200 bytes")
    (work / "huge.npy").write_bytes(_npy_with_shape((10 ** 9, 10 ** 9)))
    start = time.perf_counter()
    fails(work, ["fit", "--kernel", "rbf", work / "huge.npy", "-k", "1"], 1,
          f"{work / 'huge.npy'}: truncated: its header declares a float64 array of shape "
          f"(1000000000, 1000000000) (8000000000000000128 bytes with the header), the file has "
          f"208 bytes")
    assert time.perf_counter() - start < 5
    (work / "pickle.npy").write_bytes(b"\x80\x04\x95 not numpy")
    fails(work, ["fit", "--kernel", "rbf", work / "pickle.npy", "-k", "1"], 1,
          f"{work / 'pickle.npy'}: not an .npy file (it does not start as one; a pickle is "
          f"never loaded)")
    np.save(work / "obj.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    fails(work, ["fit", "--kernel", "rbf", work / "obj.npy", "-k", "1"], 1,
          f"{work / 'obj.npy'}: holds Python objects; only numeric arrays are read (pickles "
          f"are never loaded)")


def _npy_with_shape(shape):
    """An .npy file whose header declares ``shape`` but holds ten numbers."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    header = buf.getvalue()
    return header + np.arange(10.0).tobytes()


# -- standard input -------------------------------------------------------------------------
def test_weights_and_data_both_from_stdin_is_a_usage_error(work):
    fails(work, ["fit", "--kernel", "rbf", "-", "-k", "1", "--weights", "-"], 2,
          "DATA is read from standard input, so the weights cannot be too; give the weights "
          "as a file", input="1,2\n3,4\n")


def test_terminal_on_stdin_gets_a_notice():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    said = []
    data = read_data("-", stdin=Terminal("1,2\n3,4\n"), announce=said.append)
    assert data.X.shape == (2, 2)
    assert said == ["reading CSV from standard input (the terminal); end it with Ctrl-D, or "
                    "give a file instead of -"]
    said.clear()
    read_data("-", stdin=io.StringIO("1,2\n"), announce=said.append)  # a pipe: no notice
    assert said == []


def test_terminal_on_stdin_notice_from_the_real_command(tmp_path):
    master, slave = pty.openpty()
    proc = subprocess.Popen(kkmeans_command() + ["fit", "--kernel", "rbf", "-", "-k", "1", "--no-model",
                                                 "--threads", "1"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path)
    os.close(slave)
    try:
        # The notice comes before any input is typed.
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready
        line = proc.stderr.readline().decode()
        assert line == ("kkmeans: reading CSV from standard input (the terminal); end it "
                        "with Ctrl-D, or give a file instead of -\n")
        os.write(master, b"1,2\n3,4\n")
        os.write(master, b"\x04")  # Ctrl-D at the start of a line: end of input
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.decode().split() == ["0", "0"]
    quiet = subprocess.run(kkmeans_command() + ["fit", "--kernel", "rbf", "-", "-k", "1", "--no-model", "-q"],
                           input=b"1,2\n", capture_output=True, cwd=tmp_path, timeout=60)
    assert quiet.stderr == b""  # not a terminal: nothing said


# -- relatives: other inputs through the same readers ---------------------------------------------
def test_device_as_data_is_refused(work):
    fails(work, ["fit", "--kernel", "rbf", "/dev/zero", "-k", "1"], 1,
          "/dev/zero: is a device, not a data file (give - to read standard input)")


def test_fifo_as_data_is_read(work):
    fifo = work / "data.fifo"
    os.mkfifo(fifo)
    text = (work / "data.csv").read_text()
    writer = subprocess.Popen(["sh", "-c", f"cat '{work / 'data.csv'}' > '{fifo}'"])
    result = run(["fit", "--kernel", "rbf", fifo, "-k", "3", "--no-model", "--threads", "1", "--n-init", "2",
                  "-q"])
    writer.wait(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert labels_of(result.stdout).shape == (len(text.splitlines()) - 1,)


def test_weights_and_init_files_go_through_the_same_checks(work, links):
    (work / "w.bin").write_bytes(b"\xff\xfe\x00binary")
    # The same messages as for DATA, after the option that named the file.
    fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", "--weights", work / "w.bin"], 1,
          f"--weights {work / 'w.bin'}: not a text file (invalid start byte at byte 0, line 1); "
          f"binary data must be .npy, HDF5, Parquet or Feather (given as a file); it looks "
          f"like UTF-16 text: save it as UTF-8")
    fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", "--weights", f"{links}:/external"], 1,
          f"--weights {links}:/external: is an external link to missing.h5:/data, which cannot "
          f"be opened (...)")
    fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", "--init", f"{links}:/soft"], 1,
          f"--init {links}:/soft: is a link to /nowhere, which does not exist")
    (work / "init.npy").write_bytes(_npy_with_shape((30,)))
    fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", "--init", work / "init.npy"], 1,
          f"--init {work / 'init.npy'}: truncated: its header declares a float64 array of "
          f"shape (30,) (368 bytes with the header), the file has 208 bytes")


def test_hdf5_dataset_larger_than_memory_is_refused_unread(work, monkeypatch):
    from kkmeans_cli import memory
    from kkmeans_cli.memory import format_bytes

    monkeypatch.setattr(memory, "default_limit", lambda: 2 ** 30)  # fixed: the machine's varies
    path = work / "big.h5"
    with h5py.File(path, "w") as f:  # a few KB on disk: chunked, nothing written
        f.create_dataset("x", shape=(10 ** 7, 10 ** 5), dtype="f8", chunks=(100, 100),
                         compression="gzip")
    start = time.perf_counter()
    fails(work, ["fit", "--kernel", "rbf", f"{path}:/x", "-k", "2"], 1,
          f"{path}:/x: the dataset of shape (10000000, 100000) needs {format_bytes(8 * 10 ** 12)}"
          f" as float64, more than the memory available ({format_bytes(2 ** 30)})")
    assert time.perf_counter() - start < 10


def test_model_given_as_data(work):
    fails(work, ["fit", "--kernel", "rbf", work / "model.npz", "-k", "2"], 1,
          f"{work / 'model.npz'}: is an .npz archive, not DATA (a model is read by 'kkmeans "
          f"predict MODEL DATA'; a sparse graph is an archive of save_npz); DATA is text, .npy, "
          f"HDF5, Parquet or Feather")


@pytest.mark.parametrize("kind", ["text", "cut"])
def test_an_npz_that_is_no_readable_zip_archive_says_so(work, kind):
    """A text file named .npz, or a zip archive cut short (its central directory gone), is
    neither a model nor a graph: the line says what it is not, or that it is damaged (not
    that it is no DATA), whichever kernel is asked for, for predict's DATA and sweep's too."""
    path = work / f"{kind}.npz"
    if kind == "text":
        path.write_text("1,2\n3,4\n")
        what = "not an .npz archive (it does not start as a zip file)"
    else:
        raw = (work / "model.npz").read_bytes()
        path.write_bytes(raw[:len(raw) // 2])
        what = "a truncated or damaged .npz archive (File is not a zip file)"
    line = (f"{path}: {what}; DATA is text, .npy, HDF5, Parquet or Feather (with --kernel "
            f"precomputed, also a sparse graph: an .npz of scipy.sparse.save_npz or a Matrix "
            f"Market .mtx)")
    fails(work, ["fit", path, "-k", "2"], 1, line)
    fails(work, ["fit", "--kernel", "precomputed", path, "-k", "2"], 1, line)
    fails(work, ["predict", work / "model.npz", path], 1, line)
    before = listing(work)
    result = run(["sweep", "--kernel", "precomputed", path, "--k", "2..3"])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"kkmeans: error: {line}\n")
    assert listing(work) == before


def test_hdf5_damaged_files(work):
    path = work / "t.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("c", data=np.ones((1000, 2)), chunks=(100, 2), compression="gzip")
        offset = f["c"].id.get_chunk_info(0).byte_offset
    data = bytearray(path.read_bytes())
    data[offset:offset + 20] = b"\xff" * 20  # a compressed chunk that does not inflate
    (work / "bad.h5").write_bytes(bytes(data))
    fails(work, ["fit", "--kernel", "rbf", f"{work / 'bad.h5'}:/c", "-k", "2"], 1,
          f"{work / 'bad.h5'}:/c: cannot read dataset (...)")
    (work / "cut.h5").write_bytes(bytes(data[:len(data) // 2]))
    result = run(["fit", "--kernel", "rbf", f"{work / 'cut.h5'}:/c", "-k", "2", "--no-model"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"kkmeans: error: {work / 'cut.h5'}: not a readable HDF5 "
                                    f"file (")
    assert len(result.stderr.splitlines()) == 1
