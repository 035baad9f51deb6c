"""The life of a run row: create, resume, finish. ``harness run`` (:class:`harness.eval.runner.Runner`),
``harness train`` and ``harness sft`` record their runs through here, so every row says the same
things the same way.

- **create** (:func:`create_run`): a new ``runs`` row with the git commit of the code, the package
  versions, the command line (URL credentials masked: :func:`harness.secrets.redact`), and for a run
  that can be resumed, the process that owns it (pid and host; the heartbeat is refreshed with
  every stored batch, :meth:`harness.results.store.Store.add_samples`). Its status is ``running``.
- **resume** (:func:`resume_run`): the newest run with exactly the same method, model, protocol
  id, method spec hash and bench. A ``complete`` one is reused as it is (a long multi-method command
  rerun with ``--resume`` redoes nothing it finished); an unfinished one is claimed for this process
  (:meth:`harness.results.store.Store.claim_run` refuses a run another live process is writing);
  :func:`release` hands it back (``failed``, its time kept) when the resumed run cannot start.
  When there is none, the run this process then creates with those settings is inserted only if
  no other process created one meanwhile (two ``--resume`` of the same new run started together:
  the second is refused with one line instead of making a second run).
- **finish** (:func:`running`): the body's status (``complete`` unless it says otherwise),
  ``interrupted`` on Ctrl-C, ``failed`` on any other exception; the run's seconds add up over
  resumptions (:func:`finish_run`). A run row never stays ``running`` after its process leaves.
"""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.results.store import RunRecord, Store, this_owner
from harness.secrets import redact

if TYPE_CHECKING:
    from harness.method import Method
    from harness.protocol import Protocol

# packages whose versions every run row records
VERSIONED_PACKAGES = (
    "rar-harness",
    "torch",
    "transformers",
    "bm25s",
    "duckdb",
    "faiss-cpu",
    "sentence-transformers",
)


def read_git_commit(here: Path) -> str:
    """``git rev-parse HEAD`` of the checkout ``here`` is in, with ``+dirty`` when tracked files
    differ from it; empty outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=here
        )
        if head.returncode != 0:
            return ""
        diff = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--"], capture_output=True, timeout=10, cwd=here
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return head.stdout.strip() + ("+dirty" if diff.returncode == 1 else "")


# Read once, when the code is loaded: a commit made while a long run goes on is not the code that
# run executes (the showcase's runs recorded three later commits while one process ran them all).
_GIT_COMMIT = read_git_commit(Path(__file__).resolve().parent)


def git_commit() -> str:
    """The commit of the checkout this process loaded its code from (read at import), with
    ``+dirty`` when its tracked files differed from that commit; empty outside a git checkout."""
    return _GIT_COMMIT


def code_commit() -> str:
    """The code that runs, as a record names it: :func:`git_commit`; outside a checkout (an exported
    copy, ``git archive``, as the learning runs use) the commit it was exported from, named in the
    environment variable ``HARNESS_COMMIT`` (``scripts/learning_run.sh`` sets it); empty when
    neither is known."""
    import os

    return git_commit() or os.environ.get("HARNESS_COMMIT", "")


def versions() -> dict[str, str]:
    """Python's version and those of :data:`VERSIONED_PACKAGES` that are installed."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def command_line(argv: Sequence[str] | None = None) -> str:
    """``argv`` (default: this process's) as one shell-quoted line, URL credentials masked."""
    return redact(" ".join(shlex.quote(a) for a in (sys.argv if argv is None else argv)))


# (db file, method, model, protocol id, spec hash, bench) that a --resume looked for and did not
# find: the run created next with these settings must still be the only one (see create_run)
_RESUMED_NONE: set[tuple[str, ...]] = set()


def _settings_key(store: Store, *, method: str, model: str, protocol_id: str, spec_hash: str, bench: str):
    return (str(Path(store.path).resolve()), method, model, protocol_id, spec_hash, bench)


def new_run_id(name: str) -> str:
    """``<name>-<YYYYmmdd-HHMMSS>-<6 hex>``: sortable by start, unique across processes."""
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def create_run(
    store: Store,
    *,
    run_id: str,
    kind: str,
    method: str,
    model: str,
    backend: str,
    protocol: Protocol,
    method_spec_hash: str,
    method_spec_json: str,
    bench: str,
    label: str = "",
    command: str | None = None,
    n_expected: int = 0,
    owned: bool = False,
    runtime: dict[str, Any] | None = None,
) -> str:
    """Insert the ``running`` row of a new run and return its id. ``command``: default this
    process's command line; ``owned``: record this process as the owner (a run ``--resume`` may
    claim later)."""
    pid, host = this_owner() if owned else (None, None)
    key = _settings_key(
        store,
        method=method,
        model=model,
        protocol_id=protocol.protocol_id,
        spec_hash=method_spec_hash,
        bench=bench,
    )
    exclusive = kind == "eval" and key in _RESUMED_NONE
    _RESUMED_NONE.discard(key)
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind=kind,
            method=method,
            model=model,
            backend=backend,
            protocol_id=protocol.protocol_id,
            protocol_name=protocol.name,
            protocol_json=protocol.model_dump_json(),
            method_spec_hash=method_spec_hash,
            method_spec_json=method_spec_json,
            bench=bench,
            label=label,
            git_commit=git_commit(),
            versions_json=json.dumps({**versions(), **(runtime or {})}),
            command=command_line() if command is None else command,  # the store redacts it
            n_expected=n_expected,
            owner_pid=pid,
            owner_host=host,
        ),
        only_one=exclusive,
    )
    return run_id


def create_train_run(
    store: Store,
    *,
    prefix: str,
    method: Method,
    recipe,
    protocol: Protocol,
    model: str,
    label: str,
    runtime: dict[str, Any] | None = None,
) -> str:
    """The ``train`` run row of ``harness train`` / ``harness sft``: the transformers backend, the
    method's spec hash under the rollout ``protocol`` with the recipe as the spec's JSON;
    ``runtime`` (where it runs: :func:`harness.device.describe_device`) joins the versions."""
    return create_run(
        store,
        run_id=new_run_id(f"{prefix}-{method.name}"),
        kind="train",
        method=method.name,
        model=model,
        backend="transformers",
        protocol=protocol,
        method_spec_hash=method.spec(protocol).spec_hash,
        method_spec_json=recipe.model_dump_json(),
        bench=recipe.bench,
        label=label,
        runtime=runtime,
        owned=True,  # a later --resume closes the row of a process that died (close_dead_run)
    )


def close_dead_run(store: Store, run_id: str) -> bool:
    """End the row of ``run_id`` as ``interrupted`` when it is still ``running`` but its process is
    gone (``kill -9``, a crash, a lost machine); its seconds run to its last heartbeat. A
    :class:`harness.errors.StoreError` (one line) when a live process still writes it. Returns
    whether a row was closed."""
    from harness.errors import StoreError
    from harness.results.store import owner_alive

    run = store.get_run(run_id)
    if run is None or run.status != "running":
        return False
    if owner_alive(run):
        raise StoreError(
            f"run {run_id} is still being written by process {run.owner_pid} on {run.owner_host}; "
            "wait for it to finish or stop it, then --resume"
        )
    beat = run.heartbeat_at or run.started_at
    finish_run(store, run_id, "interrupted", max(0.0, (beat - run.started_at).total_seconds()))
    return True


def resume_run(
    store: Store, *, method: str, model: str, protocol_id: str, method_spec_hash: str, bench: str
) -> tuple[str, bool] | None:
    """The newest run with exactly these settings as ``(run_id, complete)``; None when there is
    none. An unfinished run is claimed for this process (a :class:`harness.errors.StoreError` when
    another live process owns it); a complete one is returned untouched, nothing is left to do.
    With none, the next :func:`create_run` of these settings in this process inserts its row only
    if there is still none (another ``--resume`` started together is refused, one line)."""
    key = _settings_key(
        store, method=method, model=model, protocol_id=protocol_id, spec_hash=method_spec_hash, bench=bench
    )
    _RESUMED_NONE.discard(key)
    found = store.find_resumable(
        method=method, model=model, protocol_id=protocol_id, method_spec_hash=method_spec_hash, bench=bench
    )
    if found is None:
        _RESUMED_NONE.add(key)  # the run created next must still be the only one
        return None
    run_id, status = found
    if status == "complete":
        return run_id, True
    store.claim_run(run_id)
    return run_id, False


def finish_run(store: Store, run_id: str, status: str, elapsed: float) -> float:
    """End ``run_id`` with ``status``; its seconds are those stored before plus ``elapsed`` (0 when
    the row is gone). Returns the seconds written."""
    prev = store.get_run(run_id)
    seconds = (prev.seconds or 0.0) + elapsed if prev else 0.0
    store.finish_run(run_id, status, seconds)
    return seconds


def release(store: Store, run_id: str) -> None:
    """Hand a claimed run back before it started (``failed``, its time kept): it stays resumable."""
    finish_run(store, run_id, "failed", 0.0)


@dataclass
class ActiveRun:
    """The run inside :func:`running`: set ``status`` to how it ended when it did not fail
    (e.g. ``incomplete``); ``seconds`` is the run's total once it is finished."""

    run_id: str
    status: str = "complete"
    seconds: float = 0.0


@contextmanager
def running(store: Store, run_id: str) -> Iterator[ActiveRun]:
    """Time the body and finish ``run_id`` whatever happens: ``active.status`` when the body
    returns, ``interrupted`` on Ctrl-C, ``failed`` on any other exception (which propagates)."""
    active = ActiveRun(run_id)
    t0 = time.perf_counter()
    status = "failed"
    try:
        yield active
        status = active.status
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        active.seconds = finish_run(store, run_id, status, time.perf_counter() - t0)
