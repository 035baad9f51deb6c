"""The packaged model as verl loads it (``export-verl --model smollm2-135m-instruct`` writes it as
a Hugging Face folder): its tokenizer's special tokens are the GGUF's, under whatever transformers
the environment has. ``tox -e verl`` runs it under the py env's transformers (5.24), the install lane
(``tox -e verl-install``: a clean venv with ``pip install -e '.[verl]'``) under the one verl 0.9.1
resolves to (5.10.4), where the conversion once made EOS ``<|im_start|>``, the token that *opens*
a turn, so a rollout would never stop on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.verl import import_verl_or_skip

import_verl_or_skip()

pytestmark = [pytest.mark.verl, pytest.mark.verl_install]


def test_the_converted_packaged_model_has_the_ggufs_special_tokens(tmp_path: Path, monkeypatch):
    import transformers
    from gguf import GGUFReader
    from transformers import AutoTokenizer, GenerationConfig

    from harness.llm.model_files import GGUF_SPECIAL_TOKENS, ensure_hf_model, gguf_path

    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path))  # a fresh conversion, under this transformers
    folder = ensure_hf_model("smollm2-135m-instruct")
    assert folder.is_relative_to(tmp_path)
    tok = AutoTokenizer.from_pretrained(folder)
    fields = GGUFReader(str(gguf_path("smollm2-135m-instruct"))).fields
    ids = {a: int(fields[k].parts[fields[k].data[0]][0]) for a, k in GGUF_SPECIAL_TOKENS.items()}
    assert ids == {"bos_token": 1, "eos_token": 2, "pad_token": 2, "unk_token": 0}
    got = {a: getattr(tok, a) for a in ids}
    want = {
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
    }
    assert got == want, f"transformers {transformers.__version__}: {got}"
    assert (tok.eos_token_id, tok.pad_token_id) == (2, 2)
    assert GenerationConfig.from_pretrained(folder).eos_token_id == 2
