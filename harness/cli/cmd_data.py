"""``harness data show DATASET``: counts, split, gold coverage and a few examples."""

from __future__ import annotations

import argparse
from collections import Counter

from harness.cli import HelpFormatter, add_command
from harness.cli.options import add_data_dir_arg

EXAMPLES = """\
  harness data show hotpotqa                    # packaged HotpotQA dev: counts, gold coverage, 3 examples
  harness data show 2wiki --n 5 --with-gold     # aliases work; 5 examples that have gold passages
  harness data show musique --data-dir data/    # your own full copy (FlashRAG jsonl, original json, HF folder)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "data",
        help="inspect the QA datasets (packaged or your own files)",
        examples=EXAMPLES,
        handler=lambda args: _usage(p),
    )
    actions = p.add_subparsers(dest="data_command", metavar="ACTION")
    show = actions.add_parser(
        "show",
        help="counts, split, gold coverage and a few examples of one dataset",
        description="Counts, split, gold coverage and a few examples of one dataset.",
        epilog="examples:\n" + EXAMPLES,
        formatter_class=HelpFormatter,
    )
    show.add_argument(
        "dataset", help="nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa (2wiki), musique, bamboogle"
    )
    show.add_argument("--n", type=int, default=3, help="how many examples to print (default 3)")
    add_data_dir_arg(show, help="read your own copy instead of the packaged rows")
    show.add_argument("--with-gold", action="store_true", help="print only examples that have gold passages")
    show.add_argument(
        "--split", default=None, help="split to read with --data-dir (default: the canonical one)"
    )
    show.set_defaults(func=_show)


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _counts(c: Counter) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0]))))


def _show(args: argparse.Namespace) -> int:
    from harness.data import packaged
    from harness.data.datasets import get_dataset_info, load_dataset, resolve_dataset_file

    info = get_dataset_info(args.dataset)
    split = args.split or info.split
    examples = load_dataset(info.name, args.data_dir, split)
    source = (
        str(resolve_dataset_file(info.name, args.data_dir, split))
        if args.data_dir
        else f"packaged ({info.packaged_note})"
    )
    n = len(examples)
    with_gold = [ex for ex in examples if ex.supporting]
    in_corpus = [ex for ex in with_gold if all(e.passage_id for e in ex.supporting or ())]
    print(f"{info.name}: {info.title}, {split} split")
    print(f"  source:      {source}")
    if split == info.split:
        share = f"canonical size {info.canonical_size:,}; {100 * n / info.canonical_size:.1f}%"
    else:
        share = f"not the canonical {info.split!r} split"
    print(f"  questions:   {n:,} ({share})")
    print(
        f"  gold:        {len(with_gold):,} with gold passages, {len(in_corpus):,} of them in the closed corpus"
    )
    print(
        f"  answers:     {sum(len(ex.answers) for ex in examples) / max(n, 1):.2f} per question (aliases included)"
    )
    hops = Counter(ex.hops for ex in examples if ex.hops is not None)
    if hops:
        print(f"  hops:        {_counts(hops)} ({n - hops.total():,} unknown)")
    types = Counter(ex.qtype for ex in examples if ex.qtype)
    if types:
        print(f"  types:       {_counts(types)} ({n - types.total():,} unknown)")
    if args.data_dir is None:
        subs = [s for s in packaged.subsets() if s.dataset == info.name]
        if subs:
            print(f"  subsets:     {', '.join(f'{s.name} {len(s.ids):,}' for s in subs)}")
    for ex in (with_gold if args.with_gold else examples)[: max(args.n, 0)]:
        print()
        print(f"[{ex.id}] {ex.question}")
        shown = ex.answers[:6]
        more = f" (+{len(ex.answers) - len(shown)} more)" if len(ex.answers) > len(shown) else ""
        print(f"  answers: {' | '.join(shown)}{more}")
        for e in ex.supporting or ():
            where = f" -> {e.passage_id}" if e.passage_id else ""
            hop = f" (hop {e.hop})" if e.hop is not None else ""
            print(f"  gold:    {e.title}{hop}{where}")
    return 0
