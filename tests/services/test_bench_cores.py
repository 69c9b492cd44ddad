"""`bench e2e --overload`'s pinning: its own stack and its load generator on disjoint CPUs, so the generator's flood at
3x takes no CPU from the stack it measures (issue 28, item 19)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from almanac.bench import cores


def test_the_generator_gets_a_quarter_of_the_cpus_and_the_stack_the_rest_never_the_same_one():
    """Given the CPUs this process may use, the split is disjoint and covers them; on one CPU there is nothing to
    split, and the benchmark says so rather than pretending."""
    two = cores.split({0, 1})
    assert two == cores.CoreSplit(frozenset({0}), frozenset({1}))
    eight = cores.split(range(8))
    assert eight is not None and eight.generator == {6, 7} and eight.stack == {0, 1, 2, 3, 4, 5}
    odd = cores.split({3, 5, 9})  # a container's CPUs need not start at 0 nor follow each other
    assert odd is not None and odd.generator == {9} and odd.stack == {3, 5}
    assert cores.split({4}) is None
    assert "CPU 0" in two.describe() and "CPU 1" in two.describe()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning apart needs two CPUs")
def test_a_stack_started_within_runs_on_the_stacks_cpus_and_the_generator_on_its_own():
    """Given two or more CPUs, when a child (a stand-in for the stack's Redis, started as the stack is entered) is
    started within ``kept_apart`` and the generator then moves onto its own CPUs, then the child and its threads stay
    on the stack's CPUs, this process runs on none of them, and its CPUs are restored after."""
    before = os.sched_getaffinity(0)
    split = cores.split(before)
    assert split is not None
    with cores.kept_apart(split):
        child = subprocess.Popen([sys.executable, "-c", "import threading, time; "
                                  "threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); "
                                  "print(flush=True); time.sleep(30)"], stdout=subprocess.PIPE)
        try:
            assert child.stdout is not None and child.stdout.readline()  # its thread is started
            cores.generate(split, [child.pid])
            threads = os.listdir(f"/proc/{child.pid}/task")
            assert len(threads) == 2
            assert all(os.sched_getaffinity(int(tid)) == split.stack for tid in threads)
            assert os.sched_getaffinity(0) == split.generator
            assert not os.sched_getaffinity(0) & os.sched_getaffinity(child.pid)
        finally:
            child.kill()
            child.wait()
    assert os.sched_getaffinity(0) == before
