#!/usr/bin/env bash
# ARENA's record, once parts/ holds all 16 parts of each arm (sft-, rl-, naive-{0,25,...,375}.json):
# join each arm's parts and build results/learning-arena.json with the run's files, from an exported
# copy of the evaluation's commit (5900dc1, which names itself through HARNESS_COMMIT).
#
#   SRC=/work/src RUNS=/work/runs results/in-progress/arena/finish.sh
#
# RUNS: a folder outside the checkout with run-files.tar.gz unpacked in it (arena/runs.duckdb, arena/sft,
# arena/rl); SRC: where exported copies live (src-5900dc1 is made there if missing). PYTHON: an
# interpreter with the harness's dependencies (default: the checkout's .tox/py/bin/python).
# After it: run.md's "Left" (move the adapters, the docs section and tables, the ship check).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n 2,11p "$0"; exit 0; fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
: "${SRC:?set SRC (see --help)}" "${RUNS:?set RUNS (see --help)}"
py=${PYTHON:-$repo/.tox/py/bin/python}
commit=5900dc13318a5de0ea355fe0697ade6da4a5d684
copy=$SRC/src-5900dc1
if [[ ! -d $copy ]]; then
    git -C "$repo" archive --prefix=src-5900dc1/ $commit | tar -x -C "$SRC"
    ln -s "$RUNS" "$copy/runs"
fi
[[ -f $RUNS/arena/runs.duckdb ]] || tar -xzf "$here/run-files.tar.gz" -C "$RUNS"
cd "$copy"
export HARNESS_COMMIT=$commit PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1
P=$here/parts R=runs/records
mkdir -p $R
los="0 25 50 75 100 125 150 175 200 225 250 275 300 325 350 375"
rl_label="SFT+RL step 5 (shipped adapter)"
"$py" scripts/eval_heldout.py merge $(for l in $los; do echo $P/sft-$l.json; done) --label "SFT (warm start)" --record $R/arena-sft.json
"$py" scripts/eval_heldout.py merge $(for l in $los; do echo $P/rl-$l.json; done) --label "$rl_label" --record $R/arena-rl.json
"$py" scripts/eval_heldout.py merge $(for l in $los; do echo $P/naive-$l.json; done) --label naive_rag_arena --record $R/arena-naive.json
cmds=()
while IFS= read -r l; do [[ -n $l ]] && cmds+=(--command "$l"); done < "$here/record-commands.txt"
"$py" scripts/method_record.py build --method arena --recipe cpu-learn-grpo --out-dir runs/arena \
    --db runs/arena/runs.duckdb --evals $R/arena-sft.json $R/arena-rl.json $R/arena-naive.json \
    --pair "SFT (warm start),$rl_label" --pair "naive_rag_arena,$rl_label" --pair "naive_rag_arena,SFT (warm start)" \
    --stage-commit sft=8dbb1ac10ba9b3765c8231ee1507b21a60122ec8 --stage-commit rl=aca678b8d4363e838fee367093720a2cc020f1fa \
    "${cmds[@]}" --about "$(cat "$here/record-about.txt")" --record results/learning-arena.json
cp results/learning-arena.json "$repo/results/learning-arena.json"
echo "wrote $repo/results/learning-arena.json"
