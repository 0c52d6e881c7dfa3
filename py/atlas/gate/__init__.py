"""The merge lattice: which benchmark gates a change re-opens, and whether a record still stands.

Two planes, and nothing crosses upward between them:

* the deterministic plane decides the exit code of `atlas gate check`: `gates` (the named
  benchmark runs), `coverage` (which gates a changed path re-opens), `records` (what a stored
  run attests) and `check` (latest record + changed paths + closure hashes -> VALID/OPEN);
* the advisory plane (`explain`) summarises a change for reviewers and is imported by nothing
  on the deterministic side.

Around them: `bench_toml` (threshold files beside each model), `verdict` (metrics against
thresholds), `record` (running a gate's suite against a server and writing its record), and
the thin I/O modules `git`, `store`, `target_stamps` and `workspace`.

Every module here but `explain` is a boundary file (`coverage.BOUNDARY_FILES`): editing the
machinery re-opens every gate, so the machinery cannot excuse itself.
"""
