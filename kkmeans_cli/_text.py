"""Small helpers for the words of messages and reports."""
import re
import unicodedata


def plural(count, noun, many=None, thousands=False):
    """``1 sample``, ``2 samples``; ``many`` for irregular plurals (``1 k``/``2 ks`` is
    regular). ``thousands`` writes the count as ``40,000``."""
    count = int(count)
    number = f"{count:,}" if thousands else str(count)
    return f"{number} {noun if count == 1 else (many or noun + 's')}"


#: What ``printable`` escapes besides the control characters (C0, DEL, C1: ESC and the C1 CSI
#: among them): the line and paragraph separators, and the bidirectional embeddings,
#: overrides and isolates that reorder what follows them on the screen
INVISIBLE = frozenset("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text):
    """``text`` with its control characters, line separators and bidirectional controls
    written as escapes (``\\x1b``, ``\\t``, ``\\u202e``): a column name, a path or a value
    read from a file or a model cannot clear the screen, move the cursor, reorder a line or
    start one of its own where it is shown. Other text (accents, CJK, no-break spaces,
    joined emoji) is kept as written."""
    text = str(text)
    if not any(ch in INVISIBLE or unicodedata.category(ch) == "Cc" for ch in text):
        return text
    return "".join(repr(ch)[1:-1] if ch in INVISIBLE or unicodedata.category(ch) == "Cc"
                   else ch for ch in text)


def one_line(text):
    """``text`` as one line for a message: runs of spaces and line breaks made one space,
    then ``printable`` (a tab or an escape in a name is shown escaped, not as a space)."""
    return printable(_LINE_BREAKS.sub(" ", str(text)).strip(" "))


_LINE_BREAKS = re.compile(r"[ \r\n]+")


#: ``--delimiter`` words for the tab and for any run of whitespace
DELIMITER_WORDS = ("\\t", "tab", "whitespace", "space", " ")


def delimiter_problem(delimiter):
    """What is wrong with a ``--delimiter`` value (None: it is one character or a word of
    ``DELIMITER_WORDS``)."""
    if delimiter.lower() in DELIMITER_WORDS:
        return None
    if len(delimiter) != 1:
        return f"must be one character, 'tab' or 'whitespace'; got {delimiter!r}"
    if delimiter.isascii() and (delimiter.isalnum() or delimiter in ".+-"):
        return (f"cannot be {delimiter!r}: letters, digits, '.', '+' and '-' write numbers "
                f"(1.5e-3, inf, nan), which it would split")
    if delimiter == '"' or len(f"a{delimiter}b".splitlines()) > 1:   # \n, \x0c, \u2028, ...
        return f"cannot be {delimiter!r}: it ends lines or quotes cells"
    return None
