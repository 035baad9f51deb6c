"""The seven QA sets: canonical split and size, what is packaged, and loading them.

``load_dataset(name)`` returns the packaged rows; ``load_dataset(name, data_dir)`` reads the
user's own copy of the full set (see :func:`candidate_files` for where it is looked for and
:mod:`harness.data.loaders` for the formats).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from harness.data import loaders, packaged
from harness.errors import ConfigError
from harness.types import QAExample


@dataclass(frozen=True)
class DatasetInfo:
    """One QA set as the field uses it: FlashRAG's splits, test if present else dev
    (RUC-NLPIR/FlashRAG@1ee5249 ``flashrag/utils/utils.py``; PeterGriffinJin/Search-R1@a14dc3a
    ``scripts/data_process/qa_search_test_merge.py``)."""

    name: str  # canonical name (FlashRAG folder name and Search-R1 ``data_source``)
    title: str
    split: str  # the canonical evaluation split
    canonical_size: int  # its full size in the field
    kind: Literal["single-hop", "multi-hop"]
    packaged_note: str  # what the packaged file holds
    original_files: tuple[str, ...] = ()  # file names of the original release, looked for under --data-dir
    aliases: tuple[str, ...] = ()

    @property
    def packaged_count(self) -> int:
        return packaged.manifest().dataset_file(self.name).rows

    @property
    def closed_count(self) -> int:
        """Packaged questions whose gold passages are all in the closed corpus (0 when none)."""
        return next(
            (len(s.ids) for s in packaged.subsets() if s.dataset == self.name and s.name == "closed"), 0
        )


DATASETS: tuple[DatasetInfo, ...] = (
    DatasetInfo(
        "nq",
        "Natural Questions (NQ-open)",
        "test",
        3610,
        "single-hop",
        "full test split; no gold passages",
        ("nq-test.qa.csv", "NQ-open.dev.jsonl"),
    ),
    DatasetInfo(
        "triviaqa",
        "TriviaQA (open, DPR split)",
        "test",
        11313,
        "single-hop",
        "full test split with answer aliases; no gold passages",
        ("trivia-test.qa.csv",),
    ),
    DatasetInfo(
        "popqa",
        "PopQA",
        "test",
        14267,
        "single-hop",
        "1,000 HippoRAG rows with gold paragraphs + the 1,399-row long tail (2,140 distinct ids)",
        ("popQA.tsv", "popqa.csv"),
    ),
    DatasetInfo(
        "hotpotqa",
        "HotpotQA (distractor)",
        "dev",
        7405,
        "multi-hop",
        "full dev split; 1,405 with their 10 context paragraphs and supporting facts",
        ("hotpot_dev_distractor_v1.json", "hotpot_dev_fullwiki_v1.json"),
    ),
    DatasetInfo(
        "2wikimultihopqa",
        "2WikiMultihopQA",
        "dev",
        12576,
        "multi-hop",
        "full dev split; 166 with context, supporting facts, type and evidences",
        (),
        ("2wiki",),
    ),
    DatasetInfo(
        "musique",
        "MuSiQue-Ans",
        "dev",
        2417,
        "multi-hop",
        "full dev split; 292 with 20 paragraphs, decomposition and answer aliases",
        ("musique_ans_v1.0_dev.jsonl",),
    ),
    DatasetInfo(
        "bamboogle",
        "Bamboogle",
        "test",
        125,
        "multi-hop",
        "full test split; Bamboogle has no gold passages",
        ("Bamboogle Prerelease - Sheet1.csv", "bamboogle.csv", "bamboogle.json"),
    ),
)


def dataset_names() -> list[str]:
    return [d.name for d in DATASETS]


def get_dataset_info(name: str) -> DatasetInfo:
    """The dataset of a canonical name or alias (``2wiki``); unknown names list the known ones."""
    key = name.strip().lower()
    for d in DATASETS:
        if key == d.name or key in d.aliases:
            return d
    from harness.choices import did_you_mean

    known = ", ".join(f"{d.name}" + (f" ({', '.join(d.aliases)})" if d.aliases else "") for d in DATASETS)
    hint = did_you_mean(name, [n for d in DATASETS for n in (d.name, *d.aliases)])
    raise ConfigError(f"unknown dataset {name!r}{hint}; known: {known}")


def list_datasets() -> list[DatasetInfo]:
    return list(DATASETS)


def _is_hf_dir(p: Path) -> bool:
    return p.is_dir() and ((p / "state.json").is_file() or (p / "dataset_dict.json").is_file())


def candidate_files(name: str, data_dir: Path, split: str | None = None) -> list[Path]:
    """Where ``load_dataset(name, data_dir)`` looks, in this order (the first that exists wins):

    1. FlashRAG layout: ``{data_dir}/{name}/{split}.jsonl`` (also ``.json``, ``.parquet``,
       ``.tsv``, ``.csv``); any row format of :mod:`harness.data.loaders` is accepted there;
    2. a Hugging Face ``save_to_disk`` folder ``{data_dir}/{name}/{split}/`` or ``{data_dir}/{name}/``;
    3. the original release's file names (canonical split only), in ``{data_dir}/{name}/`` then
       ``{data_dir}/``: e.g. ``hotpot_dev_distractor_v1.json``, ``musique_ans_v1.0_dev.jsonl``,
       ``popQA.tsv``, ``nq-test.qa.csv``, ``trivia-test.qa.csv``.
    """
    info = get_dataset_info(name)
    split = split or info.split
    data_dir = Path(data_dir)
    out: list[Path] = []
    for folder in (data_dir / n for n in (info.name, *info.aliases)):
        out += [folder / f"{split}{ext}" for ext in (".jsonl", ".json", ".parquet", ".tsv", ".csv")]
        out += [folder / split, folder]
    if split == info.split:
        for base in (data_dir / info.name, data_dir):
            out += [base / f for f in info.original_files]
    return out


FLASHRAG_HUB_REPO = "RUC-NLPIR/FlashRAG_datasets"


def hub_snapshot(data_dir: Path) -> Path:
    """``data_dir`` itself, or, when it is a Hugging Face hub cache of a dataset repo, the snapshot
    its ``main`` ref names (offline: ``huggingface_hub.snapshot_download(...,
    local_files_only=True)``). A hub cache is what ``huggingface-cli download RUC-NLPIR/FlashRAG_datasets
    --repo-type dataset`` leaves: pass the hub root (``~/.cache/huggingface/hub``, which must hold
    ``datasets--RUC-NLPIR--FlashRAG_datasets``) or that repo folder. The snapshot has FlashRAG's
    layout (``{dataset}/{split}.jsonl``)."""
    d = Path(data_dir)
    repo_dir = (
        d if d.name.startswith("datasets--") else d / ("datasets--" + FLASHRAG_HUB_REPO.replace("/", "--"))
    )
    if not repo_dir.is_dir() or not (repo_dir / "snapshots").is_dir():
        return d
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo_id = repo_dir.name.removeprefix("datasets--").replace("--", "/")
    try:
        return Path(
            snapshot_download(repo_id, repo_type="dataset", cache_dir=repo_dir.parent, local_files_only=True)
        )
    except LocalEntryNotFoundError as e:
        raise ConfigError(
            f"--data-dir {d}: a Hugging Face cache of {repo_id} without a snapshot for its main ref "
            f"({repo_dir / 'refs' / 'main'}); download it again or pass the snapshot folder itself"
        ) from e


def resolve_dataset_file(name: str, data_dir: Path, split: str | None = None) -> Path:
    """The file or HF folder ``load_dataset(name, data_dir)`` reads; ConfigError lists the paths tried.
    ``data_dir`` may be a Hugging Face hub cache (:func:`hub_snapshot`)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise ConfigError(f"--data-dir {data_dir} is not a folder")
    data_dir = hub_snapshot(data_dir)
    cands = candidate_files(name, data_dir, split)
    for c in cands:
        if c.is_file() or _is_hf_dir(c):
            return c
    tried = "\n  ".join(str(c) for c in cands if not c.is_dir())
    raise ConfigError(f"no {get_dataset_info(name).name} data under {data_dir}; looked for:\n  {tried}")


@cache
def _load_user_file(path: str, mtime_ns: int, size: int, dataset: str, split: str) -> tuple[QAExample, ...]:
    return tuple(loaders.load_file(Path(path), dataset, split))


def load_dataset(name: str, data_dir: Path | None = None, split: str | None = None) -> list[QAExample]:
    """The examples of one dataset, in source order.

    Without ``data_dir``: the packaged rows (only the canonical split exists). With it: the
    user's file found by :func:`resolve_dataset_file`. Parsed files are cached per process.
    """
    info = get_dataset_info(name)
    split = split or info.split
    if data_dir is None:
        if split != info.split:
            raise ConfigError(
                f"{info.name}: only the {info.split!r} split is packaged; pass --data-dir for {split!r}"
            )
        return packaged.packaged_examples(info.name)
    path = resolve_dataset_file(info.name, Path(data_dir), split)
    st = path.stat()
    # absolute, not resolved: a hub snapshot file is a symlink to a blob without a suffix
    return list(_load_user_file(str(path.absolute()), st.st_mtime_ns, st.st_size, info.name, split))
