"""A llama.cpp server in a child process, for a :class:`~harness.llm.llamacpp_backend.LlamaCppBackend`
with ``child=True`` (the trainer's rollout engine, which restarts it each step with a new LoRA
adapter).

    python -m harness.llm.llamacpp_child '<json config>'

The config holds :func:`harness.llm.server.server_params`'s arguments (``gguf``, ``threads``,
``n_ctx``, ``parallel``, ``draft``, ``lora``). The child prints the server's address on one stdout
line once the model is loaded, then blocks reading stdin; when the parent closes that pipe, or dies
in any way, it reads end-of-file and exits at once (``os._exit``: no destructor runs, the kernel
frees everything). The parent stops it by its PID too.

Why a child: in the trainer's process, dropping an in-process ``xllamacpp.Server`` after torch had
run work on its OpenMP threads hung in its destructor (reproduced: start a server, run torch matrix
products, restart it, drop it: the drop never returned), and the trainer restarts the engine every
step between learner updates.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    from harness.llm.server import server_params

    cfg = json.loads(argv[0])
    if cfg["threads"] > 1:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import xllamacpp

    params = server_params(
        Path(cfg["gguf"]),
        threads=cfg["threads"],
        n_ctx=cfg["n_ctx"],
        parallel=cfg["parallel"],
        draft=cfg["draft"],
        lora=[Path(x) for x in cfg["lora"]],
    )
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as e:
        print(json.dumps({"error": str(e)}), flush=True)
        os._exit(1)
    print(json.dumps({"url": server.listening_address}), flush=True)
    sys.stdin.buffer.read()  # until the parent closes the pipe or dies
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
