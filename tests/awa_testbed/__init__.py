"""Real-parts test bed for awa.operations.

Starts PostgreSQL 17 and 18 from their PyPI wheels as an unprivileged user,
prepares databases with the real Awa schema (``awa migrate`` from awa-cli),
and runs real Awa worker runtimes and producers (awa-pg) as separate OS
processes. Used by the pytest fixtures, molecule, the benchmarks and the demo.
Nothing in here is shipped in the collection artifact.
"""
