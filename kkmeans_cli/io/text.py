"""Delimited text (CSV, TSV, whitespace-separated) read in blocks through NumPy's C parser.

The rules are those of docs/cli.md and :func:`~kkmeans_cli.io.readers.read_data`: UTF-8 (a
byte-order mark is dropped), lines starting with ``#`` are comments wherever they are, blank
lines before the first line and at the end are skipped and inside the data are rows of
missing cells, a header is detected from the first line, ``--delimiter``, ``--columns``,
``--missing``, and a cell is a number in the decimal notation of CSV. Line numbers count every
line of the file (as ``str.splitlines`` does).

The input is read in blocks of :data:`BLOCK_BYTES` cut at line ends; a stream (standard input)
is never held whole. A block that is plain ASCII, with no control character, no line longer
than 64 KiB and no ``#`` inside a line, goes to ``numpy.loadtxt`` (C) and is accepted when
the parse is exact: every line one row of the expected width, every value finite (NaN only
with ``--missing drop``), quotes balanced. Any other block — and any block that fails there —
is read by the reference reader (:func:`_slow_block`, the cell-by-cell rules in Python), which
either reads it or raises the error with its file line and column. The first problem in the
file wins, as in a reader that takes the file whole: a decode error anywhere comes before
everything, a line that cannot be split into fields before any bad cell; so after an error the
rest of the input is checked for those (cheaply: only blocks that could hold one are split).
"""
import csv
import io
import re
import warnings

import numpy as np

from .._text import delimiter_problem, plural
from ..errors import AmbiguousColumn, ColumnNotFound, DataError, UsageError

MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "?"})

#: Bytes of text per block (about); a block ends at a line end.
BLOCK_BYTES = 8 * 2 ** 20
#: Whether plain blocks go to NumPy's parser (tests turn it off to compare with the reference).
FAST = True

_BOM = b"\xef\xbb\xbf"
_WINDOW = 2 ** 16  # a line longer than csv's field limit (2**17) covers a whole window
_LEADING_BLANKS = re.compile(rb"(?:[ \t\r]*\n)*")
_CONTENT_LINE = re.compile(rb"^[ \t\r]*[^ \t\r\n#]", re.M)
# Delimiters NumPy's parser reads as csv does (none of them can be part of a number).
_FAST_DELIMITERS = frozenset(",;|:\t") | {None}


#: What a message about binary input says the binary formats are.
BINARY_FORMATS = "binary data must be .npy, HDF5, Parquet or Feather (given as a file)"


class _Found(Exception):
    """An error found in a block; ``level`` says what may still come before it: ``decode``
    (a decode error later in the file), ``split`` (also a line that cannot be split) or
    ``columns`` (also that: and a header with no data rows); ``unread``: the rest of the
    current block, not yet checked."""

    def __init__(self, error, level, unread=b""):
        super().__init__(error)
        self.error = error
        self.level = level
        self.unread = unread


def read_text(read, source, *, header=None, delimiter=None, wanted=None, missing="error",
              size=None):
    """Read delimited text from ``read(n)`` (bytes, or str from a text stream).

    Parameters
    ----------
    read : callable
        ``read(n)`` returns up to ``n`` more bytes (or characters), empty at the end.
    source : str
        The file for messages.
    header, delimiter, wanted, missing
        As :func:`~kkmeans_cli.io.readers.read_data` (``wanted``: parsed ``--columns``).
    size : int, optional
        Bytes of the input, when known (to size the result once).

    Returns
    -------
    X : ndarray of float64, shape (n_rows, n_columns)
    kept : ndarray of bool, shape (n_rows,)
    names : list of str or None
        Names of the columns of ``X`` when the file has a header.
    columns : list of int
        The file's 0-based columns that ``X`` holds (all of them unless ``wanted``).
    """
    return _TextReader(read, source, header, delimiter, wanted, missing, size).run()


class _TextReader:
    def __init__(self, read, source, header, delimiter, wanted, missing, size):
        self.read = read
        self.source = source
        self.header = header
        self.delimiter = delimiter
        self.wanted = wanted
        self.missing = missing
        self.size = size
        self.ended = False
        self.line = 0        # lines before the current block (as str.splitlines counts)
        self.newlines = 0    # b"\n" before the current block (for decode errors)
        self.offset = 0      # bytes before the current block, after a byte-order mark
        self.held = []       # lines of blank rows not yet known to be inside the data
        self.names = None
        self.select = None
        self.width = None
        self.first = None    # the line the width was taken from
        self.hint_line = None
        self.rows = None
        self.content_after_header = False

    # -- the blocks -------------------------------------------------------------------------
    def _read(self):
        # A short read is the end: a buffered stream returns less only there, and a terminal
        # must not be asked again after Ctrl-D.
        if self.ended:
            return b"", False
        try:
            data = self.read(BLOCK_BYTES)
        except UnicodeDecodeError as exc:  # a text stream that decodes itself
            raise DataError(f"{self.source}: not text ({exc.reason} at byte {exc.start}); "
                            f"{BINARY_FORMATS}; text is read as UTF-8") from None
        except OSError as exc:
            raise DataError(f"{self.source}: cannot read ({exc.strerror or exc})") from None
        self.ended = len(data) < BLOCK_BYTES
        if isinstance(data, str):
            return data.encode("utf-8", "surrogatepass"), True
        return data, False

    def _blocks(self):
        data, text = self._read()
        strip = True
        while strip:
            while data and len(data) < len(_BOM) and _BOM.startswith(data):
                more, _ = self._read()  # a byte-order mark split by short reads
                if not more:
                    break
                data += more
            strip = data.startswith(_BOM)
            if strip:
                data = data[len(_BOM):] or self._read()[0]
                strip = text  # a text stream loses every mark (as str.lstrip did)
        pending = b""
        while True:
            if not data:
                if pending:
                    yield pending
                return
            if pending:
                data = pending + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                pending = data
            else:
                pending = data[cut:]
                yield data[:cut] if cut < len(data) else data
            data, _ = self._read()

    def _advance(self, block, lines, newlines=None):
        self.line += lines
        self.newlines += block.count(b"\n") if newlines is None else newlines
        self.offset += len(block)

    def _decode(self, block):
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = self.newlines + block.count(b"\n", 0, exc.start) + 1
            raise DataError(f"{self.source}: not a text file ({exc.reason} at byte "
                            f"{self.offset + exc.start}, line {line}); {BINARY_FORMATS}; "
                            f"{encoding_hint(block)}") \
                from None
        zero = block.find(b"\0")     # valid UTF-8, but no text holds it (UTF-16 does)
        if zero >= 0:
            line = self.newlines + block.count(b"\n", 0, zero) + 1
            hint = encoding_hint(block, other=None)
            raise DataError(f"{self.source}: not a text file (a zero byte at byte "
                            f"{self.offset + zero}, line {line}); {BINARY_FORMATS}"
                            + (f"; {hint}" if hint else ""))
        return text

    # -- the whole input --------------------------------------------------------------------
    def run(self):
        blocks = self._blocks()
        seen_text = False
        found = None
        try:
            for block in blocks:
                if self.rows is None:
                    text = self._decode(block)
                    seen_text = seen_text or bool(text.strip())
                    rest = self._head(block, text)
                    if rest is None:
                        continue
                    block = rest
                self._data_block(block)
        except _Found as caught:
            found = caught
        if found is not None:
            # Raised outside the except block: the error's context is not the _Found that
            # holds it (a cycle that pickling, e.g. Dask sending it from a worker, cannot end).
            self._rest(blocks, found)
        if self.rows is None:
            raise DataError(f"{self.source}: the file is empty" if not self.offset else
                            f"{self.source}: holds no data (only blank lines)" if not seen_text
                            else f"{self.source}: holds no data (only comments and blank "
                            f"lines)")
        X, kept = self.rows.result()
        if self.names is not None and X.shape[0] == 0:
            raise DataError(f"{self.source}: has a header line but no data rows")
        names = [self.names[i] for i in self.select] if self.names else None
        return X, kept, names, list(self.select)

    def _head(self, block, text):
        """Find the first line that is not a comment or blank: the delimiter, the header and
        the width come from it. Returns the rest of the block (the data) or None."""
        used = 0
        lines = text.splitlines(keepends=True)
        for index, line in enumerate(lines):
            body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
            stripped = body.strip()
            if stripped and not body.lstrip().startswith("#"):
                break
            self.line += 1
            used += len(line.encode("utf-8"))
        else:
            self._advance(block, 0)
            return None
        self.newlines += block.count(b"\n", 0, used)
        self.offset += used
        rest = block[used:]
        number = self.line + 1
        try:
            auto = self.delimiter is None
            self.delimiter = _resolve_delimiter(self.delimiter, body, self.source,
                                                lines[index + 1:index + 1 + LINES_SEEN])
            if (auto or self.delimiter is not None) and _ends_in_quote(
                    body, AUTO_DELIMITERS if auto else self.delimiter):
                # The line ends inside a quoted cell: a header cell cannot span lines either
                # (a delimiter found on half a line would be wrong; whitespace has no quotes).
                raise DataError(f"{self.source}: line {number}: a quoted cell does not close "
                                f"on its line (a cell cannot span lines)")
            cells = _split([(number, body)], self.delimiter, self.source, None)[0][0]
        except (UsageError, DataError) as exc:
            raise _Found(exc, "decode", rest) from None
        detected = self.header is None
        header = _looks_like_header(cells) if detected else self.header
        self.first = number
        if header:
            self.names = [cell.strip() for cell in cells]
            self.line += 1
            consumed = len(line.encode("utf-8"))
            self.newlines += rest.count(b"\n", 0, consumed)
            self.offset += consumed
            rest = rest[consumed:]
        elif detected:
            self.hint_line = number
        self.width = len(self.names) if self.names is not None else len(cells)
        self.rows = _Rows(self.size, self.offset)
        try:
            self.select = column_indexes(
                self.wanted, self.names, self.width, self.source,
                "is read without a header (--no-header); use 0-based indexes" if
                self.header is False else NO_HEADER)
        except UsageError as exc:
            self.select = None
            self.content_after_header = not header
            raise _Found(exc, "columns", rest) from None
        return rest

    def _data_block(self, block):
        newlines = _plain(block)
        lines = newlines + (bool(block) and block[-1:] != b"\n") if newlines is not None else None
        done = self._fast_block(block, lines, newlines) if lines is not None and FAST else None
        if done is None:
            text = self._decode(block)
            lines = len(text.splitlines())
            try:
                done = self._slow_block(text)
            except _Found:
                self._advance(block, lines)
                raise
        X, kept, held = done
        self.rows.append(X, kept, len(block))
        self.held = held
        self._advance(block, lines, newlines)

    def _rest(self, blocks, found):
        """After the error ``found``: check the rest of the input for what comes first."""
        split_error = None
        for block in _chain(found.unread, blocks):
            newlines = _plain(block)
            plain = newlines is not None
            text = None if plain else self._decode(block)  # a decode error wins at once
            if found.level == "columns" and not self.content_after_header:
                self.content_after_header = bool(
                    _CONTENT_LINE.search(block) if plain
                    else any(line.strip() and not line.lstrip().startswith("#")
                             for line in text.splitlines()))
            if (found.level != "decode" and split_error is None and self.delimiter is not None
                    and (not plain or b'"' in block)):
                text = self._decode(block) if text is None else text
                numbered = [(self.line + i + 1, line) for i, line in enumerate(text.splitlines())
                            if not line.lstrip().startswith("#")]
                try:
                    _split(numbered, self.delimiter, self.source, self.names)
                except DataError as exc:
                    split_error = exc
            self._advance(block, newlines + (block[-1:] != b"\n") if plain
                          else len(text.splitlines()), newlines)
        if split_error is not None:
            raise split_error
        if found.level == "columns" and not self.content_after_header:
            raise DataError(f"{self.source}: has a header line but no data rows")
        raise found.error

    # -- one block --------------------------------------------------------------------------
    def _fast_block(self, block, n_lines, newlines):
        """The block through ``numpy.loadtxt``, or None when anything is not plain (the
        reference reader then reads it, or finds the error)."""
        if self.delimiter not in _FAST_DELIMITERS:
            return None
        first = self.line + 1
        if b"#" in block:
            lines = block.split(b"\n")
            if lines and not lines[-1]:
                lines.pop()
            kept_lines = [(first + i, line) for i, line in enumerate(lines)
                          if not line.lstrip().startswith(b"#")]
            if any(b"#" in line for _, line in kept_lines):
                return None
            a, b = 0, len(kept_lines)
            while a < b and not kept_lines[a][1].strip():
                a += 1
            while b > a and not kept_lines[b - 1][1].strip():
                b -= 1
            lead = [n for n, _ in kept_lines[:a]]
            trail = [n for n, _ in kept_lines[b:]]
            body = b"\n".join(line for _, line in kept_lines[a:b]) + b"\n" if b > a else b""
            expected = b - a
        else:
            start = _LEADING_BLANKS.match(block).end()
            end = len(block)
            while end > start and block[end - 1] in b" \t\r\n":
                end -= 1
            lead = list(range(first, first + block.count(b"\n", 0, start)))
            if end <= start:
                return (np.empty((0, len(self.select))), np.empty(0, bool),
                        self.held + list(range(first, first + n_lines)))
            stop = block.find(b"\n", end)
            stop = len(block) if stop < 0 else stop + 1
            body = block[start:stop]
            expected = (newlines - len(lead) - block.count(b"\n", stop)
                        + (body[-1:] != b"\n"))
            trail = list(range(first + len(lead) + expected, first + n_lines))
        held = self.held + lead
        if expected == 0:
            return np.empty((0, len(self.select))), np.empty(0, bool), held + trail
        if held and self.missing == "error":
            return None
        quotes = b'"' in body
        if quotes and (self.delimiter is None or body.count(b'"') % 2):
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                X = np.loadtxt(io.BytesIO(body), dtype=np.float64, delimiter=self.delimiter,
                               comments=None, quotechar='"' if quotes else None, ndmin=2)
        except (ValueError, TypeError, OverflowError):
            return None
        if X.shape != (expected, self.width):
            return None
        if self.select != list(range(self.width)):
            X = X[:, self.select]
        finite = np.isfinite(X)
        if finite.all():
            kept = np.ones(expected, dtype=bool)
        elif self.missing == "error" or np.isinf(X).any():
            return None
        else:
            kept = finite.all(axis=1)
        if held:  # blank rows inside the data: rows of missing cells (dropped)
            X = np.concatenate([np.full((len(held), X.shape[1]), np.nan), X])
            kept = np.concatenate([np.zeros(len(held), dtype=bool), kept])
        return X, kept, trail

    def _slow_block(self, text):
        """The reference reader, cell by cell (the rules in the module docstring)."""
        source, names, select, width = self.source, self.names, self.select, self.width
        numbered = [(self.line + i + 1, line) for i, line in enumerate(text.splitlines())
                    if not line.lstrip().startswith("#")]
        try:
            rows, line_of = _split(numbered, self.delimiter, source, names)
        except DataError as exc:
            raise _Found(exc, "decode") from None
        held = list(self.held)
        X = np.empty((len(rows) + len(held), len(select)))
        kept = np.ones(X.shape[0], dtype=bool)
        r = 0
        try:
            for (line, raw), cells in zip(numbered, rows):
                if not raw.strip():
                    held.append(line)
                    continue
                for blank in held:
                    self._row(X, kept, r, blank, [""] * width)
                    r += 1
                held = []
                if len(cells) != width:
                    if len(cells) == 1 and not cells[0].strip():
                        cells = [""] * width  # a blank row inside the data: missing cells
                    else:
                        raise DataError(f"{source}: line {line} has {len(cells)} field"
                                        f"{'' if len(cells) == 1 else 's'}, expected "
                                        f"{width} (as on line {self.first})")
                self._row(X, kept, r, line, cells)
                r += 1
        except DataError as exc:
            raise _Found(exc, "split") from None
        return X[:r], kept[:r], held

    def _row(self, X, kept, r, line, cells):
        source, names = self.source, self.names
        for c, col in enumerate(self.select):
            cell = cells[col].strip()
            try:
                value = _to_float(cell)
            except ValueError:
                if cell.lower() not in MISSING_TOKENS:
                    hint = ""
                    if line == self.hint_line:
                        hint = (f"; line {line} holds numbers, so it was read as data (pass "
                                f"--header if it is a header)")
                    raise DataError(f"{source}: line {line}, column {column_name(col, names)}: "
                                    f"{cell!r} is not a number{hint}") from None
                value = np.nan
            if np.isnan(value):
                if self.missing == "error":
                    ends = (" (the line ends with a delimiter: --columns picks the columns "
                            "to read)") if (not cell and col == len(cells) - 1 > 0
                                            and self.wanted is None) else ""
                    raise DataError(f"{source}: line {line}, column {column_name(col, names)}: "
                                    f"missing value"
                                    f"{'' if not cell else f' ({cell!r})'}{ends}"
                                    f"{MISSING_DROP_HINT}")
                kept[r] = False
            elif np.isinf(value):
                raise DataError(f"{source}: line {line}, column {column_name(col, names)}: "
                                f"infinite value {cell!r}")
            X[r, c] = value


class _Rows:
    """The rows read so far, in one array grown in place (``ndarray.resize``: ``realloc``,
    which moves no data for large arrays), sized from the input's length when known."""

    def __init__(self, size, start):
        self.left = size - start if size else None  # bytes not yet read, when known
        self.X = None
        self.kept = None
        self.n = 0

    def append(self, X, kept, nbytes):
        m = X.shape[0]
        if self.left is not None:
            self.left -= nbytes
        if m == 0:
            return
        if self.X is None:
            capacity = m
            if self.left:  # as many rows per byte in the rest as in this block
                capacity += int(m * self.left / max(nbytes, 1) * 1.02) + 16
            self.X = np.empty((capacity, X.shape[1]))
            self.kept = np.empty(capacity, dtype=bool)
        if self.n + m > self.X.shape[0]:
            capacity = max(self.n + m, int(self.X.shape[0] * 1.5) + 16)
            self.X.resize((capacity, self.X.shape[1]), refcheck=False)
            self.kept.resize(capacity, refcheck=False)
        self.X[self.n:self.n + m] = X
        self.kept[self.n:self.n + m] = kept
        self.n += m

    def result(self):
        if self.X is None:
            return np.empty((0, 0)), np.empty(0, dtype=bool)
        if self.X.shape[0] != self.n:
            self.X.resize((self.n, self.X.shape[1]), refcheck=False)
            self.kept.resize(self.n, refcheck=False)
        return self.X, self.kept


def _chain(first, rest):
    if first:
        yield first
    yield from rest


def _plain(block):
    """The number of line feeds in ``block`` when it is plain: ASCII with no control
    character but tab, line feed and carriage return before a line feed, and no line of
    64 KiB or more; else None."""
    if not block.isascii() or b"\x7f" in block:
        return None
    codes = np.frombuffer(block, dtype=np.uint8)
    newlines = int(np.count_nonzero(codes == 10))
    controls = int(np.count_nonzero(codes < 32))
    if controls != newlines:
        returns = block.count(b"\r") if b"\r" in block else 0
        if (controls != newlines + returns + block.count(b"\t")
                or (returns and returns != block.count(b"\r\n"))):
            return None
    if not all(block.find(b"\n", i, i + _WINDOW) >= 0
               for i in range(0, len(block) - _WINDOW + 1, _WINDOW)):
        return None
    return newlines


# -- the cell rules -------------------------------------------------------------------------
def _ends_in_quote(line, delimiters):
    """Whether ``line`` ends inside a quoted cell (:func:`_scan_quotes`)."""
    return _scan_quotes(line, delimiters)[1]


def _scan_quotes(line, delimiters):
    """(outside, inside): the characters of ``line`` outside its quoted cells, and whether it
    ends inside one, read as the csv module reads it: a quote opens a cell only as its first
    character (at the start of the line or right after one of ``delimiters``), ``""`` inside
    it is a quote, and the next lone quote closes it; a quote elsewhere is a character of its
    cell (``a"b``)."""
    outside, inside, start, i = [], False, True, 0
    while i < len(line):
        ch = line[i]
        if inside:
            if ch == '"':
                if line[i + 1:i + 2] == '"':
                    i += 1
                else:
                    inside = False
        elif ch == '"' and start:
            inside = True
        else:
            outside.append(ch)
        start = not inside and ch in delimiters
        i += 1
    return "".join(outside), inside


#: The end of a missing value's message where ``--missing drop`` would skip the row
MISSING_DROP_HINT = "; use --missing drop to skip such rows"
#: The delimiters told from the first line when --delimiter is not given, in order
AUTO_DELIMITERS = ",\t;"
#: The lines after the first that may settle which of several is the delimiter
LINES_SEEN = 20


def _resolve_delimiter(delimiter, first_line, source, later=()):
    """The delimiter of ``--delimiter``, or told from the first line: the first of
    ``AUTO_DELIMITERS`` it holds outside quotes (None: whitespace). Where it holds several,
    as a header whose names hold one (``weight, kg<TAB>height, cm``), the first of the
    ``later`` lines that is no comment or blank decides when it holds one of them alone (a
    row of numbers holds only the delimiter)."""
    if delimiter is None:
        outside = _scan_quotes(first_line, AUTO_DELIMITERS)[0]
        found = [c for c in AUTO_DELIMITERS if c in outside] or \
            [c for c in AUTO_DELIMITERS if c in first_line][:1]   # one quoted name: '"a,b"'
        if len(found) > 1:
            for line in later:
                if line.strip() and not line.lstrip().startswith("#"):
                    there = [c for c in found if c in _scan_quotes(line, AUTO_DELIMITERS)[0]]
                    if len(there) == 1:
                        return there[0]
                    break
        return found[0] if found else None  # None: whitespace
    if delimiter.lower() in ("\\t", "tab"):
        return "\t"
    if delimiter.lower() in ("whitespace", "space", " "):
        return None
    problem = delimiter_problem(delimiter)
    if problem is not None:
        raise UsageError(f"--delimiter {problem} (reading {source})")
    return delimiter


def _split(numbered, delimiter, source, names):
    """The fields of each line and the file line each row is on. A quoted cell must close on
    its line (a number holds no line break)."""
    if delimiter is None:
        return [line.split() or [""] for _, line in numbered], [i for i, _ in numbered]
    lines = [line for _, line in numbered]
    lines.append("")  # a quote left open on the last line takes this one: found below
    reader = csv.reader(lines, delimiter=delimiter)
    rows, line_of, done = [], [], 0
    try:
        for row in reader:
            if done == len(numbered):
                break
            if reader.line_num - done > 1:
                line, text = numbered[done]
                column = len(next(csv.reader([text], delimiter=delimiter)))
                raise DataError(f"{source}: line {line}, column "
                                f"{column_name(column - 1, names)}: a quoted cell does not "
                                f"close on its line (a cell cannot span lines)")
            rows.append(row or [""])
            line_of.append(numbered[done][0])
            done = reader.line_num
    except csv.Error as exc:
        line = numbered[min(reader.line_num, len(numbered)) - 1][0]
        raise DataError(f"{source}: line {line}: cannot be split into fields ({exc})") from None
    return rows, line_of


def _is_number(cell):
    """A cell that reads as a number (not a missing marker such as NA or nan)."""
    cell = cell.strip()
    if cell.lower() in MISSING_TOKENS:
        return False
    try:
        _to_float(cell)
    except ValueError:
        return False
    return True


def _to_float(cell):
    """``float(cell)`` for the decimal notation of CSV files only: Python's ``float`` also
    reads digit-group underscores (``1_000``) and non-ASCII digits (``١٢``), which no other
    CSV reader takes for numbers; such a cell is refused as not a number."""
    if "_" in cell or not cell.isascii():
        raise ValueError(cell)
    return float(cell)


def _looks_like_header(cells):
    """A first line is a header when none of its fields is a number, unless every field is
    empty or a missing marker (a row of missing values)."""
    return (not any(_is_number(cell) for cell in cells)
            and not all(cell.strip().lower() in MISSING_TOKENS for cell in cells))


def column_name(index, names):
    """Column ``index`` (0-based) of a file with header ``names`` (or None) for messages:
    its 1-based position and its header name."""
    return column_label(index, names[index] if names and index < len(names) else None)


def column_label(index, name=None):
    """``3 ('x')``, or ``3`` without a name: column ``index`` (0-based) for messages."""
    return str(index + 1) if name is None else f"{index + 1} ({name!r})"


NO_HEADER = "has no header line; use 0-based indexes or --header"


def reads_as_index(item):
    """Whether ``--columns`` takes ``item`` for a 0-based index (digits, perhaps after a minus
    sign, which the range check then refuses) rather than a column name: ``--1`` is a name
    (``int`` reads it not; the command line refuses digits other than 0-9 before)."""
    return re.fullmatch(r"-?[0-9]+", str(item)) is not None


def column_indexes(wanted, names, width, source, nameless=NO_HEADER):
    """The 0-based columns that ``--columns`` (parsed: ``wanted``) names, for a file of
    ``width`` columns with header ``names`` (or None); all of them when ``wanted`` is None.
    ``nameless`` ends the refusal of a name where there are no names: why, and what to do."""
    if wanted is None:
        return list(range(width))
    out = []
    for item in wanted:
        if reads_as_index(item):
            index = int(item)
            if not 0 <= index < width:
                raise UsageError(f"--columns: index {index} is out of range; {source} has "
                                 f"{plural(width, 'column')} (0-based indexes 0..{width - 1})")
        elif names is None:
            raise UsageError(f"--columns: {item!r} is a name but {source} {nameless}")
        elif item not in names:
            raise ColumnNotFound(f"--columns: {source} has no column {item!r}; its columns "
                                 f"are {', '.join(names)}", source, names)
        elif names.count(item) > 1:     # which one is meant, only an index says
            places = [i for i, name in enumerate(names) if name == item]
            raise AmbiguousColumn(f"--columns: {source} has {len(places)} columns named "
                                  f"{item!r} (0-based indexes {', '.join(map(str, places))}); "
                                  f"pick one by its index", source, item, places)
        else:
            index = names.index(item)
        if index in out:
            first = wanted[out.index(index)]
            same = "" if first == item else f" (as {first!r})"
            raise UsageError(f"--columns: column {item!r} is listed twice{same}; each column "
                             f"can be used once")
        out.append(index)
    return out


LATIN_HINT = "text is read as UTF-8: save a Latin-1 (or other) text file as UTF-8"


def encoding_hint(block, other=LATIN_HINT):
    """The end of the message for bytes that are not UTF-8: text is read as UTF-8, and what
    to do with UTF-16 (its byte-order mark, or a zero byte beside ASCII characters), with
    zero bytes alone, or with another encoding such as Latin-1 (``other``)."""
    head = block[:4096]
    if head and not head.strip(b"\0"):
        return "it begins with zero bytes only (space set aside, never written?)"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) >= 4
                                                 and head.count(b"\0") * 3 >= len(head)):
        return "it looks like UTF-16 text: save it as UTF-8"
    return other
