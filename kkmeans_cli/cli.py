def main():
    """Placeholder replaced by the CLI module."""

