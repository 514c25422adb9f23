"""Parquet and Feather (Arrow IPC) DATA through pyarrow (the optional ``kkmeans-cli[arrow]``).

A table's numeric columns (integers, floats, booleans, decimals; a null is a missing value)
are read batch by batch into one float64 array of the table's shape; ``--columns`` picks
columns by name or 0-based index, and a column that is not numeric is an error naming it.
Feather version 2 is the Arrow IPC file format; version 1 and the IPC stream format are read
too. pyarrow is imported only here, when such a file is read.
"""
import numpy as np

from ..errors import DataError, KKMeansError
from .text import column_indexes

PARQUET_SUFFIXES = (".parquet", ".pq")
FEATHER_SUFFIXES = (".feather", ".arrow", ".ipc", ".arrows")
_MAGIC = ((b"PAR1", "parquet"), (b"ARROW1", "arrow"), (b"FEA1", "feather1"),
          (b"\xff\xff\xff\xff", "stream"))
TABLE_NAMES = {"parquet": "Parquet", "arrow": "Feather/Arrow", "feather1": "Feather",
          "stream": "Arrow stream"}
_BATCH_ROWS = 2 ** 16
#: Rows of X filled at a time from a batch's columns (at 20 columns, 640 KiB: an L2 cache).
_TILE_ROWS = 4096


def table_kind(path, head):
    """``'parquet'``, ``'arrow'``, ``'feather1'`` or ``'stream'`` from the first bytes of a
    file (``head``) or else its extension; None for other files."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    lower = path.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(FEATHER_SUFFIXES):
        return "stream" if lower.endswith(".arrows") else "arrow"
    return None


def _pyarrow(path, kind):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise DataError(f"{path}: reading {TABLE_NAMES[kind]} files needs pyarrow (pip install "
                        f"'kkmeans-cli[arrow]')") from None
    import pyarrow as pa

    return pa


def read_table(path, kind, wanted, fits_in_memory):
    """The selected columns of a Parquet or Arrow file as float64.

    Parameters
    ----------
    path : str
    kind : str
        From :func:`table_kind`.
    wanted : list of str or None
        Parsed ``--columns``.
    fits_in_memory : callable
        ``fits_in_memory(shape, source)`` raises when the float64 array would not fit.

    Returns
    -------
    X : ndarray of float64, shape (n_rows, n_selected)
        Missing values (nulls) are NaN.
    select : list of int
        The 0-based columns read.
    names : list of str
        The names of every column of the file.
    """
    pa = _pyarrow(path, kind)
    try:
        schema, n_rows, batches = _open(pa, path, kind)
        names = list(schema.names)
        select = column_indexes(wanted, names, len(names), path)
        for index in select:
            _check_numeric(pa, schema.field(index).type, index, names, path)
        shape = (n_rows, len(select))
        if n_rows is not None:
            fits_in_memory(shape, path)
        X = _fill(pa, batches(select), n_rows, select)
    except KKMeansError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable {TABLE_NAMES[kind]} file "
                        f"({' '.join(str(exc).split()) or type(exc).__name__})") from None
    if X.size == 0:
        raise DataError(f"{path}: the table is empty ({X.shape[0]} rows, "
                        f"{len(names)} columns)")
    return X, select, names


def _open(pa, path, kind):
    """The schema, the number of rows (None for a stream) and ``batches(columns)``, an
    iterator of record batches holding those columns in order."""
    if kind == "parquet":
        import pyarrow.parquet as pq

        handle = pq.ParquetFile(path, memory_map=True)
        schema = handle.schema_arrow

        def batches(select):
            chosen = [schema.names[i] for i in select]
            if any(schema.names.count(name) > 1 for name in chosen):
                # Parquet picks columns by name, and a name twice gives every column of it:
                # the whole table, then the columns by position
                return handle.read(use_threads=True).select(select).to_batches(
                    max_chunksize=_BATCH_ROWS)
            return handle.iter_batches(batch_size=_BATCH_ROWS, columns=chosen,
                                       use_threads=True)
        return schema, handle.metadata.num_rows, batches
    if kind == "feather1":
        import pyarrow.feather as feather

        table = feather.read_table(path, memory_map=True)

        def batches(select):
            return table.select(select).to_batches(max_chunksize=_BATCH_ROWS)
        return table.schema, table.num_rows, batches
    source = pa.memory_map(path, "r")
    if kind == "stream":
        reader = pa.ipc.open_stream(source)

        def batches(select):
            return (batch.select(select) for batch in reader)
        return reader.schema, None, batches
    reader = pa.ipc.open_file(source)
    n_rows = (reader.count_rows() if hasattr(reader, "count_rows") else
              sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches)))

    def batches(select):
        return (reader.get_batch(i).select(select) for i in range(reader.num_record_batches))
    return reader.schema, n_rows, batches


def _check_numeric(pa, dtype, index, names, path):
    types = pa.types
    value = dtype.value_type if types.is_dictionary(dtype) else dtype
    if not (types.is_integer(value) or types.is_floating(value) or types.is_boolean(value)
            or types.is_decimal(value) or types.is_null(value)):
        raise DataError(f"{path}: column {index + 1} ({names[index]!r}) holds {dtype} values, "
                        f"not numbers; pick the numeric columns with --columns")


def _fill(pa, batches, n_rows, select):
    X = np.empty((n_rows if n_rows is not None else _BATCH_ROWS, len(select)))
    i0 = 0
    for batch in _slices(batches):
        i1 = i0 + batch.num_rows
        if i1 > X.shape[0]:  # a stream: grown in place
            X.resize((max(i1, 2 * X.shape[0]), X.shape[1]), refcheck=False)
        _copy_batch(pa, batch, X, i0)
        i0 = i1
    if i0 != X.shape[0]:
        X.resize((i0, X.shape[1]), refcheck=False)
    return X


def _slices(batches):
    """The batches cut (zero-copy) into at most ``_BATCH_ROWS`` rows: an Arrow file's batch
    is as long as its writer made it, and its columns are converted one slice at a time, so
    that their float64 copies stay small."""
    for batch in batches:
        if batch.num_rows <= _BATCH_ROWS:
            yield batch
            continue
        for start in range(0, batch.num_rows, _BATCH_ROWS):
            yield batch.slice(start, _BATCH_ROWS)


def _copy_batch(pa, batch, X, i0):
    """Rows i0.. of X from ``batch``: its columns as float64, copied in tiles of rows that
    stay in cache (one column's strided writes over the whole batch cost ~2× the tiled
    copy)."""
    import pyarrow.compute as pc

    float64, i1 = pa.float64(), i0 + batch.num_rows
    columns = []
    for c in range(batch.num_columns):
        column = batch.column(c)
        if column.type != float64:
            column = pc.cast(column, float64, safe=False)
        columns.append(column.to_numpy(zero_copy_only=False))
    for t0 in range(i0, i1, _TILE_ROWS):
        t1 = min(t0 + _TILE_ROWS, i1)
        tile = X[t0:t1]
        for c, values in enumerate(columns):
            tile[:, c] = values[t0 - i0:t1 - i0]
