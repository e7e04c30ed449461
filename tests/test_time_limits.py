"""The suite's time limits (tests/conftest.py): every limit a test declares is
its budget, and its hard limit (what pytest-timeout enforces) is the budget x 3
x the machine-speed factor measured once per session, so that a limit catches
a hang and holds on a machine three times slower than the reference one."""

from __future__ import annotations

import math
import os
import time
from types import SimpleNamespace

import pytest
import pytest_timeout

import conftest
from conftest import HANG_MARGIN, hang_limit, speed_factor


def test_the_speed_factor_is_measured_once_and_never_below_one():
    factor = speed_factor()
    assert math.isfinite(factor) and factor >= 1
    assert conftest.REFERENCE_SECONDS > 0
    assert hang_limit(10) == pytest.approx(10 * HANG_MARGIN * factor)
    assert speed_factor() == factor  # the same number all session
    # handed to pytest-xdist's workers (and what the tests start) as it was measured
    assert float(os.environ[conftest.SPEED_FACTOR_VARIABLE]) == pytest.approx(factor, abs=1e-3)


def _limit_pytest_timeout_uses(item) -> float:
    """The limit pytest-timeout itself reads for ``item`` (its own function)."""
    return pytest_timeout._get_item_settings(item).timeout


def test_the_suite_default_becomes_its_hard_limit(request):
    budget = float(request.config.getini("timeout"))
    assert conftest.budget_of(request.node) == budget
    assert _limit_pytest_timeout_uses(request.node) == pytest.approx(hang_limit(budget))


@pytest.mark.timeout(7, method="thread")
def test_a_mark_is_a_budget_and_keeps_its_method(request):
    assert conftest.budget_of(request.node) == 7
    settings = pytest_timeout._get_item_settings(request.node)
    assert settings.timeout == pytest.approx(hang_limit(7))
    assert settings.method == "thread"


@pytest.mark.timeout(0.5)
def test_a_test_may_take_longer_than_its_budget_and_finish():
    """pytest-timeout stops this test after 0.5 s unless its limit was scaled
    (to at least 1.5 s)."""
    time.sleep(1.0)


def test_the_timeout_of_a_subprocess_helper_is_a_budget_too(monkeypatch):
    seen = {}

    def run(cmd, **kwargs):
        seen.update(kwargs)
        raise SystemExit

    monkeypatch.setattr(conftest.subprocess, "run", run)
    with pytest.raises(SystemExit):
        conftest.guide_cli("--version", timeout=20)
    assert seen["timeout"] == pytest.approx(hang_limit(20))


def test_workload_copies_share_the_usable_cpus_as_workers_would():
    assert conftest._shares([0, 1], 2) == [[0], [1]]  # make test on two cores
    assert conftest._shares([0], 2) == [[0], [0]]  # make test-slow: taskset -c 0
    assert conftest._shares([3, 5, 7], 1) == [[3]]


def test_each_worker_gets_its_share_of_the_usable_cpus(monkeypatch):
    """share_the_cores gives each pytest-xdist worker the usable CPUs (its
    affinity, which taskset sets) divided among the workers, at least one."""
    monkeypatch.setattr(conftest.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert conftest.cpu_share(2) == 1  # make test-slow: two workers on taskset -c 0
    monkeypatch.setattr(conftest.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert conftest.cpu_share(2) == 8


def test_the_summary_names_the_tests_over_their_budget():
    def report(nodeid, when, seconds, budget=None):
        props = [(conftest.BUDGET_PROPERTY, budget)] if budget is not None else []
        return SimpleNamespace(nodeid=nodeid, when=when, duration=seconds, user_properties=props)

    reports = [
        report("slow", "setup", 50.0, 60),  # setup, call and teardown count together
        report("slow", "call", 20.0, 60),
        report("slow", "teardown", 0.1, 60),
        report("fine", "call", 59.0, 60),
        report("no limit", "call", 500.0),
    ]
    assert conftest.over_budget(reports, 1.0) == [("slow", pytest.approx(70.1), 60)]
    assert conftest.over_budget(reports, 1.2) == []  # within budget x the speed factor
