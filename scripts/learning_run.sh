#!/usr/bin/env bash
# One method's CPU learning run (issue 57): the warm start (harness sft), then RL (harness train) from it,
# with llama.cpp rollouts, a checkpoint every save_every steps and every 10th policy kept, so a stop loses
# little and `scripts/learning_run.sh` again resumes. Held-out evaluation is separate (scripts/eval_heldout.py).
#
#   scripts/learning_run.sh METHOD RECIPE OUT [extra harness train args...]
#   scripts/learning_run.sh eval_rar cpu-learn-grpo /work/runs/eval_rar
#
# PROTOCOL (optional) is passed to both stages as --protocol (ARENA: arena-gold-context).
# HARNESS_COMMIT names the commit when run from an exported copy (git archive) outside the repository.
# Threads: OMP_NUM_THREADS (default 1) for the learner and the same for llama.cpp (--rollout-threads).
# Run it in the background as:
#   OMP_NUM_THREADS=1 nohup nice -n 10 scripts/learning_run.sh eval_rar cpu-learn-grpo /work/runs/eval_rar \
#       > /work/runs/eval_rar.log 2>&1 &
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n 2,14p "$0"
    exit 0
fi
if [[ $# -lt 3 ]]; then
    echo "usage: scripts/learning_run.sh METHOD RECIPE OUT [harness train args...] (--help)" >&2
    exit 2
fi
method=$1 recipe=$2 out=$3
shift 3
threads=${OMP_NUM_THREADS:-1}
export OMP_NUM_THREADS=$threads HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
py=${PYTHON:-python}
mkdir -p "$out"
db="$out/runs.duckdb"
echo "$(date -u +%FT%TZ) commit ${HARNESS_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)} $method $recipe $out threads=$threads"
proto=()
[[ -n ${PROTOCOL:-} ]] && proto=(--protocol "$PROTOCOL")
if [[ ! -f "$out/sft/final/harness_train.json" ]]; then
    echo "$(date -u +%FT%TZ) harness sft --method $method --recipe $recipe --out $out/sft --db $db ${proto[*]}"
    "$py" -m harness sft --method "$method" --recipe "$recipe" --out "$out/sft" --db "$db" "${proto[@]}"
fi
resume=()
[[ -d "$out/rl/checkpoint" ]] && resume=(--resume)
echo "$(date -u +%FT%TZ) harness train --method $method --recipe $recipe --model $out/sft/final --out $out/rl" \
    "--db $db --rollout-backend llamacpp --rollout-weights q8_0 --rollout-threads $threads --keep-every 10 ${proto[*]} ${resume[*]} $*"
"$py" -m harness train --method "$method" --recipe "$recipe" --model "$out/sft/final" --out "$out/rl" --db "$db" \
    --rollout-backend llamacpp --rollout-weights q8_0 --rollout-threads "$threads" --keep-every 10 "${proto[@]}" "${resume[@]}" "$@"
echo "$(date -u +%FT%TZ) done"
