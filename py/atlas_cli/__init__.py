"""The `atlas` command line: serve, generate, kernels, models, benchmark, gate."""
