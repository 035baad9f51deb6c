"""``harness serve-model``: an OpenAI-compatible server over a model preset, on this machine."""

from __future__ import annotations

import argparse

from harness.cli import add_command
from harness.cli.options import add_connection_limit_args, add_model_arg, limits_error
from harness.llm.front import API_KEY_ENV, FrontLimits

EXAMPLES = """\
  harness serve-model                                  # SmolLM2-135M-Instruct on http://127.0.0.1:8765/v1
  harness serve-model --model qwen2.5-coder-1.5b-instruct --alias qwen --port 9000
  harness serve-model --threads 2 --parallel 8         # 2 threads (passive OpenMP wait), 8 slots
  harness serve-model --model path/to/model.gguf --alias mymodel
  HARNESS_API_KEY=s3cret harness serve-model --host 0.0.0.0   # every route needs 'Authorization: Bearer s3cret'
  harness serve-model --admin-routes                   # also llama.cpp's /slots, /props, /metrics
  harness serve-model --max-body-bytes 1048576 --read-timeout 5 --max-connections 64
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
            "(`harness list models`) or a .gguf file behind a Python front bound to --host:--port, "
            "and keep it running until Ctrl-C or SIGTERM. The front refuses a body over "
            "--max-body-bytes (413, before reading it), a client slower than --read-timeout (408), "
            "beyond --max-connections open connections the one waiting longest for a request (408), a model name other than --alias (404), "
            "empty messages and a max_tokens outside 1..--n-ctx (400), and, with an API key, any "
            "request without it (401); llama.cpp's admin routes are off unless --admin-routes. "
            "llama.cpp listens on a private 127.0.0.1 port behind it. The server runs in a child "
            "process that exits with this one, whatever ends it (SIGKILL included); its log lives "
            "under the harness cache and is removed on exit."
        ),
        examples=EXAMPLES,
        handler=run,
    )
    add_model_arg(p, default="default", help="a preset (default: SmolLM2) or a .gguf file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    p.add_argument("--parallel", type=int, default=4, help="requests decoded together (slots, default 4)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context length in tokens, per slot")
    p.add_argument("--alias", default="smollm2", help="the model name clients send (default smollm2)")
    p.add_argument("--startup-timeout", type=float, default=120.0)
    p.add_argument(
        "--api-key",
        default=None,
        help="a key every request must send as 'Authorization: Bearer KEY' (default: $HARNESS_API_KEY; "
        "none: no key asked). Prefer the variable: a command line is visible to other local users",
    )
    p.add_argument(
        "--admin-routes",
        action="store_true",
        help="also serve llama.cpp's /slots, /props and /metrics (off by default)",
    )
    limits = FrontLimits()
    add_connection_limit_args(
        p,
        max_body_bytes=limits.max_body_bytes,
        read_timeout_s=limits.read_timeout_s,
        max_connections=limits.max_connections,
        beyond_connections="beyond it the one waiting longest for a request is closed with 408, "
        "503 only when every connection is being answered",
    )


def run(args: argparse.Namespace) -> int:
    import os
    import signal
    import sys

    import pydantic

    from harness.llm.server import ModelServer

    try:
        limits = FrontLimits(
            max_body_bytes=args.max_body_bytes,
            read_timeout_s=args.read_timeout,
            max_connections=args.max_connections,
        )
    except pydantic.ValidationError as e:
        raise limits_error(e) from None
    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None

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
        api_key=api_key,
        admin_routes=args.admin_routes,
        limits=limits,
    )
    try:
        srv.start()  # returns once the port is bound and the model loaded
        print(
            f"serving {srv.gguf.name} as model {args.alias!r} at {srv.base_url} (server PID {srv.pid})",
            flush=True,
        )
        print(f"log: {srv.log_path} (removed on exit); stop with Ctrl-C", flush=True)
        print(
            f"API key: {'required' if api_key else 'none (anyone who reaches the port may use it)'}; "
            f"admin routes: {'on' if args.admin_routes else 'off'}; body limit {limits.max_body_bytes} "
            f"bytes, read timeout {limits.read_timeout_s:g} s, {limits.max_connections} connections",
            flush=True,
        )
        code = srv.wait()
        print(f"the server exited with status {code}; its log ends with:\n{srv.log_tail()}", flush=True)
        return 1
    except KeyboardInterrupt:
        print("stopping the model server", flush=True)
        return 0
    finally:
        srv.stop()
