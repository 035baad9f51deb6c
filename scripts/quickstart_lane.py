"""The README's quick-start lines, run as written (``tox -e quickstart``; issue 61).

A newcomer's first hour, in a fresh empty folder (so ``results/harness.duckdb`` and ``runs/`` are
the README's own relative paths), with the ``harness`` of the environment this script runs in:

1. ``harness --help``;
2. the main job, as ``tox -e run`` runs it (the command is read from ``tox.ini``);
3. the README's export line (read from ``README.md``), which must work after the main job;
4. the README's ``harness train`` line, then the evaluation command its log suggests, as printed.

Each step prints its wall time; the first failure stops the lane with its output and exit status.
``--steps`` runs some of them (``--steps help,train``: the export needs the main job's results).
Not in ``.ci/run`` (most of an hour on a loaded 2-core machine; the lead decides CI time): docs/ci.md.
"""

from __future__ import annotations

import argparse
import configparser
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("help", "main", "export", "train")
SUGGESTED = re.compile(r"\(evaluate it with: (harness run .*)\)\s*$")


def readme_line(prefix: str) -> str:
    """The README's command line starting with ``prefix``, without its trailing ``# comment``."""
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith(prefix):
            return line.split("  #", 1)[0].strip()
    raise SystemExit(f"README.md: no line starts with {prefix!r}")


def main_job() -> str:
    """``tox -e run``'s command, from tox.ini, without tox's ``{...}`` substitutions."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    command = ini["testenv:run"]["commands"].strip().splitlines()[0]
    return re.sub(r"\{[^}]*\}", "", command).strip()


def run(command: str, cwd: Path) -> str:
    """Run one README line with this environment's ``harness``; its output, or exit on failure."""
    argv = shlex.split(command)
    if argv[0] != "harness":
        raise SystemExit(f"not a harness command: {command}")
    argv[0] = str(Path(sys.executable).parent / "harness")
    print(f"$ {command}", flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-4000:])
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"quickstart lane: `{command}` exited with {done.returncode} after {took:.0f} s")
    print(f"  ok in {took:.0f} s", flush=True)
    return done.stdout + done.stderr


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)} (default: all)"
    )
    p.add_argument(
        "--dir", type=Path, default=None, help="the folder to run in (default: a new temporary one)"
    )
    args = p.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        raise SystemExit(f"--steps: unknown {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    cwd = args.dir or Path(tempfile.mkdtemp(prefix="quickstart-"))
    cwd.mkdir(parents=True, exist_ok=True)
    print(f"quickstart lane in {cwd}", flush=True)
    if "help" in steps:
        run("harness --help", cwd)
    if "main" in steps:
        run(main_job(), cwd)
    if "export" in steps:
        run(readme_line("harness export --view leaderboard"), cwd)
    if "train" in steps:
        out = run(readme_line("harness train --method search_r1"), cwd)
        suggested = [m.group(1) for m in map(SUGGESTED.search, out.splitlines()) if m]
        if not suggested:
            raise SystemExit("quickstart lane: `harness train` printed no evaluation command")
        run(suggested[-1], cwd)
    print("quickstart lane: every step ran as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
