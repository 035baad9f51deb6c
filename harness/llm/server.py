"""A local OpenAI-compatible model server: llama-cpp-python's server over the packaged GGUF.

:class:`ModelServer` starts ``python -m llama_cpp.server`` as a child process on 127.0.0.1 (a free
port unless one is given), waits until ``/v1/models`` answers, and stops that process (by its PID)
on exit. ``harness serve-model`` runs one in the foreground; tests and the judge use the class.

The server serves requests one at a time (llama-cpp-python holds one model context). It is
started with ``--interrupt_requests False`` so a queued request never cuts a streaming one short.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.errors import ConfigError, HarnessError, ServerError
from harness.llm.model_files import PACKAGED, canonical_name, gguf_path

INSTALL_HINT = "pip install 'rar-harness[llamacpp]'"


def require_llama_cpp() -> None:
    """Fail clearly when llama-cpp-python (with its server extras) is not installed."""
    missing = [
        m for m in ("llama_cpp", "sse_starlette", "starlette_context") if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise HarnessError(
            f"the local model server needs llama-cpp-python with its server extras "
            f"(missing: {', '.join(missing)}): run `{INSTALL_HINT}` (it compiles llama.cpp, about 10 minutes)"
        )


def resolve_gguf(model: str) -> Path:
    """``default`` / a packaged model name, or a path to a ``.gguf`` file."""
    if canonical_name(model) in PACKAGED:
        return gguf_path(model)
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return p
    raise ConfigError(f"{model!r} is neither a packaged model (default) nor an existing .gguf file")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


class ModelServer:
    """``with ModelServer() as srv: srv.base_url`` -> ``http://127.0.0.1:<port>/v1``."""

    def __init__(
        self,
        model: str = "default",
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        threads: int = 1,
        n_ctx: int = 4096,
        alias: str = "smollm2",
        startup_timeout: float = 120.0,
        log_path: Path | None = None,
    ):
        self.gguf = resolve_gguf(model)
        self.host = host
        self.port = port
        self.threads = threads
        self.n_ctx = n_ctx
        self.alias = alias
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_threads",
            str(self.threads),
            "--n_ctx",
            str(self.n_ctx),
            "--model_alias",
            self.alias,
            "--interrupt_requests",
            "False",
        ]

    def start(self) -> ModelServer:
        import httpx

        if self.proc is not None:
            raise HarnessError(f"the model server at {self.base_url} is already running")
        if self.port is None:
            self.port = free_port(self.host)
        elif not port_is_free(self.host, self.port):
            raise ServerError(
                f"{self.host}:{self.port} is already in use (another server?): choose another --port"
            )
        require_llama_cpp()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="rar-model-server-", suffix=".log")
            self.log_path = Path(name)
            log = open(fd, "wb")  # noqa: SIM115 - handed to the child process
        else:
            log = open(self.log_path, "wb")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise ServerError(
                    f"the model server ({' '.join(self.command()[:3])}) exited with status {code} before "
                    f"answering {url}; its log {self.log_path} ends with:\n{self._log_tail()}"
                )
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(
                    f"the model server did not answer {url} within {self.startup_timeout:.0f} s; "
                    f"see its log {self.log_path}:\n{self._log_tail()}"
                )
            time.sleep(0.2)

    def _log_tail(self, n: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server process (the one this object started), then kill it if it hangs."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)

    def wait(self) -> int:
        """Block until the server exits (foreground use); returns its exit status."""
        if self.proc is None:
            raise HarnessError("the model server is not running")
        return self.proc.wait()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
