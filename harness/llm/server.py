"""llama.cpp's OpenAI-compatible server (the prebuilt ``xllamacpp`` wheel) over a GGUF.

Two users:

* the in-process ``llamacpp`` backend (:mod:`harness.llm.llamacpp_backend`) builds an
  ``xllamacpp.Server`` in its own process with :func:`server_params`;
* :class:`ModelServer` (``harness serve-model``, the judge, tests) runs one in a child process,
  behind a Python front (:mod:`harness.llm.front`: limits, API key, request checks) that listens on
  ``host:port``; llama.cpp itself binds a private port on 127.0.0.1 and requires a random key that
  only the front has. It waits until the front's ``/health`` answers (port bound *and* model
  loaded), and stops the child by its PID.

The child never outlives its parent: it holds the read end of a pipe whose write end only the
parent has (``stdin``), and exits -- deleting its log file first -- as soon as that pipe reaches
end-of-file, which happens when the parent closes it (a normal stop) or dies in any way, SIGKILL
included. The kernel closes a dead process's descriptors, so no signal handler is needed. The log
lives under the harness cache (``<cache>/logs``) and is removed on exit. The clients' API key goes
to the child in its environment, never on its command line.

Threads: llama.cpp's worker threads spin while waiting for work (OpenMP's active wait). On a busy
2-core machine two spinning threads collapsed from 40 to 2 tokens/s, so the default is one thread,
and more than one thread runs with ``OMP_WAIT_POLICY=PASSIVE``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from harness.errors import ConfigError, HarnessError, ServerError
from harness.llm.front import FrontLimits
from harness.llm.model_files import cache_root, resolve_gguf

__all__ = [
    "ModelServer",
    "fit_threads",
    "free_port",
    "llama_threads",
    "port_is_free",
    "resolve_gguf",
    "server_params",
]

LOG_DIR = "logs"
CHILD_KEY_ENV = "_HARNESS_SERVE_MODEL_API_KEY"  # the clients' key, parent -> child (not argv)


def llama_threads(threads: int | None) -> int:
    """``threads``, else ``OMP_NUM_THREADS``, else 1 (see the module docstring)."""
    if threads is not None:
        return threads
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else 1


def free_cores(*, load: float | None = None, cores: int | None = None, busy: float | None = None) -> int:
    """The cores no other process is using: the CPUs this process may run on (:func:`_cpus`) less
    the larger of the 1-minute load average and the cores busy right now (:func:`busy_cores`),
    rounded, at least 1. Read when a command starts, before its own work shows. The load average
    alone lags: two processes started a few seconds ago leave it near 0 while they fill both cores
    of a 2-core machine; the probe sees them at once, and the load average still counts the
    processes waiting for a core, which a busy fraction of at most ``cores`` cannot."""
    cores = _cpus() if cores is None else cores
    load = os.getloadavg()[0] if load is None else load
    if busy is None:
        busy = busy_cores() or 0.0
    return max(1, min(cores, round(cores - max(load, busy))))


def busy_cores(interval: float = 0.1, *, stat: str = "/proc/stat") -> float | None:
    """The CPUs other processes keep busy now: the non-idle share of ``/proc/stat``'s CPU time over
    ``interval`` seconds (this process sleeps meanwhile, so its own work is not counted), times
    :func:`_cpus`. None where ``/proc/stat`` cannot be read (macOS): the load average alone then."""

    def idle_total() -> tuple[int, int]:
        with open(stat, encoding="ascii") as f:
            fields = [
                int(x) for x in f.readline().split()[1:9]
            ]  # user nice system idle iowait irq softirq steal
        return fields[3] + fields[4], sum(fields)

    try:
        idle0, total0 = idle_total()
        time.sleep(interval)
        idle1, total1 = idle_total()
    except (OSError, ValueError, IndexError):
        return None
    if total1 <= total0:
        return None
    return (1.0 - (idle1 - idle0) / (total1 - total0)) * _cpus()


def _cpus() -> int:
    """The CPUs this process may run on (``os.cpu_count()`` where there is no affinity call: macOS)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def fit_threads(
    threads: int,
    what: str = "--threads",
    *,
    load: float | None = None,
    cores: int | None = None,
    busy: float | None = None,
) -> int:
    """``threads``, lowered to :func:`free_cores` with one line on stderr when more are asked for
    than are free: llama.cpp's threads wait for each other at every step, so a thread that shares
    its core with a busy process stalls them all (``--threads 2`` beside other work measured 9-11x
    slower than one thread, with the same tokens)."""
    if threads <= 1:
        return threads
    load = os.getloadavg()[0] if load is None else load
    if busy is None:
        busy = busy_cores() or 0.0
    free = free_cores(load=load, cores=cores, busy=busy)
    if threads <= free:
        return threads
    print(
        f"{what} {threads}: only {free} core(s) free (load average {load:.1f}, {busy:.1f} busy now, on "
        f"{_cpus() if cores is None else cores}); using {free} thread(s), "
        "as more would wait on busy cores",
        file=sys.stderr,
    )
    return free


def passive_omp_env(threads: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: ``os.environ``) with ``OMP_WAIT_POLICY=PASSIVE`` when ``threads > 1`` and
    the user did not choose a policy. It must be set before libgomp loads (the first
    ``import xllamacpp`` of a process)."""
    env = dict(os.environ if env is None else env)
    if threads > 1:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


# the system OpenMP runtime the xllamacpp wheel links against (``ldd xllamacpp.abi3.so``); the wheel
# does not bundle it, so a machine without it (a slim Debian image lacks libgomp1) cannot import it
LIBGOMP = "libgomp.so.1"
LLAMACPP_INSTALL = "pip install 'rar-harness[llamacpp]' (in a clone: pip install -e '.[cpu,llamacpp]')"


def check_llamacpp_runtime() -> None:
    """One :class:`ConfigError` line, before llama.cpp starts, when the xllamacpp wheel or the OpenMP
    runtime it links (``libgomp``) is missing; ``import xllamacpp`` was a traceback (issue 61).
    Loads neither and starts no process: libgomp reads ``OMP_WAIT_POLICY`` once, when it loads (see
    :func:`passive_omp_env`), so it is looked up where the dynamic loader finds it
    (:func:`libgomp_found`); where that cannot be told, the import's own error is mapped
    (:func:`missing_runtime`)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("xllamacpp") is not None
    except ImportError:  # an import hook that refuses it
        found = False
    if not found:
        raise ConfigError(
            f"llama.cpp (the default backend) needs the xllamacpp wheel, which is not installed: "
            f"{LLAMACPP_INSTALL}; or use a model server (--base-url)"
        )
    if libgomp_found(LIBGOMP) is False:
        raise missing_runtime(LIBGOMP)


def missing_runtime(libgomp: str = LIBGOMP) -> ConfigError:
    return ConfigError(
        f"llama.cpp (the xllamacpp wheel) needs the system OpenMP runtime {libgomp}, which is not "
        "installed: `apt-get install libgomp1` (Debian, Ubuntu), `dnf install libgomp` (Fedora), "
        "`apk add libgomp` (Alpine)"
    )


def libgomp_found(name: str) -> bool | None:
    """Whether the dynamic loader would find library ``name``: in ``LD_LIBRARY_PATH`` or in glibc's
    loader cache (``/etc/ld.so.cache``, which lists every library of the system's library folders).
    None where that cannot be told (not Linux, or no loader cache: musl)."""
    if not sys.platform.startswith("linux"):
        return None
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if folder and (Path(folder) / name).exists():
            return True
    try:
        cache = Path("/etc/ld.so.cache").read_bytes()
    except OSError:
        return None
    return name.encode() + b"\0" in cache


def import_xllamacpp() -> Any:
    """``import xllamacpp``, its missing OpenMP runtime one line (:func:`missing_runtime`)."""
    try:
        import xllamacpp
    except ImportError as e:
        if "libgomp" in str(e):
            raise missing_runtime() from None
        raise
    return xllamacpp


# llama.cpp's ngram-simple drafting: when the last `match` tokens occurred earlier in the context,
# the (up to) `max` tokens that followed them there are the draft, and one decode call checks them
# all. llama.cpp's defaults (12 and 48) wait for a 12-token repeat; the main-job figures in docs/performance.md
# were measured with 4 and 16 (no other setting was compared).
NGRAM_DRAFT = {"match": 4, "max": 16}


def server_params(
    gguf: Path,
    *,
    threads: int,
    n_ctx: int,
    parallel: int,
    host: str = "127.0.0.1",
    port: int = 0,
    alias: str | None = None,
    verbosity: int = 1,
    draft: Literal["none", "ngram"] = "none",
    http_threads: int | None = None,
    api_key: str | None = None,
    lora: Sequence[Path] = (),
) -> Any:
    """``xllamacpp.CommonParams`` for a server over ``gguf``.

    ``n_ctx`` is per slot: llama.cpp splits its context evenly over ``parallel`` slots, each with its
    own KV cache and cached prompt (``cache_prompt``, reused by longest common prefix). ``port=0``
    binds a free port. ``verbosity`` 1 logs errors only, 3 one line per request. ``draft="ngram"``:
    llama.cpp's draftless speculative decoding (``--spec-type ngram-simple``), see
    :data:`NGRAM_DRAFT`. ``http_threads`` (default: llama.cpp's) and ``api_key`` (a key every
    request must send) are for the server behind ``serve-model``'s front. ``lora``: GGUF LoRA
    adapters (:mod:`harness.llm.gguf_lora`), each applied at scale 1 to every request."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(gguf)
    p.n_parallel = parallel
    p.n_ctx = n_ctx * parallel
    p.kv_unified = False
    p.cont_batching = True
    p.cache_prompt = True
    p.cache_ram_mib = 1024  # host-memory copies of evicted slot prompts (llama.cpp default: 8 GiB)
    p.hostnames = [host]
    p.port = port
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.cpuparams.poll = 0  # no busy polling between graph computations
    p.cpuparams_batch.poll = 0
    # Flash attention off (llama.cpp's default "auto" turns it on for the CPU): its CPU kernel
    # decodes long contexts slowly. SmolLM2-135M, 2 threads, 4 sequences after 1,500-token prompts:
    # 47 tokens/s with it, 65 without (prefill 168 against 125 tokens/s). The main job's figures
    # with and without it are in docs/performance.md.
    p.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    p.warmup = False
    p.fit_params = False  # CPU only: nothing to fit, and it costs a second per start
    p.prefill_assistant = False  # a final assistant message is closed, as HF apply_chat_template does
    p.endpoint_metrics = True
    p.verbosity = verbosity
    if draft == "ngram":
        p.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
        p.speculative.ngram_simple.size_n = NGRAM_DRAFT["match"]
        p.speculative.ngram_simple.size_m = NGRAM_DRAFT["max"]
        p.speculative.draft.n_max = NGRAM_DRAFT["max"]
    if alias:
        p.model_alias = {alias}
    if http_threads is not None:
        p.n_threads_http = http_threads
    if api_key is not None:
        p.api_keys = [api_key]
    if lora:
        p.lora_adapters = [xllamacpp.CommonAdapterLoraInfo(str(x), 1.0) for x in lora]
    return p


def check_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port}: a TCP port is a number from 1 to 65535")
    return port


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could bind ``host:port`` now. Like llama.cpp's HTTP server, with
    ``SO_REUSEADDR``: connections of a stopped server lingering in TIME_WAIT do not hold the port,
    a listening socket does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_logs(log_dir: Path) -> None:
    """Logs of servers whose parent is gone (``model-server-<parent pid>-<port>.log``)."""
    for p in log_dir.glob("model-server-*-*.log"):
        pid = p.name.split("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            p.unlink(missing_ok=True)


class ModelServer:
    """``with ModelServer() as srv: srv.base_url`` -> ``http://127.0.0.1:<port>/v1``.

    ``parallel`` requests are decoded together (llama.cpp slots, ``n_ctx`` tokens each); more
    wait in the server's queue."""

    def __init__(
        self,
        model: str = "default",
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        threads: int = 1,
        n_ctx: int = 4096,
        parallel: int = 4,
        alias: str = "smollm2",
        startup_timeout: float = 120.0,
        api_key: str | None = None,
        admin_routes: bool = False,
        limits: FrontLimits | None = None,
    ):
        if port is not None:
            check_port(port)
        if threads < 1 or parallel < 1:
            raise ConfigError(f"threads ({threads}) and parallel ({parallel}) must be at least 1")
        self.gguf = resolve_gguf(model)
        self.host = host
        self.port = port
        self.threads = threads
        self.n_ctx = n_ctx
        self.parallel = parallel
        self.alias = alias
        self.startup_timeout = startup_timeout
        self.api_key = api_key or None
        self.admin_routes = admin_routes
        self.limits = limits or FrontLimits()
        self.log_path: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def headers(self) -> dict[str, str]:
        """What a client sends with each request (the API key, when one is set)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _child_config(self) -> dict[str, Any]:
        return {
            "gguf": str(self.gguf),
            "host": self.host,
            "port": self.port,
            "threads": self.threads,
            "n_ctx": self.n_ctx,
            "parallel": self.parallel,
            "alias": self.alias,
            "admin_routes": self.admin_routes,
            "limits": self.limits.model_dump(mode="json"),
            "log": str(self.log_path),
        }

    def start(self) -> ModelServer:
        import httpx

        if self.proc is not None:
            raise HarnessError(f"the model server at {self.base_url} is already running")
        check_llamacpp_runtime()
        if self.port is None:
            self.port = free_port(self.host)
        elif not port_is_free(self.host, self.port):
            raise ServerError(
                f"{self.host}:{self.port} is already in use (another server?): choose another --port"
            )
        log_dir = cache_root() / LOG_DIR
        log_dir.mkdir(parents=True, exist_ok=True)
        _remove_stale_logs(log_dir)
        self.log_path = log_dir / f"model-server-{os.getpid()}-{self.port}.log"
        env = passive_omp_env(self.threads)
        env["OMP_NUM_THREADS"] = str(self.threads)
        env.pop(CHILD_KEY_ENV, None)
        if self.api_key:
            env[CHILD_KEY_ENV] = self.api_key
        code = "import sys; from harness.llm.server import child_main; sys.exit(child_main(sys.argv[1]))"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, json.dumps(self._child_config())],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://{self.host}:{self.port}/health"
        while True:
            if self.proc.poll() is not None:
                status = self.proc.returncode
                tail = self.log_tail()
                self.stop()
                raise ServerError(
                    f"the model server over {self.gguf} exited with status {status} before answering "
                    f"{url}; its log ends with:\n{tail}"
                )
            try:
                if httpx.get(url, headers=self.headers, timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise ServerError(
                    f"the model server did not answer {url} within {self.startup_timeout:.0f} s; "
                    f"its log ends with:\n{tail}"
                )
            time.sleep(0.1)

    def log_tail(self, n: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child (the one this object started, by its PID) and remove its log: close its
        stdin (it exits by itself), then SIGTERM, then SIGKILL if it hangs."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=timeout)
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def wait(self) -> int:
        """Block until the server exits (foreground use); returns its exit status."""
        if self.proc is None:
            raise HarnessError("the model server is not running")
        return self.proc.wait()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def child_main(config_json: str) -> int:
    """The server process :class:`ModelServer` starts (``python -c``): llama.cpp on a private
    loopback port, then the front on ``host:port``; see the module docstring."""
    import secrets
    import signal

    import httpx

    from harness.llm.front import FrontConfig, serve

    cfg = json.loads(config_json)
    log = Path(cfg["log"])
    api_key = os.environ.pop(CHILD_KEY_ENV, None)

    def exit_with_parent() -> None:
        with contextlib.suppress(OSError):
            sys.stdin.buffer.read()  # returns at end-of-file: the parent closed the pipe or died
        log.unlink(missing_ok=True)
        os._exit(0)

    threading.Thread(target=exit_with_parent, name="exit-with-parent", daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal is the parent's to handle
    import xllamacpp

    private_port = free_port("127.0.0.1")
    front = FrontConfig(
        upstream=f"http://127.0.0.1:{private_port}",
        alias=cfg["alias"],
        n_ctx=cfg["n_ctx"],
        parallel=cfg["parallel"],
        upstream_key=secrets.token_urlsafe(32),
        api_key=api_key,
        admin_routes=cfg["admin_routes"],
        limits=FrontLimits.model_validate(cfg["limits"]),
    )
    params = server_params(
        Path(cfg["gguf"]),
        threads=cfg["threads"],
        n_ctx=cfg["n_ctx"],
        parallel=cfg["parallel"],
        host="127.0.0.1",
        port=private_port,
        alias=cfg["alias"],
        verbosity=3,  # one line per request: the log shows what was served
        http_threads=front.llama_http_threads,
        api_key=front.upstream_key,
    )
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as e:
        print(f"model server: {e}", file=sys.stderr, flush=True)
        os._exit(1)  # not a normal exit: the interpreter would wait on the thread reading stdin
    while True:  # the front starts once the model is loaded (llama.cpp: 503 while it loads)
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{front.upstream}/health", timeout=2.0).status_code == 200:
                break
        time.sleep(0.05)
    print(f"model server: llama.cpp on {server.listening_address} (private)", flush=True)

    def ready() -> None:
        print(f"model server: listening on http://{cfg['host']}:{cfg['port']} (front)", flush=True)

    serve(front, host=cfg["host"], port=cfg["port"], ready=ready)
    print("model server: the front stopped", file=sys.stderr, flush=True)
    os._exit(1)  # the front only returns when it failed (e.g. its port was taken)
