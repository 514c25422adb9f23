"""Sparse graphs as DATA: an affinity matrix read from a file, as SciPy CSR.

Two formats:

``.npz`` written by ``scipy.sparse.save_npz``
    A zip of ``.npy`` arrays with a ``format`` entry (``csr``, ``csc``, ``coo``, ``bsr``,
    ``dia``) and the arrays of that format. It is read with ``allow_pickle=False``. A model
    file or an ``np.savez`` archive of data is also an ``.npz`` but has no ``format`` entry:
    ``is_graph_file`` tells them apart by content. The arrays are checked against the shape
    (indices inside it, row pointers rising from 0 to the number of entries, lengths equal)
    before any SciPy matrix is made of them: SciPy's compiled conversions trust them.
Matrix Market ``.mtx`` (also ``.mtx.gz``, ``.mtx.bz2``)
    Read by ``scipy.io.mmread``: coordinate files (``real``, ``integer`` or ``pattern``
    entries; ``symmetric`` storage lists one triangle, each weight once, and is expanded)
    and dense ``array`` files of real or integer numbers. Complex, Hermitian and
    skew-symmetric files are refused: an affinity is real and symmetric.

``read_graph`` returns the matrix canonical: CSR float64, duplicates summed, indices sorted.
Whether it *is* an affinity (square, symmetric, finite, non-negative, no empty row) is checked
where it is used (``kernels.graph.check_affinity``): this layer reads files only. Every
problem of the file is one ``DataError`` naming it.
"""
import os
import zipfile
import zlib

import numpy as np

from .._text import plural
from ..errors import DataError

NPZ_SUFFIXES = (".npz",)
MTX_SUFFIXES = (".mtx", ".mtx.gz", ".mtx.bz2")
SPARSE_FORMATS = ("csr", "csc", "coo", "bsr", "dia")
NPZ_ARRAYS = {"csr": ("data", "indices", "indptr", "shape"),   # save_npz's arrays by format
              "csc": ("data", "indices", "indptr", "shape"),
              "bsr": ("data", "indices", "indptr", "shape"),
              "coo": ("data", "row", "col", "shape"),          # or 'coords' for row and col
              "dia": ("data", "offsets", "shape")}
MTX_FIELDS = ("real", "integer", "pattern")
MTX_SYMMETRIES = ("general", "symmetric")
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")     # a zip's first entry, or an empty zip


def graph_kind(path):
    """'npz', 'mtx' or None by the file name's ending (case-insensitive)."""
    name = os.fspath(path).lower()
    if name.endswith(MTX_SUFFIXES):
        return "mtx"
    if name.endswith(NPZ_SUFFIXES):
        return "npz"
    return None


def is_graph_file(path):
    """Whether ``path`` names a sparse graph: a Matrix Market file by its ending, or an
    ``.npz`` archive holding a ``format`` entry (what ``save_npz`` writes; a model file or an
    ``np.savez`` data archive has none). An unreadable ``.npz`` is not a graph here: the reader
    that takes it says why."""
    kind = graph_kind(path)
    if kind != "npz":
        return kind == "mtx"
    try:
        with zipfile.ZipFile(path) as archive:
            return "format.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def starts_as_zip(path):
    """Whether the file ``path`` begins as a zip archive (an ``.npz``) does; a file that
    cannot be opened is a ``DataError`` saying why."""
    try:
        with open(path, "rb") as stream:
            return stream.read(4) in ZIP_MAGIC
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def zip_damage(path):
    """Why the zip archive ``path`` cannot be opened (truncated: its central directory
    missing, or damaged), or None where it opens."""
    try:
        with zipfile.ZipFile(path):
            return None
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        return str(exc) or type(exc).__name__


def read_graph(path):
    """The sparse matrix in ``path`` (``.npz`` of ``save_npz`` or Matrix Market ``.mtx``).

    Returns
    -------
    scipy.sparse.csr_matrix, float64, duplicates summed and indices sorted

    Raises
    ------
    DataError
        One line naming the file: missing, a folder, unreadable, truncated or corrupt, not a
        sparse matrix, or a Matrix Market file of a kind that cannot be an affinity.
    """
    path = os.fspath(path)
    kind = graph_kind(path)
    if kind is None:
        raise DataError(f"{path}: not a graph file (a graph is an .npz of "
                        f"scipy.sparse.save_npz or a Matrix Market .mtx)")
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a folder, not a graph file")
    A = _read_npz(path) if kind == "npz" else _read_mtx(path)
    return canonical(A, path)


def canonical(A, path):
    """CSR float64 with duplicates summed and sorted indices (``DataError`` for a matrix
    that is not 2-D or holds complex or non-numeric values)."""
    from scipy import sparse

    if A.ndim != 2:
        raise DataError(f"{path}: holds a {A.ndim}-D array, not a matrix")
    if np.iscomplexobj(A.data if sparse.issparse(A) else A):
        raise DataError(f"{path}: holds complex numbers; an affinity is real")
    dtype = A.dtype
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
        raise DataError(f"{path}: holds values of type {dtype}, not numbers")
    out = sparse.csr_matrix(A, dtype=np.float64)
    out.sum_duplicates()
    out.sort_indices()
    return out


def _read_npz(path):
    try:
        with open(path, "rb") as stream:
            return _read_npz_stream(stream, path)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _read_npz_stream(stream, path):
    """The matrix of an open ``save_npz`` archive (the file is opened and closed by the
    caller: NumPy leaves a file it opened itself unclosed when the zip is truncated)."""
    if stream.read(4) not in ZIP_MAGIC:
        raise DataError(f"{path}: not an .npz archive (it does not start as a zip file)")
    stream.seek(0)
    try:
        with np.load(stream, allow_pickle=False) as archive:
            names = set(archive.files)
            if "format" not in names:
                what = ("a model file" if "meta" in names
                        else f"arrays {', '.join(sorted(names))}" if names else "no arrays")
                raise DataError(f"{path}: is an .npz archive without a sparse matrix "
                                f"({what}); a graph is written by scipy.sparse.save_npz")
            fmt = archive["format"]
            fmt = fmt.item() if fmt.ndim == 0 else None
            fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else fmt
            if fmt not in SPARSE_FORMATS:
                raise DataError(f"{path}: its 'format' entry is {fmt!r}, not a sparse format "
                                f"({', '.join(SPARSE_FORMATS)})")
            needed = NPZ_ARRAYS[fmt]
            if fmt == "coo" and "coords" in names:
                needed = ("data", "coords", "shape")
            missing = [name for name in needed if name not in names]
            if missing:
                raise DataError(f"{path}: a {fmt} matrix without its array '{missing[0]}'")
            arrays = {name: archive[name] for name in needed}
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: a truncated or damaged .npz archive ({exc})") from None
    except ValueError as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: cannot read ({_reason(exc)})") from None
    try:
        A = _checked_matrix(fmt, arrays, path)
    except (ValueError, TypeError, IndexError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: not a valid {fmt} sparse matrix ({_reason(exc)})") from None
    return A


def _checked_matrix(fmt, arrays, path):
    """The sparse matrix of ``save_npz``'s arrays, made only once every array fits the
    shape: SciPy's compiled conversions trust the indices and would read or write outside
    their arrays (a crash, not an error). ``DataError`` naming the array that does not fit."""
    from scipy import sparse

    def bad(detail):
        return DataError(f"{path}: not a valid {fmt} sparse matrix ({detail})")

    def vector(name, ndim=1):
        value = arrays[name]
        if value.ndim != ndim or not np.issubdtype(value.dtype, np.integer):
            raise bad(f"its '{name}' entry is not {'a vector' if ndim == 1 else 'a table'} "
                      f"of integers")
        return value

    def within(name, value, low, high):
        # every value in [low, high): the first one outside named
        outside = np.flatnonzero((value < low) | (value >= high))
        if outside.size:
            i = int(outside[0])
            raise bad(f"its '{name}' entry holds {value.flat[i]} at position {i}, outside "
                      f"{low}..{high - 1} for the {rows}×{cols} shape")
        return value.astype(np.int64)

    shape = arrays["shape"]
    if shape.ndim != 1 or not np.issubdtype(shape.dtype, np.integer) or np.any(shape < 0) \
            or np.any(shape >= 2 ** 62):
        raise bad(f"its 'shape' entry is {shape.tolist()!r}, not a size in numbers of rows "
                  f"and columns")
    if shape.size != 2:
        raise DataError(f"{path}: holds a {shape.size}-D array, not a matrix")
    rows, cols = int(shape[0]), int(shape[1])
    data = arrays["data"]
    if not (np.issubdtype(data.dtype, np.number) or data.dtype == np.bool_):
        raise DataError(f"{path}: holds values of type {data.dtype}, not numbers")
    _check_square(path, rows, cols)
    if rows > max(data.size, FEW_ENTRIES_MIN_ROWS):
        raise DataError(_too_few_entries(path, rows, data.size))
    if fmt in ("csr", "csc", "bsr"):
        blocks = (1, 1)
        if fmt == "bsr":
            if data.ndim != 3 or 0 in data.shape[1:]:
                raise bad(f"its 'data' entry has shape {data.shape}, not blocks (count, rows, "
                          f"columns)")
            blocks = data.shape[1:]
            if rows % blocks[0] or cols % blocks[1]:
                raise bad(f"its {blocks[0]}×{blocks[1]} blocks do not divide the "
                          f"{rows}×{cols} shape")
        elif data.ndim != 1:
            raise bad(f"its 'data' entry is not a vector (shape {data.shape})")
        outer, inner = (cols, rows) if fmt == "csc" else (rows // blocks[0], cols // blocks[1])
        indptr, indices = vector("indptr"), vector("indices")
        if indptr.size != outer + 1:
            raise bad(f"its 'indptr' entry has {indptr.size} values; the {rows}×{cols} shape "
                      f"needs {outer + 1}")
        if indices.size != data.shape[0]:
            raise bad(f"its 'data' entry has {data.shape[0]} values but 'indices' has "
                      f"{indices.size}")
        steps = np.flatnonzero(np.diff(indptr) < 0)
        if indptr[0] != 0 or steps.size or indptr[-1] != indices.size:
            where = (0 if indptr[0] != 0 else int(steps[0]) + 1 if steps.size
                     else indptr.size - 1)
            raise bad(f"its 'indptr' entry holds {indptr[where]} at position {where}; it must "
                      f"rise from 0 to the {indices.size} indices")
        indices = within("indices", indices, 0, inner)
        indptr = indptr.astype(np.int64)
        kind = {"csr": sparse.csr_matrix, "csc": sparse.csc_matrix, "bsr": sparse.bsr_matrix}
        A = kind[fmt]((data, indices, indptr), shape=(rows, cols))
        A.check_format(full_check=True)     # SciPy's own checks, now that they are safe
        return A
    if fmt == "coo":
        if data.ndim != 1:
            raise bad(f"its 'data' entry is not a vector (shape {data.shape})")
        if "coords" in arrays:
            coords = vector("coords", ndim=2)
            if coords.shape[0] != 2:
                raise DataError(f"{path}: holds a {coords.shape[0]}-D array, not a matrix")
            row, col = coords
        else:
            row, col = vector("row"), vector("col")
        for name, value in (("row", row), ("col", col)):
            if value.size != data.size:
                raise bad(f"its 'data' entry has {data.size} values but '{name}' has "
                          f"{value.size}")
        row, col = within("row", row, 0, rows), within("col", col, 0, cols)
        return sparse.coo_matrix((data, (row, col)), shape=(rows, cols))
    # dia: data[i, j] is the entry (j − offsets[i], j); the entries inside the shape are kept
    offsets = vector("offsets")
    if data.ndim != 2 or data.shape[0] != offsets.size:
        raise bad(f"its 'data' entry has shape {data.shape}, not one row for each of the "
                  f"{offsets.size} offsets")
    offsets = within("offsets", offsets, -rows + 1 if rows else 0, max(cols, 1))
    if np.unique(offsets).size != offsets.size:
        raise bad("its 'offsets' entry repeats a diagonal")
    column = np.arange(min(data.shape[1], cols), dtype=np.int64)
    row = column[None, :] - offsets[:, None]
    keep = (row >= 0) & (row < rows)
    values = data[:, :column.size][keep]
    return sparse.coo_matrix((values, (row[keep], np.broadcast_to(column, row.shape)[keep])),
                             shape=(rows, cols))


def _decompressor(path):
    """``gzip.open`` or ``bz2.open`` where the name ends ``.gz`` or ``.bz2`` in any case,
    else None (a plain file)."""
    name = str(path).lower()
    if name.endswith(".gz"):
        import gzip

        return gzip.open
    if name.endswith(".bz2"):
        import bz2

        return bz2.open
    return None


def _mtx_source(path):
    """What ``mminfo`` and ``mmread`` read: a stream decompressed by ``_decompressor``
    (SciPy decompresses only the lower-case endings, and reads ``G.MTX.GZ`` as text), else
    the path itself (SciPy 1.17 aborts the process reading a plain file's binary stream)."""
    import contextlib

    opener = _decompressor(path)
    return contextlib.nullcontext(path) if opener is None else opener(path, "rb")


def _read_mtx(path):
    from scipy.io import mminfo, mmread

    try:
        with _mtx_source(path) as source:
            _rows, _cols, _entries, layout, field, symmetry = mminfo(source)
    except PermissionError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"{path}: not a Matrix Market file ({_reason(exc)})") from None
    refusal = (f"holds {field} numbers; an affinity is real (Matrix Market field real, "
               f"integer or pattern)" if field not in MTX_FIELDS else
               f"is {symmetry}; an affinity is symmetric (Matrix Market symmetry general or "
               f"symmetric)" if symmetry not in MTX_SYMMETRIES else None)
    if refusal is not None:
        raise DataError(f"{path}: {refusal}")
    _check_square(path, _rows, _cols)
    if layout == "coordinate" and _rows > max((2 if symmetry == "symmetric" else 1) *
                                              _entries, FEW_ENTRIES_MIN_ROWS):
        # every row of an affinity needs an entry (one symmetric entry serves two rows):
        # said before the sparse matrix of the declared size is made (8 bytes a row)
        raise DataError(_too_few_entries(path, _rows, _entries))
    _check_mtx_size(path, layout, _rows, _cols, _entries, symmetry)
    try:
        with _mtx_source(path) as source:
            A = mmread(source)
    except (OSError, ValueError, EOFError, IndexError, OverflowError) as exc:
        word = "truncated" if "truncated" in str(exc).lower() else "corrupt"
        raise DataError(f"{path}: {word} Matrix Market {layout} file "
                        f"({_reason(exc)})") from None
    except MemoryError:     # a compressed file's header, beyond the size check
        raise DataError(f"{path}: its header declares {_rows:,} × {_cols:,} with "
                        f"{plural(_entries, 'entry', 'entries', thousands=True)}, more than "
                        f"memory holds") from None
    if layout == "coordinate" and symmetry == "symmetric":
        _check_each_weight_once(A, path)
    return A


def _check_each_weight_once(A, path):
    """A symmetric coordinate file lists each weight once, in one triangle; ``mmread``
    mirrors every entry and adds the copies, so a file that lists both triangles (or an
    entry again) would double its weights unseen: refused, the first such pair named."""
    keys = np.asarray(A.row, dtype=np.int64) * A.shape[1] + np.asarray(A.col, dtype=np.int64)
    keys.sort()
    again = np.flatnonzero(keys[1:] == keys[:-1])
    if again.size:
        i, j = divmod(int(keys[again[0]]), A.shape[1])
        i, j = max(i, j) + 1, min(i, j) + 1
        raise DataError(f"{path}: is symmetric and lists the weight of ({i}, {j}) more than "
                        f"once (both triangles, or an entry again), which reading would add "
                        f"up; a symmetric Matrix Market file lists each weight once, in one "
                        f"triangle (or write the file as general)")


#: The fewest bytes an entry takes in a Matrix Market file: ``i j\n`` in a coordinate file
#: (pattern; ``i j v\n`` otherwise), ``v\n`` in an array file.
MTX_ENTRY_MIN_BYTES = {"coordinate": 4, "array": 2}


def _check_mtx_size(path, layout, rows, cols, entries, symmetry):
    """A plain (uncompressed) file whose header declares more entries than its bytes can
    hold is truncated: said before ``mmread`` allocates the declared arrays (a 72-byte file
    declaring 10¹² entries would ask for terabytes)."""
    if _decompressor(path) is not None:
        return
    try:
        size = os.path.getsize(path)
    except OSError:
        return                              # mmread says what is wrong
    if layout != "coordinate":
        entries = rows * (rows + 1) // 2 if symmetry == "symmetric" else rows * cols
    most = size // MTX_ENTRY_MIN_BYTES.get(layout, 2)
    if entries > most:
        raise DataError(f"{path}: truncated Matrix Market {layout} file (its header declares "
                        f"{plural(entries, 'entry', 'entries', thousands=True)}; its "
                        f"{size:,} bytes hold at most {most:,})")


#: A graph file declaring more rows than it holds entries has a row without an edge: above
#: this many rows that is said from its header, before a matrix of the declared size is made
#: (8 bytes a row); up to it the matrix is read and the check of the graph names the row.
FEW_ENTRIES_MIN_ROWS = 10 ** 6


def _check_square(path, rows, cols):
    """An affinity is square: said from the file's declared shape, before its entries are
    counted (the words of ``kernels.graph.check_affinity``)."""
    if rows != cols:
        raise DataError(f"{path} must be square, got {rows}×{cols}")


def _too_few_entries(path, rows, entries):
    """The message of a file that declares more rows than it holds entries (said before a
    matrix of the declared size is made: 8 bytes a row)."""
    return (f"{path}: declares {plural(rows, 'row', thousands=True)} but holds "
            f"{plural(entries, 'entry', 'entries', thousands=True)}, so some row has no "
            f"positive weight (a point of degree 0 belongs to no cut)")


def _reason(exc):
    """The first line of an exception's message (a message is one line)."""
    text = str(getattr(exc, "strerror", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
