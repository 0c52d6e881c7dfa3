"""The kernel tree and its build: one definition of a target's sources and closure hash
(`sources`), the TOML files that describe leaves (`tree`), the compiler driver (`compiler`),
the PTX-set artifact (`ptxset`), the build (`build`) and the run-time registry (`registry`)."""
