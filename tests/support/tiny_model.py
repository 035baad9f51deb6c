"""The tiny random test model, built in one place: a Llama of a few million parameters saved with
``save_pretrained`` (2 layers, 4 heads, 2 key-value heads, tied embeddings), seeded so that every
build of the same shape has the same weights.

Its users: ``tiny_dir`` in tests/conftest.py (SmolLM2's vocabulary and tokenizer, hidden 64,
``initializer_range`` 0.3), the repetition-penalty backend of tests/llm/test_sampling_params.py
(the same shape at transformers' default 0.02) and the word-level toy of tests/rl/test_trainer.py
(a 64-word vocabulary, hidden 32)."""

from __future__ import annotations

import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def save_tiny_llama(
    out: Path,
    *,
    vocab_size: int = 49152,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    max_position_embeddings: int = 4096,
    pad_token_id: int = 2,
    initializer_range: float | None = None,
    generation_config: bool = True,
    tokenizer_from: Path | None = None,
) -> Path:
    """Save a random Llama (``torch.manual_seed(0)`` before its weights are drawn) into ``out``.

    ``initializer_range``: None keeps transformers' default (0.02, under which the tied embeddings
    dominate and greedy decoding repeats its last token); ``generation_config``: save bos 1, eos 2
    and ``pad_token_id`` as the model's generation config; ``tokenizer_from``: a folder whose
    :data:`TOKENIZER_FILES` are copied beside the weights. Returns ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig

    extra = {} if initializer_range is None else {"initializer_range": initializer_range}
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=pad_token_id,
        **extra,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    if generation_config:
        model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=pad_token_id)
    model.save_pretrained(out)
    if tokenizer_from is not None:
        for name in TOKENIZER_FILES:
            shutil.copy(tokenizer_from / name, out / name)
    return out
