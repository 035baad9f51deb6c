"""llama.cpp in-process over a GGUF (the prebuilt ``xllamacpp`` wheel): the fast CPU backend.

The backend runs llama.cpp's own server inside this process (``xllamacpp.Server``, bound to an
ephemeral port on 127.0.0.1, gone with the process) and talks to it over HTTP, because that server
is what gives llama.cpp's continuous batching and prompt cache:

* ``max_batch_size`` parallel slots (default 1, see Reproducibility): one :meth:`generate` call
  with N prompts keeps up to that many requests in flight, which llama.cpp decodes together;
* ``cache_prompt``: each slot keeps the KV cache of its last prompt, and a request goes to the slot
  with the longest common prefix, so the next turn of a multi-turn rollout prefills only the
  appended observation. ``Completion.prefill_tokens`` is llama.cpp's ``timings.prompt_n`` (the
  prompt tokens it computed; at least 1, since the last prompt token is always re-evaluated).

Requests go to llama.cpp's native ``/completion`` with the prompt as token ids, so the prompt is
exactly :meth:`prompt_ids`, and ``return_tokens`` gives the generated ids (the end-of-sequence id
included when the model stopped by itself). Stop strings are sent to the server so it stops
early; the text, the stop string, the finish reason and ids that decode to the text are then
derived from the generated ids by :mod:`harness.llm.decoding`, exactly as in the transformers
backend. Sampling is neutral unless :class:`~harness.types.SamplingParams` says otherwise: no
presence/frequency penalty, no min-p, DRY or XTC; ``top_k`` and ``repetition_penalty`` are sent as
``top_k`` (0 = off) and ``repeat_penalty`` (1.0 = off; with a penalty, over the whole context, see
:func:`llamacpp_penalty_window`); ``temperature == 0`` is greedy. Prompt ``i`` of a call is
sampled with seed ``seed + i``.

Speculative decoding (``draft="ngram"``, off by default): llama.cpp drafts up to 16 tokens by
finding the last 4 tokens earlier in the context and checks the draft in one decode call (see
:data:`harness.llm.server.NGRAM_DRAFT`). The accepted tokens are the model's own greedy or sampled
choices, but a decode call over several tokens rounds differently from one over a single token:
greedy output differs from ``draft="none"`` at near-ties (47 of 159 turns of the main job; 13 of
20 reader-model ``cot`` answers on mini), and, unlike without drafting, it depends on the thread
count (3 of those 20 differed between 1 and 2 threads; 0 of 20 without drafting). It is fast where
the model repeats itself: the main job took 2 min 58 s with it against 3 min 57 s without (one
slot; docs/performance.md). :attr:`drafted` and :attr:`accepted` count the drafted and accepted tokens.

Reproducibility: llama.cpp's CPU kernels take different paths for decode calls of different sizes,
and which requests share a call depends on when they reach the server, so with several slots a
greedy continuation can flip at a near-tie between two identical runs (seen once in 6 naive_rag
answers on mini-multihop). Hence the default of one slot (requests in order): a rerun repeats
exactly (the main job's two runs at 273ffdf with 8 slots happened to be identical too). Batching
gained nothing measurable on 2 cores: the main job took 3 min 57 s with one slot, 4 min 7 s and
4 min 27 s with 8 (different numerics, so different token counts: 20,614 against 17,825).
Greedy output also differs from the transformers backend on the same Q4_1 weights (llama.cpp
multiplies with 8-bit-quantised activations; 1 of 8 SmolLM2 chat answers was identical over 48
tokens), so runs of the two backends are distinct runs, never mixed.

Tokenization, detokenization (special tokens kept) and the chat template (the GGUF's own, through
llama.cpp's Jinja engine) come from the same server (``/tokenize``, ``/detokenize``,
``/apply-template``), so they are the model's tokenizer, not an approximation.

``model``: a preset (``default`` = SmolLM2-135M-Instruct, ``qwen2.5-coder-1.5b-instruct``; see
``harness list models``) or a path to a ``.gguf`` file.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.llm.base import BackendSpec, GenerateArgs, TokenBackend, base_seed
from harness.llm.model_files import PRESETS, canonical_name, sha256_file
from harness.llm.server import (
    check_llamacpp_runtime,
    import_xllamacpp,
    llama_threads,
    resolve_gguf,
    server_params,
)
from harness.types import Completion, SamplingParams


def llamacpp_penalty_window(n_ctx: int) -> dict[str, int]:
    """The request field that makes llama.cpp's ``repeat_penalty`` cover the whole context of
    ``n_ctx`` tokens (its default window is the last 64; the xllamacpp server refuses ``-1``). The
    server replays the prompt into the sampler, so the penalty then covers the prompt and the
    generated tokens, as in transformers and vLLM. Sent only with a penalty, so requests without
    one stay what they were."""
    return {"repeat_last_n": n_ctx}


class LlamaCppBackend(TokenBackend):
    name = "llamacpp"

    def __init__(
        self,
        spec: BackendSpec,
        *,
        lora: Sequence[Path] = (),
        logprobs: bool = False,
        child: bool = False,
        spin: bool = False,
    ):
        """``lora``: GGUF LoRA adapters applied to every request (:meth:`set_adapters` swaps them);
        ``logprobs``: fill ``Completion.logprobs`` with the engine's log-probability of each kept
        generated token (llama.cpp's ``n_probs`` before sampling: the softmax of the raw logits,
        i.e. temperature 1, whatever the request's temperature); ``child``: run the server in a
        child process (:mod:`harness.llm.llamacpp_child`), which a restart or :meth:`close`
        kills by its PID; for a process that also runs torch and restarts the engine. ``spin``
        (with ``child``): the child's threads wait actively (``OMP_WAIT_POLICY=ACTIVE``) instead of
        the passive wait :mod:`harness.llm.server` sets for more than one thread; only for an engine
        that has the cores to itself while it runs and is :meth:`suspend`-ed otherwise (the
        trainer's: on 2 idle cores, 2 threads decoded 60-69 tokens/s spinning against 11-16
        passively, and 1 thread 44-55)."""
        if spec.kind != "llamacpp":
            raise ConfigError(f"LlamaCppBackend got a {spec.kind!r} spec")
        self.spec = spec
        self._inflight: set[http.client.HTTPConnection] = set()  # requests close() must abort
        self._inflight_lock = threading.Lock()
        self._closing = False
        from harness.llm.adapters import get_adapter, verified_gguf

        # a shipped trained policy (harness.llm.adapters): its base preset's GGUF with its adapter first
        self.adapter = get_adapter(spec.model)
        self.gguf = resolve_gguf(self.adapter.base if self.adapter is not None else spec.model)
        self.threads = llama_threads(spec.threads)
        self.parallel = spec.batch_limit
        shipped = (verified_gguf(self.adapter),) if self.adapter is not None else ()
        self.lora = (*shipped, *(Path(x) for x in lora))
        self.logprobs = logprobs
        self.child = child
        if spin and not child:
            raise ConfigError("LlamaCppBackend(spin=True) needs child=True (the wait policy is the child's)")
        self.spin = spin
        self._proc: subprocess.Popen[bytes] | None = None
        self.logprobs_unaligned = 0  # completions whose kept ids are not a prefix of the generated ones
        check_llamacpp_runtime()
        # libgomp reads its wait policy once, when xllamacpp loads it (see harness.llm.server)
        if self.threads > 1:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        xllamacpp = import_xllamacpp()

        self._xllamacpp_version = xllamacpp.__version__
        self._server: Any = None
        self._start()
        self._pool = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="llamacpp")
        self._lock = threading.Lock()
        self.unaligned = 0
        self.drafted = 0  # tokens llama.cpp drafted (draft="ngram"), and how many the model accepted
        self.accepted = 0
        self._revision: str | None = None
        props = self._call("GET", "/props")
        self._template = props.get("chat_template") or ""
        self._bos_ids = self._call("POST", "/tokenize", {"content": "", "add_special": True})["tokens"]
        self._bos = self.detokenize(self._bos_ids) if self._bos_ids else ""

    def _start(self) -> None:
        if self.child:
            self._start_child()
            return
        import xllamacpp

        spec = self.spec
        params = server_params(
            self.gguf,
            threads=self.threads,
            n_ctx=spec.n_ctx,
            parallel=self.parallel,
            draft=spec.draft,
            lora=self.lora,
        )
        self._flash_attn_type = int(params.flash_attn_type)  # what the server runs, for describe()
        try:
            self._server = xllamacpp.Server(params)
        except RuntimeError as e:
            what = f" with LoRA adapters {', '.join(map(str, self.lora))}" if self.lora else ""
            raise HarnessError(f"{self.gguf}: llama.cpp could not load this GGUF{what} ({e})") from e
        self.url = self._server.listening_address
        parts = urllib.parse.urlsplit(self.url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port

    def _start_child(self) -> None:
        spec = self.spec
        cfg = {
            "gguf": str(self.gguf),
            "threads": self.threads,
            "n_ctx": spec.n_ctx,
            "parallel": self.parallel,
            "draft": spec.draft,
            "lora": [str(x) for x in self.lora],
        }
        env = dict(os.environ)
        if self.spin:
            env["OMP_WAIT_POLICY"] = "ACTIVE"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "harness.llm.llamacpp_child", json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().decode()
        try:
            got = json.loads(line)
        except json.JSONDecodeError:
            got = {"error": f"the child exited ({self._proc.poll()}) without an address"}
        if "url" not in got:
            self._stop_child()
            what = f" with LoRA adapters {', '.join(map(str, self.lora))}" if self.lora else ""
            raise HarnessError(f"{self.gguf}: llama.cpp could not load this GGUF{what} ({got.get('error')})")
        self._flash_attn_type = 0  # server_params turns flash attention off
        self.url = got["url"]
        parts = urllib.parse.urlsplit(self.url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port

    def _stop_child(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # the child exits on end-of-file
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def suspend(self) -> None:
        """Stop the child engine until the next :meth:`set_adapters` starts it again (the trainer
        frees the cores for its learner update this way); only with ``child=True``."""
        if not self.child:
            raise HarnessError("LlamaCppBackend.suspend: only a child engine (child=True) can be suspended")
        with self._inflight_lock:
            if self._inflight:
                raise HarnessError("LlamaCppBackend.suspend: generations are still in flight")
        self._stop_child()

    def set_adapters(self, lora: Sequence[Path]) -> None:
        """Serve with the LoRA adapters ``lora`` from now on (empty: the base model): llama.cpp loads
        adapters when its server starts, so the in-process server restarts over the same
        memory-mapped GGUF (about 0.25 s for SmolLM2-135M; the prompt cache starts empty). Call
        it between generations, never during one."""
        with self._inflight_lock:
            if self._inflight:
                raise HarnessError("LlamaCppBackend.set_adapters: generations are still in flight")
        self._server = None  # stops the old server and frees its contexts (not the mapped model)
        self._stop_child()
        self.lora = tuple(Path(x) for x in lora)
        self._start()

    # -- the in-process server -----------------------------------------------------------------
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request on its own connection (the standard library's ``http.client``, not httpx:
        :meth:`close` must be able to abort a request in flight, and httpx has no way to do that
        from another thread). No read timeout: a long generation is not a failure."""
        if self._closing:
            raise HarnessError(f"llama.cpp server in this process ({self.url}{path}): the backend is closed")
        if self.child and self._proc is None:
            raise HarnessError(
                f"llama.cpp engine ({self.url}{path}): suspended; set_adapters starts it again before a request"
            )
        conn = http.client.HTTPConnection(self._host, self._port, timeout=None)
        with self._inflight_lock:
            self._inflight.add(conn)
        try:
            conn.connect()
            if self._closing:  # close() began before this socket existed: it could not shut it
                raise ConnectionAbortedError("closing")
            payload = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read().decode()
        except (OSError, http.client.HTTPException) as e:
            why = "aborted by close()" if self._closing else str(e) or type(e).__name__
            raise HarnessError(f"llama.cpp server in this process ({self.url}{path}): {why}") from e
        finally:
            with self._inflight_lock:
                self._inflight.discard(conn)
            conn.close()
        if r.status != 200:
            raise HarnessError(f"llama.cpp server in this process: {method} {path} -> {r.status}: {text}")
        return json.loads(text)

    # -- tokenizer -----------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        if not text:
            return []
        body = {"content": text, "add_special": False, "parse_special": True}
        return list(self._call("POST", "/tokenize", body)["tokens"])

    def prompt_ids(self, text: str) -> list[int]:
        """With the BOS token when the model wants one (GGUF metadata) and ``text`` lacks it."""
        add = bool(self._bos) and not text.startswith(self._bos)
        return (list(self._bos_ids) if add else []) + self.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        if len(ids) == 0:
            return ""
        return str(self._call("POST", "/detokenize", {"tokens": [int(i) for i in ids]})["content"])

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not self._template:
            raise ConfigError(f"{self.gguf}: the GGUF has no chat template (tokenizer.chat_template)")
        body = {"messages": messages, "add_generation_prompt": add_generation_prompt}
        return str(self._call("POST", "/apply-template", body)["prompt"])

    def describe(self) -> dict[str, Any]:
        if self._revision is None:
            base = self.adapter.base if self.adapter is not None else self.spec.model
            preset = PRESETS.get(canonical_name(base))
            digest = preset.sha256 if preset is not None else sha256_file(self.gguf)  # presets: verified
            self._revision = f"gguf-sha256:{digest}"
        return {
            "backend": self.name,
            "model": canonical_name(self.spec.model),
            "path": str(self.gguf),
            "dtype": "gguf",
            "revision": self._revision,
            "threads": self.threads,
            "n_ctx": self.spec.n_ctx,
            "parallel": self.parallel,
            "flash_attn_type": self._flash_attn_type,  # llama.cpp's: 0 off, -1 auto, 1 on
            "draft": self.spec.draft,
            "xllamacpp": self._xllamacpp_version,
            **({"lora": [str(x) for x in self.lora]} if self.lora else {}),
            **(self.adapter.runtime() if self.adapter is not None else {}),
        }

    # -- generation ----------------------------------------------------------------------------
    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        first = base_seed(args.sampling)
        return self.complete_seeded(prompt_ids, [first + i for i in range(len(prompt_ids))], args)

    def complete_seeded(
        self, prompt_ids: Sequence[Sequence[int]], seeds: Sequence[int], args: GenerateArgs
    ) -> list[Completion]:
        """:meth:`generate_ids`'s work with prompt ``i`` sampled with seed ``seeds[i]`` (what
        :class:`~harness.llm.llamacpp_engines.LlamaCppEngines` gives each engine its share of a
        call with, so a prompt keeps its seed whichever engine serves it)."""
        prompts = [[int(t) for t in ids] for ids in prompt_ids]
        if len(seeds) != len(prompts):
            raise ValueError(f"complete_seeded: {len(seeds)} seeds for {len(prompts)} prompts")
        args.check_prompt_ids(
            prompts,
            limit=self.spec.n_ctx,
            room=f"n_ctx={self.spec.n_ctx}",
            fix="raise BackendSpec.n_ctx or shorten the prompt (e.g. max_obs_tokens)",
        )
        sampling, max_new_tokens = args.sampling, args.max_new_tokens
        stops = [s for s in args.stop if s]
        # all prompts at once: the server decodes up to `parallel` of them in one batch
        futures = [
            self._pool.submit(self._request, ids, int(seed), stops, max_new_tokens, sampling)
            for ids, seed in zip(prompts, seeds, strict=True)
        ]
        out = []
        for ids, fut in zip(prompts, futures, strict=True):
            try:
                r, latency = fut.result()
            except CancelledError as e:  # queued when close() cancelled it
                raise HarnessError(
                    f"llama.cpp server in this process ({self.url}): aborted by close()"
                ) from e
            timings = r.get("timings") or {}
            with self._lock:  # completion_from_ids counts unaligned sequences
                self.drafted += int(timings.get("draft_n", 0))
                self.accepted += int(timings.get("draft_n_accepted", 0))
                c = self.completion_from_ids(
                    r["tokens"],
                    prompt_tokens=len(ids),
                    eos_hit=r.get("stop_type") == "eos",
                    stop=stops,
                    include_stop=args.include_stop,
                    latency_s=latency,
                )
            c.prefill_tokens = int(timings["prompt_n"]) if "prompt_n" in timings else None
            if self.logprobs:
                c.logprobs = self._kept_logprobs(r, c)
            out.append(c)
        return out

    def _kept_logprobs(self, r: dict[str, Any], c: Completion) -> list[float] | None:
        """The engine's log-prob of each of ``c.token_ids`` (a prefix of the generated ids), or
        None (counted) when the kept ids are not that prefix (a stop string cut inside a token).

        llama.cpp's server reports no probabilities for the tokens of the stop string it stopped
        on (``stop_type`` ``word``: it drops as many entries as the stop string has tokens from the
        end of ``completion_probabilities``), so those last kept tokens get NaN: no engine value,
        left out of the trainer's engine/learner comparison; every earlier token keeps its own."""
        gen = [int(t) for t in r["tokens"]]
        probs = r.get("completion_probabilities") or []
        kept = list(c.token_ids or [])
        short = len(probs) < len(gen) and r.get("stop_type") == "word"
        if (len(probs) != len(gen) and not short) or gen[: len(kept)] != kept:
            self.logprobs_unaligned += 1
            return None
        lps = [float(p["logprob"]) for p in probs] + [math.nan] * (len(gen) - len(probs))
        return lps[: len(kept)]

    def _request(
        self, ids: list[int], seed: int, stops: list[str], max_new_tokens: int, sampling: SamplingParams
    ) -> tuple[dict[str, Any], float]:
        body = {
            "prompt": ids,
            "n_predict": max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,  # 0: off
            "min_p": 0.0,
            "typical_p": 1.0,
            "repeat_penalty": sampling.repetition_penalty,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "dry_multiplier": 0.0,
            "xtc_probability": 0.0,
            "seed": seed & 0xFFFFFFFF,
            "stop": stops,
            "cache_prompt": True,
            "return_tokens": True,
            "stream": False,
        }
        if self.logprobs:  # the sampled token's log-prob under the raw logits (pre-sampling)
            body.update({"n_probs": 1, "post_sampling_probs": False})
        if sampling.repetition_penalty != 1.0:
            body.update(llamacpp_penalty_window(self.spec.n_ctx))
        t0 = time.perf_counter()
        r = self._call("POST", "/completion", body)
        return r, time.perf_counter() - t0

    def close(self) -> None:
        # Closing after an interrupt (Ctrl-C, SIGTERM) must not wait for the generations still in
        # flight (minutes, at a 500-token limit): queued requests are cancelled and the sockets of
        # the requests in flight are shut down, so llama.cpp sees its clients gone and cancels
        # their tasks. Only then is the server dropped: its destructor waits for running tasks.
        self._closing = True
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        with self._inflight_lock:
            inflight = list(self._inflight)
        for conn in inflight:
            if conn.sock is not None:
                with contextlib.suppress(OSError):  # already closed by the worker: nothing to abort
                    conn.sock.shutdown(socket.SHUT_RDWR)
        if pool is not None:
            pool.shutdown(wait=True)
        # dropping the last reference stops llama.cpp's loop and HTTP threads and frees the model
        self._server = None
        self._stop_child()
