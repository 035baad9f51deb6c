"""QA data: the seven packaged sets, readers for users' own files, benches and selections.

from harness.data import load_dataset, load_bench, Selection
load_dataset("hotpotqa")                          # packaged rows (QAExample)
load_dataset("hotpotqa", data_dir=Path("data"))   # the user's full copy (FlashRAG jsonl, original json, ...)
load_bench("mini-multihop", Selection(mode="random", n=100, seed=0))
example_context(ex)                               # a question's own ordered paragraphs, or None
"""

from harness.data.benches import (
    BENCHES,
    Bench,
    BenchEntry,
    Selection,
    entry_examples,
    get_bench,
    list_benches,
    load_bench,
)
from harness.data.context import ContextParagraph, example_context, has_context
from harness.data.datasets import (
    DATASETS,
    DatasetInfo,
    candidate_files,
    dataset_names,
    get_dataset_info,
    list_datasets,
    load_dataset,
    resolve_dataset_file,
)
from harness.data.loaders import FORMATS, iter_records, load_file
from harness.data.packaged import (
    closed_corpus_path,
    context_map,
    get_subset,
    gold_map,
    iter_closed_corpus,
    manifest,
    subsets,
)

__all__ = [
    "BENCHES",
    "DATASETS",
    "FORMATS",
    "Bench",
    "BenchEntry",
    "ContextParagraph",
    "DatasetInfo",
    "Selection",
    "candidate_files",
    "closed_corpus_path",
    "context_map",
    "dataset_names",
    "entry_examples",
    "example_context",
    "get_bench",
    "get_dataset_info",
    "get_subset",
    "gold_map",
    "has_context",
    "iter_closed_corpus",
    "iter_records",
    "list_benches",
    "list_datasets",
    "load_bench",
    "load_dataset",
    "load_file",
    "manifest",
    "resolve_dataset_file",
    "subsets",
]
