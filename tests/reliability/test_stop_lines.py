"""Issue 33, item 7: ``harness serve-retriever`` stopped by SIGTERM (``kill PID``) says it stopped;
it does not print the "use --resume" hint of a run (a server has nothing to resume)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.retrieval.helpers import TINY, write_jsonl


@pytest.mark.integration
def test_sigterm_stops_serve_retriever_without_the_resume_hint(tmp_path):
    corpus = write_jsonl(tmp_path / "tiny.jsonl", TINY)
    env = {**os.environ, "RAR_HARNESS_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "harness", "serve-retriever", "--corpus", str(corpus), "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert " on http://127.0.0.1:" in first, first
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "--resume" not in err and "finished samples" not in err, err
    assert "Traceback" not in err, err
