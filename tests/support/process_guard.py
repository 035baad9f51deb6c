"""pytest plugin: a test that starts a process or a server must be marked ``integration``.

`tox -e unit` runs ``-m "not integration ..."`` in parallel (pytest-xdist); a test there that starts
a subprocess, a multiprocessing worker or a listening socket would make that lane slow and flaky
(ports, processes left behind). So every test not marked ``integration`` runs with
``subprocess.Popen``, ``multiprocessing`` process start and ``socket.listen`` recorded, during its
set-up and its call; a test that used any of them fails with one line naming what it started.
Fixtures of a wider scope count for the first test that sets them up.
"""

from __future__ import annotations

import multiprocessing.process
import socket
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_started: list[str] | None = None  # what the current unmarked test started; None: not recording
# markers whose tests `tox -e unit` never selects (their own tox envs run them: slow, pyserini,
# bench, vllm, verl): the guard is for the unit lane, so these may start processes unmarked
OTHER_LANES = ("integration", "slow", "pyserini", "bench", "vllm", "verl")
_STARTED = pytest.StashKey[list[str] | None]()


def _record(what: str) -> None:
    if _started is not None:
        _started.append(what)


def _argv0(args: Any) -> str:
    if isinstance(args, str | bytes):
        return str(args).split()[0] if str(args).split() else str(args)
    return str(list(args)[0]) if args else "?"


_popen_init: Callable[..., None] = subprocess.Popen.__init__
_process_start: Callable[..., None] = multiprocessing.process.BaseProcess.start
_listen: Callable[..., None] = socket.socket.listen


def _guarded_popen_init(self: subprocess.Popen, args: Any, *a: Any, **k: Any) -> None:
    _record(f"a process ({_argv0(args)})")
    _popen_init(self, args, *a, **k)


def _guarded_process_start(self: multiprocessing.process.BaseProcess) -> None:
    _record(f"a multiprocessing process ({self.name})")
    _process_start(self)


def _guarded_listen(self: socket.socket, *a: Any) -> None:
    try:
        where = self.getsockname()
    except OSError:
        where = "?"
    _record(f"a server (listening on {where})")
    _listen(self, *a)


# Fixtures wider than one test that start a server or a process, as (where defined, name): every
# test that uses one is integration. The guard alone would catch only the test that happens to set
# the fixture up first, and with pytest-xdist that is a different test in each worker.
SERVER_FIXTURES = {
    ("tests", "llama_server"),  # tests/conftest.py: llama.cpp's server over the packaged GGUF
    ("tests/llm/test_serve_model_front.py", "client"),
    ("tests/reliability/test_serve_model_limits.py", "srv"),
    ("tests/reliability/test_serve_model_limits.py", "keyed"),
    ("tests/methods/test_real_models.py", "judge"),
    ("tests/retrieval/test_server_load.py", "server"),
}


@pytest.hookimpl(tryfirst=True)  # before `-m "not integration"` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.items() if info is not None else ()
        if any((d.baseid, name) in SERVER_FIXTURES for name, ds in defs for d in ds):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Iterator[object]:
    before = len(_started) if _started is not None else 0
    try:
        return (yield)
    finally:
        if _started is not None and len(_started) > before and fixturedef.scope != "function":
            _started[before] += (
                f" in fixture {fixturedef.argname!r} (scope {fixturedef.scope}: add "
                f"({fixturedef.baseid!r}, {fixturedef.argname!r}) to SERVER_FIXTURES in {__name__})"
            )


_configured = 0  # nested pytest sessions (pytester) share the patches: the outermost restores them


def pytest_configure(config: pytest.Config) -> None:
    global _configured
    _configured += 1
    if _configured == 1:
        # reads the git commit (two `git` processes) once, at import: imported here, before any
        # test, so the first test that happens to import it is not charged with them
        import harness.results.lifecycle  # noqa: F401

        subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]
        multiprocessing.process.BaseProcess.start = _guarded_process_start  # type: ignore[method-assign]
        socket.socket.listen = _guarded_listen  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    global _configured
    _configured -= 1
    if _configured == 0:
        subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]
        multiprocessing.process.BaseProcess.start = _process_start  # type: ignore[method-assign]
        socket.socket.listen = _listen  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _started
    _started = None if any(item.get_closest_marker(m) for m in OTHER_LANES) else []
    item.stash[_STARTED] = _started
    try:
        return (yield)
    finally:
        _started = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    started = item.stash.get(_STARTED, None)
    if call.when == "call" and started and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} starts {started[0]} but is not marked integration: add "
            "@pytest.mark.integration (or pytestmark) so `tox -e unit` leaves it to the integration lane"
        )
    return report
