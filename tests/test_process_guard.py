"""The integration-marker guard (tests/support/process_guard.py): an unmarked test that starts a
process or a server fails naming it; the same test marked integration passes."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INNER = """
import socket
import subprocess
import sys

import pytest


def test_unmarked_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()


def test_unmarked_plain():
    assert sum([1, 2]) == 3


@pytest.mark.integration
def test_marked_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


@pytest.mark.integration  # the inner run starts a process and a server under this test's guard too
def test_unmarked_tests_that_start_a_process_or_a_server_fail(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nmarkers =\n    integration: starts a process or a server\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "tests.support.process_guard", "-q")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked_process starts a process (*python*) but is not marked integration*",
            "*test_unmarked_server starts a server (listening on ('127.0.0.1', *)) but is not marked integration*",
        ]
    )
