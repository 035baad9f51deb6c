"""``harness serve-model``: an OpenAI-compatible server over the packaged model, on this machine."""

from __future__ import annotations

import argparse

from harness.cli import add_command

EXAMPLES = """\
  harness serve-model                                  # SmolLM2-135M-Instruct on http://127.0.0.1:8765/v1
  harness serve-model --threads 2 --port 9000
  harness serve-model --model path/to/model.gguf --alias mymodel
  # then, from another shell:
  harness run --backend openai --base-url http://127.0.0.1:8765/v1 --model smollm2 ...
  # on a GPU machine the same role is played by: vllm serve <model-dir> --port 8765
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "serve-model",
        help="serve the packaged model (or a GGUF) over an OpenAI-compatible API (llama.cpp)",
        description=(
            "Start llama-cpp-python's OpenAI-compatible server over the packaged SmolLM2-135M-Instruct "
            "GGUF (or --model FILE.gguf) and keep it running until Ctrl-C. Needs the llamacpp extra."
        ),
        examples=EXAMPLES,
        handler=run,
    )
    p.add_argument("--model", default="default", help="'default' (packaged SmolLM2) or a .gguf file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context length in tokens")
    p.add_argument("--alias", default="smollm2", help="the model name clients send (default smollm2)")
    p.add_argument("--startup-timeout", type=float, default=120.0)


def run(args: argparse.Namespace) -> int:
    import signal
    import sys

    from harness.llm.server import ModelServer

    # a SIGTERM to this process must also stop the server it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    srv = ModelServer(
        args.model,
        host=args.host,
        port=args.port,
        threads=args.threads,
        n_ctx=args.n_ctx,
        alias=args.alias,
        startup_timeout=args.startup_timeout,
    )
    srv.start()
    try:
        print(f"serving {srv.gguf.name} as model {args.alias!r} at {srv.base_url}", flush=True)
        print(f"log: {srv.log_path}; stop with Ctrl-C", flush=True)
        code = srv.wait()
        print(f"the server exited with status {code}; see {srv.log_path}", flush=True)
        return 1
    except KeyboardInterrupt:
        print("stopping the model server", flush=True)
        return 0
    finally:
        srv.stop()
