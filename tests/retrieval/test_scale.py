"""Cost at scale (``scripts/scale_bench.py``, ``docs/scale.md``).

The fast tests pin the synthetic corpus (deterministic, wiki-18's chunk shape, read by the
harness's own corpus reader) and the curve fit. The slow test runs the whole measurement:

    tox -e slow -- tests/retrieval/test_scale.py
    RAR_SCALE_SIZES=500000,1000000 pytest -m slow tests/retrieval/test_scale.py   # fewer sizes

(default sizes 0.5M, 1M, 2M and 5M passages: about an hour on 2 cores, up to ~16 GiB RSS).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "scale_bench.py"


@pytest.fixture(scope="module")
def sb():
    spec = importlib.util.spec_from_file_location("scale_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(sb, n: int, seed: int = 0) -> list[tuple[str, str]]:
    # a small vocabulary keeps this fast (the full one takes ~4 s to build); the shape of the
    # passages does not depend on it
    return list(sb.iter_passages(n, seed, vocab_size=4096))


def test_synthetic_corpus_is_deterministic_and_prefix_stable(sb) -> None:
    a, b = _rows(sb, 3000), _rows(sb, 3000)
    assert a == b
    assert _rows(sb, 700) == a[:700]  # smaller sizes are prefixes of larger ones
    assert _rows(sb, 3000, seed=1) != a
    assert [i for i, _ in a] == [str(r) for r in range(3000)]


def test_synthetic_passages_have_wiki18_chunk_shape(sb) -> None:
    rows = _rows(sb, 5000)
    titles, bodies = [], []
    for _, contents in rows:
        head, sep, body = contents.partition("\n")
        assert sep and head.startswith('"') and head.endswith('"')
        titles.append(len(head.strip('"').split()))
        bodies.append(len(body.split()))
    bodies_a = np.array(bodies)
    assert bodies_a.min() >= 1 and bodies_a.max() == 100
    # every chunk but an article's last has exactly 100 words: with 3.5 chunks per article on
    # average, 1 - 1/3.5 = 71% of the passages (plus the last chunks that drew 100)
    assert 0.66 < (bodies_a == 100).mean() < 0.77
    assert min(titles) >= 1 and max(titles) <= 14
    # a chunk shorter than 100 words ends its article: the next passage has a new title (but
    # for chance repeats of short Zipf-drawn titles such as "The")
    heads = [c.partition("\n")[0] for _, c in rows]
    same = [h1 == h2 for h1, h2 in zip(heads, heads[1:], strict=False)]
    after_short = [s for s, n1 in zip(same, bodies, strict=False) if n1 < 100]
    assert len(after_short) > 1000 and np.mean(after_short) < 0.05
    assert 0.66 < np.mean(same) < 0.77  # the chunks of one article share its title


def test_written_corpus_is_read_and_hashed_by_the_harness(sb, tmp_path: Path) -> None:
    from harness.retrieval.corpus import corpus_spec, iter_rows

    p1 = sb.write_corpus(tmp_path / "a.jsonl", 1500, seed=3, progress=False, vocab_size=4096)
    p2 = sb.write_corpus(tmp_path / "b.jsonl", 1500, seed=3, progress=False, vocab_size=4096)
    assert p1.read_bytes() == p2.read_bytes()
    s1, s2 = corpus_spec(p1), corpus_spec(p2)
    assert s1.n_passages == 1500
    assert s1.content_hash == s2.content_hash
    assert [(r.id, r.contents) for r in iter_rows(p1)] == _rows(sb, 1500, seed=3)


def test_power_fit_recovers_exponent_and_scale(sb) -> None:
    ns = [5e5, 1e6, 2e6]
    a, b = sb.power_fit(ns, [3.0 * n**1.5 for n in ns])
    assert b == pytest.approx(1.5, rel=1e-9)
    assert a == pytest.approx(3.0, rel=1e-6)


@pytest.mark.slow
def test_scale_measurements(tmp_path: Path) -> None:
    sizes = [int(s) for s in os.environ.get("RAR_SCALE_SIZES", "500000,1000000,2000000,5000000").split(",")]
    out = tmp_path / "scale.json"
    cmd = [sys.executable, str(SCRIPT), "run", "--sizes", ",".join(map(str, sizes)), "--out", str(out)]
    cmd += ["--work", str(tmp_path / "work"), "--encode", "200"]
    subprocess.run(cmd, check=True)
    data = json.loads(out.read_text())
    assert data["encode"]["status"] == "ok" and data["encode"]["dim"] == 384
    measured = []
    for n in sizes:
        m = data["sizes"][str(n)]
        if m.get("bm25s_build", {}).get("status") == "skipped":  # only ever for predicted memory
            assert m["bm25s_build"]["reason"].startswith("predicted peak RSS")
            continue
        for phase in ("prepare", "bm25s_build", "bm25s_query"):
            assert m[phase]["status"] == "ok", (n, phase, m[phase])
            assert m[phase]["peak_rss"] > 0 and m[phase]["load_before"]
        assert m["prepare"]["passages_per_s"] == pytest.approx(n / m["prepare"]["seconds"])
        assert m["bm25s_query"]["queries"] == 1000
        # top-10 of 5-12 Zipf words: nearly every query matches 10 passages (all of them from 0.5M
        # passages on; at 0.1M a few queries of rare words match fewer)
        assert 9.9 <= m["bm25s_query"]["mean_hits"] <= 10
        measured.append((n, m))
    assert len(measured) >= 2
    # more passages: more vocabulary, a bigger index and compact corpus, a different hash
    for (_, small), (_, big) in zip(measured, measured[1:], strict=False):
        assert big["bm25s_build"]["vocabulary"] > small["bm25s_build"]["vocabulary"]
        assert big["bm25s_build"]["index_bytes"] > small["bm25s_build"]["index_bytes"]
        assert big["prepare"]["prepared_bytes"] > small["prepare"]["prepared_bytes"]
        assert big["prepare"]["content_hash"] != small["prepare"]["content_hash"]
        assert big["bm25s_query"]["mean_hits"] >= small["bm25s_query"]["mean_hits"]
    table = subprocess.run(
        [sys.executable, str(SCRIPT), "fit", str(out)], check=True, capture_output=True, text=True
    )
    for n, _ in measured:
        assert f"| {n:,} |" in table.stdout
    assert "bm25s_build seconds" in table.stdout


@pytest.mark.pyserini
def test_pyserini_phases_measure_build_and_query(tmp_path: Path) -> None:
    """``run --pyserini`` at a small size: both retrievers measured, the JVM inside the polled peak,
    the same queries answered by both, and a second run measures nothing again."""
    out = tmp_path / "scale.json"
    cmd = [sys.executable, str(SCRIPT), "run", "--sizes", "2000", "--out", str(out), "--pyserini"]
    cmd += ["--work", str(tmp_path / "work"), "--encode", "0", "--queries", "50"]
    subprocess.run(cmd, check=True, capture_output=True)
    m = json.loads(out.read_text())["sizes"]["2000"]
    for phase in ("prepare", "bm25s_build", "bm25s_query", "pyserini_build", "pyserini_query"):
        assert m[phase]["status"] == "ok", (phase, m[phase])
    assert m["pyserini_build"]["index_bytes"] > 0 and m["pyserini_build"]["threads"] == 2
    assert m["pyserini_build"]["polled_peak_rss"] > m["bm25s_build"]["polled_peak_rss"]  # a JVM
    assert m["pyserini_query"]["queries"] == m["bm25s_query"]["queries"] == 50
    assert m["pyserini_query"]["mean_hits"] == m["bm25s_query"]["mean_hits"]
    before = out.read_text()
    subprocess.run(cmd, check=True, capture_output=True)
    assert json.loads(out.read_text())["sizes"]["2000"] == json.loads(before)["sizes"]["2000"]
    table = subprocess.run(
        [sys.executable, str(SCRIPT), "fit", str(out)], check=True, capture_output=True, text=True
    ).stdout
    assert "| passages | pyserini build |" in table and "| 2,000 |" in table
