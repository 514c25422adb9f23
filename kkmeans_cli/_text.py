"""Small helpers for the words of messages and reports."""


def plural(count, noun, many=None, thousands=False):
    """``1 sample``, ``2 samples``; ``many`` for irregular plurals (``1 k``/``2 ks`` is
    regular). ``thousands`` writes the count as ``40,000``."""
    count = int(count)
    number = f"{count:,}" if thousands else str(count)
    return f"{number} {noun if count == 1 else (many or noun + 's')}"
