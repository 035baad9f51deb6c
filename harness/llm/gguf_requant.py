"""A packaged GGUF model re-quantised to another llama.cpp type, for the trainer's rollout engine.

Why: the packaged SmolLM2 is Q4_1, and on this CPU llama.cpp runs Q4_1 well below Q8_0 (prefill
and decode, 1 thread, 500-token prompts and 50 new tokens with two LoRA adapters: about 115
against 190 prompt tokens/s; see ``docs/training.md``). The learner trains the Q4_1 weights
dequantised to float32 (:mod:`harness.llm.model_files`), so re-quantising exactly those
dequantised values to Q8_0 serves the learner's own weights with a finer grid than Q4_1's 16 levels
a block. llama.cpp's ``llama-quantize`` is not in the ``xllamacpp`` wheel, so this uses the
``gguf`` package's numpy codecs (``gguf.quants.dequantize`` / ``quantize``, the reference
implementations of ggml's formats).

Every metadata key (tokenizer, chat template, hyper-parameters) is copied unchanged; tensors
already in float32, or already in the target type, are copied byte for byte.

``add``: a difference added to some weights before they are quantised
(:func:`harness.llm.gguf_lora.checkpoint_delta`: a merged fine-tuned checkpoint's change to the
base). The trainer's engine then serves the checkpoint itself instead of the base plus the change
as a second LoRA adapter, which llama.cpp applies at every token: with SmolLM2 Q8_0 on 2 threads a
450-token prompt and 50 new tokens took 2.4 s with that adapter and the policy's, 1.7 s with the
policy's alone (docs/training.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import ConfigError

TARGETS = ("q8_0", "f16")


def _field_value(field: Any) -> tuple[Any, Any, Any]:
    """(value, value type, array sub-type) of a ``gguf.GGUFReader`` field, as ``GGUFWriter.add_key_value`` takes it."""
    import gguf

    vt = field.types[0]
    if vt == gguf.GGUFValueType.ARRAY:
        sub = field.types[-1]
        if sub == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data], vt, sub
        return [field.parts[i].tolist()[0] for i in field.data], vt, sub
    if vt == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", "surrogateescape"), vt, None
    return field.parts[field.data[0]].tolist()[0], vt, None


def requantize_gguf(src: Path, dst: Path, target: str = "q8_0", *, add: dict[str, Any] | None = None) -> Path:
    """Write ``src`` (a GGUF model) to ``dst`` with every quantised weight re-quantised to
    ``target`` (``q8_0`` or ``f16``) from its dequantised values; returns ``dst`` (written beside
    and renamed, so a reader never sees half a file). ``add``: {tensor name: float32 array of the
    tensor's shape (out, in)} added to those weights' dequantised values first, each then quantised
    to ``target`` whatever its type in ``src``."""
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    if target not in TARGETS:
        raise ConfigError(f"requantize_gguf: target {target!r} is not one of {', '.join(TARGETS)}")
    want = {"q8_0": Q.Q8_0, "f16": Q.F16}[target]
    src, dst = Path(src), Path(dst)
    reader = gguf.GGUFReader(str(src))
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None:
        raise ConfigError(f"{src}: no general.architecture key; not a GGUF model")
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
    tmp = dst.with_name(dst.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), arch)
    for name, field in reader.fields.items():
        # GGUF.* are the reader's own header entries; the writer adds the architecture itself
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value, vt, sub = _field_value(field)
        w.add_key_value(name, value, vt, sub_type=sub)
    add = dict(add or {})
    missing = sorted(set(add) - {t.name for t in reader.tensors})
    if missing:
        raise ConfigError(f"{src}: no tensor {missing[0]!r} to add a difference to ({len(missing)} missing)")
    for t in reader.tensors:
        if t.name not in add and t.tensor_type in (Q.F32, want):
            w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            continue
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))  # ggml lists dimensions inner first
        x = dequantize(t.data, t.tensor_type).reshape(shape)
        if t.name in add:
            if add[t.name].shape != x.shape:
                raise ConfigError(
                    f"{src}: tensor {t.name!r} is {x.shape}, the difference to add is {add[t.name].shape}"
                )
            x = x.astype(np.float32) + add[t.name].astype(np.float32)
        if want == Q.F16:
            w.add_tensor(t.name, x.astype(np.float16))
        else:
            q = quantize(x, want)
            w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=want)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(dst)
    return dst
