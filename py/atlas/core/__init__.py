"""The vocabulary every other Atlas package builds on. No I/O beyond reading config files."""
