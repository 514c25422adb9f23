"""Small helpers for the words of messages and reports."""


def plural(count, noun, many=None, thousands=False):
    """``1 sample``, ``2 samples``; ``many`` for irregular plurals (``1 k``/``2 ks`` is
    regular). ``thousands`` writes the count as ``40,000``."""
    count = int(count)
    number = f"{count:,}" if thousands else str(count)
    return f"{number} {noun if count == 1 else (many or noun + 's')}"


def printable(text):
    """``text`` with every character that does not print written as its escape (``\\x1b``,
    ``\\n``, ``\\u2028``): a column name, a path or a value read from a file or a model
    cannot clear the screen, move the cursor or start a line of its own where it is shown."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
