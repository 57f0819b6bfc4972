"""Benchmarks of awa.operations against real PostgreSQL 17/18 and Awa 0.6.9.

Run ``bash benchmarks/run.sh`` (or ``--quick``); see benchmarks/__main__.py.
They print tables and write JSON; they never pass or fail.
"""

from awa_testbed.collection import make_importable

# The suites import ansible_collections.awa.operations: make this checkout that collection.
make_importable()
