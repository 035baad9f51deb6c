"""``harness serve-model``: an OpenAI-compatible server over a model preset, on this machine."""

from __future__ import annotations

import argparse

from harness.cli import add_command

EXAMPLES = """\
  harness serve-model                                  # SmolLM2-135M-Instruct on http://127.0.0.1:8765/v1
  harness serve-model --model qwen2.5-coder-1.5b-instruct --alias qwen --port 9000
  harness serve-model --threads 2 --parallel 8         # 2 threads (passive OpenMP wait), 8 slots
  harness serve-model --model path/to/model.gguf --alias mymodel
  # then, from another shell:
  harness run --backend openai --base-url http://127.0.0.1:8765/v1 --model smollm2 ...
  # on a GPU machine the same role is played by: vllm serve <model-dir> --port 8765
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "serve-model",
        help="serve a model preset (or a GGUF) over an OpenAI-compatible API (llama.cpp)",
        description=(
            "Start llama.cpp's OpenAI-compatible server (the xllamacpp wheel) over a model preset "
            "(`harness list models`) or a .gguf file, bound to --host:--port, and keep it running "
            "until Ctrl-C or SIGTERM. The server runs in a child process that exits with this one, "
            "whatever ends it (SIGKILL included); its log lives under the harness cache and is "
            "removed on exit."
        ),
        examples=EXAMPLES,
        handler=run,
    )
    p.add_argument("--model", default="default", help="a preset (default: SmolLM2) or a .gguf file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    p.add_argument("--parallel", type=int, default=4, help="requests decoded together (slots, default 4)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context length in tokens, per slot")
    p.add_argument("--alias", default="smollm2", help="the model name clients send (default smollm2)")
    p.add_argument("--startup-timeout", type=float, default=120.0)


def run(args: argparse.Namespace) -> int:
    import signal
    import sys

    from harness.llm.server import ModelServer

    # a SIGTERM to this process must also stop the server it started (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    srv = ModelServer(
        args.model,
        host=args.host,
        port=args.port,
        threads=args.threads,
        n_ctx=args.n_ctx,
        parallel=args.parallel,
        alias=args.alias,
        startup_timeout=args.startup_timeout,
    )
    try:
        srv.start()  # returns once the port is bound and the model loaded
        print(
            f"serving {srv.gguf.name} as model {args.alias!r} at {srv.base_url} (server PID {srv.pid})",
            flush=True,
        )
        print(f"log: {srv.log_path} (removed on exit); stop with Ctrl-C", flush=True)
        code = srv.wait()
        print(f"the server exited with status {code}; its log ends with:\n{srv.log_tail()}", flush=True)
        return 1
    except KeyboardInterrupt:
        print("stopping the model server", flush=True)
        return 0
    finally:
        srv.stop()
