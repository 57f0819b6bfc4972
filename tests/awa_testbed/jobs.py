"""The one job type of the test bed."""

from __future__ import annotations

import dataclasses

KIND = "test_job"
# The test bed's workers fail every job whose tag starts with this (awa_testbed.worker).
FAILING_TAG_PREFIX = "fail-"


@dataclasses.dataclass
class TestJob:
    """``tag`` identifies a job end to end: producer, Awa, worker."""

    __test__ = False  # not a pytest test class

    tag: str
    n: int = 0
