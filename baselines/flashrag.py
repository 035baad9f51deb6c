"""FlashRAG's benchmark setting for the baselines it runs (direct, naive RAG, IRCoT), as variants
``direct_flashrag``, ``naive_rag_flashrag`` and ``ircot_flashrag`` scored under the protocol
``flashrag`` (:func:`baselines.protocol.flashrag`). All citations are RUC-NLPIR/FlashRAG@1ee5249.

What the variants do differently from ``direct`` / ``naive_rag`` / ``ircot``:

* **Middle truncation of every prompt** to ``generator_max_input_len`` = 2048 tokens
  (``examples/methods/my_config.yaml``:76; ``flashrag/prompt/base_prompt.py``:94-106,
  ``PromptTemplate.truncate_prompt``, called by ``get_string`` for every prompt, line 165): a prompt of 2048
  tokens or more becomes its first ``2048 / 2 - 20`` = 1004 tokens followed by its last 1004.
* **The prediction is the raw output** for direct and naive RAG: ``SequentialPipeline.naive_run`` /
  ``run`` pass ``pred_process_fun=None`` (``flashrag/pipeline/pipeline.py``:71-79, 82-128), so the
  whole reply of at most 32 tokens is scored; ``basic_pred_parse`` (first line,
  ``flashrag/utils/pred_parse.py``:34-38) is not used by the benchmark runs
  (``examples/methods/run_exp.py``:8-42). Ours, ``direct`` / ``naive_rag``, take the first line.
* **IRCoT's answer** is ``ircot_pred_parse`` (``flashrag/utils/pred_parse.py``:21-31): the text
  after the first "So the answer is:", and the **whole chain** when no thought has it.

Differences that remain (the harness cannot, or does not, do these):

* FlashRAG decodes the two truncated halves with ``skip_special_tokens=True``
  (``base_prompt.py``:104-105), which drops a chat template's special tokens from a truncated
  prompt; :func:`middle_truncate` keeps them (the backend's ``detokenize``). For IRCoT, a plain-text
  prompt, only the BOS token is special, and the backend adds it back either way.
* FlashRAG's vLLM generator adds ``<|eot_id|>`` to every stop list (``flashrag/generator/
  generator.py``:237-242, Llama-3's end of turn); the harness stops at the model's own EOS.
"""

from __future__ import annotations

from baselines.direct import MAX_NEW_TOKENS as DIRECT_MAX_NEW_TOKENS
from baselines.direct import Direct, direct_prompt
from baselines.ircot import ANSWER_MARKER, EXAMPLE, INSTRUCTION, USER, IRCoT, _Chain, render_references
from baselines.naive_rag import MAX_NEW_TOKENS as RAG_MAX_NEW_TOKENS
from baselines.naive_rag import NaiveRAG, add_retrieve_turns, rag_prompt, retrieve
from harness.api import (
    Backend,
    Completion,
    Extraction,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    answer_once,
)

PROTOCOL = "flashrag"  # the protocol these variants are scored under (baselines/protocol.py)

GENERATOR_MAX_INPUT_LEN = 2048  # examples/methods/my_config.yaml:76 (the benchmark's config)
TRUNCATE_MARGIN = 20  # base_prompt.py:103: half = int(max_input_len / 2) - 20


def middle_truncate(
    backend: Backend, prompt: str, max_input_len: int = GENERATOR_MAX_INPUT_LEN
) -> tuple[str, bool]:
    """FlashRAG ``PromptTemplate.truncate_prompt`` (local models): when the prompt's ids (as the
    backend feeds them, BOS included) number ``max_input_len`` or more, keep the first and the
    last ``max_input_len // 2 - 20`` ids, each half decoded on its own. Returns (prompt, cut).
    Written here because no library applies FlashRAG's rule (transformers truncates one side)."""
    ids = backend.prompt_ids(prompt)
    if len(ids) < max_input_len:
        return prompt, False
    half = max_input_len // 2 - TRUNCATE_MARGIN
    return backend.detokenize(ids[:half]) + backend.detokenize(ids[-half:]), True


def extract_raw(model_text: str) -> Extraction:
    """The whole reply, stripped, as FlashRAG scores it without a ``pred_process_fun``."""
    text = model_text.strip()
    return Extraction(text, "ok" if text else "no_answer")


class DirectFlashRAG(Direct):
    """``direct`` as FlashRAG's benchmark runs it (``run_exp.py`` ``zero_shot``): the prompt
    middle-truncated to 2048 tokens, the raw reply of at most 32 tokens as the prediction."""

    name = "direct_flashrag"
    description = "direct, FlashRAG benchmark setting: prompt middle-truncated to 2048 tokens, raw reply"
    source = "FlashRAG@1ee5249 examples/methods/run_exp.py zero_shot (SequentialPipeline.naive_run)"
    own_protocols = (PROTOCOL,)

    def spec(self, protocol: Protocol) -> MethodSpec:
        return flashrag_spec(super().spec(protocol), self.name)

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [middle_truncate(ctx.backend, direct_prompt(e, ctx)) for e in examples]
        trajs = answer_once(
            [p for p, _ in prompts],
            examples,
            ctx,
            max_new_tokens=DIRECT_MAX_NEW_TOKENS,
            extractor=extract_raw,
        )
        mark_truncated(trajs, [cut for _, cut in prompts])
        return trajs


class NaiveRAGFlashRAG(NaiveRAG):
    """``naive_rag`` as FlashRAG's benchmark runs it (``run_exp.py`` ``naive``): the prompt
    middle-truncated to 2048 tokens, the raw reply of at most 32 tokens as the prediction."""

    name = "naive_rag_flashrag"
    description = "naive RAG, FlashRAG benchmark setting: prompt middle-truncated to 2048 tokens, raw reply"
    source = "FlashRAG@1ee5249 examples/methods/run_exp.py naive (SequentialPipeline.run)"
    own_protocols = (PROTOCOL,)

    def spec(self, protocol: Protocol) -> MethodSpec:
        return flashrag_spec(super().spec(protocol), self.name)

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        hits, latency = retrieve(examples, ctx, self.name)
        prompts = [
            middle_truncate(ctx.backend, rag_prompt(e, h, ctx)) for e, h in zip(examples, hits, strict=True)
        ]
        trajs = answer_once(
            [p for p, _ in prompts], examples, ctx, max_new_tokens=RAG_MAX_NEW_TOKENS, extractor=extract_raw
        )
        add_retrieve_turns(trajs, examples, hits, latency)
        mark_truncated(trajs, [cut for _, cut in prompts])
        return trajs


class IRCoTFlashRAG(IRCoT):
    """``ircot`` as FlashRAG's ``IRCOTPipeline`` runs it: each prompt is FlashRAG's string (the
    thoughts as generated, stop string kept, joined by a space and appended right after
    "Thought:", ``base_prompt.py``:155-163) middle-truncated to 2048 tokens; a thought is searched
    as generated; the prediction is ``ircot_pred_parse``'s (the whole chain without the marker)."""

    name = "ircot_flashrag"
    description = (
        "IRCoT, FlashRAG setting: prompt middle-truncated to 2048 tokens, whole chain when no answer"
    )
    source = "FlashRAG@1ee5249 flashrag/pipeline/active_pipeline.py IRCOTPipeline, utils/pred_parse.py"
    own_protocols = (PROTOCOL,)

    def spec(self, protocol: Protocol) -> MethodSpec:
        base = flashrag_spec(super().spec(protocol), self.name)
        params = {**base.params, "thoughts": "as generated (stop kept), searched as generated"}
        return base.model_copy(
            update={
                "extractor": "text after the first 'So the answer is:', else the whole chain",
                "params": params,
            }
        )

    def prompt(self, c: _Chain, ctx: RunContext) -> str:
        base = (
            f"{INSTRUCTION}\n\n{EXAMPLE}"
            + "\n\n"
            + USER.format(reference=render_references(c.pool.shown), question=c.example.question)
        )  # type: ignore[union-attr]
        previous = " ".join(c.thoughts)
        if previous not in ("", " "):  # base_prompt.py:155
            base += previous
        prompt, cut = middle_truncate(ctx.backend, base)
        c.truncated_prompts += cut
        return prompt

    def read_thought(self, comp: Completion) -> tuple[str, str]:
        # FlashRAG keeps the thought as vLLM returns it (include_stop_str_in_output=True,
        # generator.py:240) and searches it as is (active_pipeline.py:1011-1012)
        return (comp.text, comp.text) if comp.text.strip() else ("", "")

    def _finish(self, c: _Chain) -> Trajectory:
        t = super()._finish(c)
        chain = " ".join(c.thoughts)  # active_pipeline.py:1036
        if ANSWER_MARKER in chain:  # pred_parse.py:25-26
            pred = chain.split(ANSWER_MARKER)[1].strip()
            status = "ok" if pred else "empty_answer"
        else:  # pred_parse.py:27-28: the whole chain is the prediction
            pred = chain
            status = "final_turn_fallback" if chain.strip() else "no_answer"
        t.prediction, t.extraction_status = pred, status
        t.meta["prompt_truncated"] = c.truncated_prompts
        return t


def flashrag_spec(base: MethodSpec, name: str) -> MethodSpec:
    """``base`` under FlashRAG's setting: the name, the raw-reply extractor and the input cut."""
    return base.model_copy(
        update={
            "name": name,
            "extractor": "raw reply (FlashRAG pred_process_fun=None)",
            "params": {**base.params, "max_input_len": GENERATOR_MAX_INPUT_LEN, "input_truncation": "middle"},
        }
    )


def mark_truncated(trajs: list[Trajectory], cuts: list[bool]) -> None:
    """Record in ``meta`` whether each prompt was cut (1) or not (0)."""
    for t, cut in zip(trajs, cuts, strict=True):
        t.meta["prompt_truncated"] = int(cut)
