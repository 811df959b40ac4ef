#!/usr/bin/env bash
# Side by side: LlamaIndex's DocumentSummaryIndex (the reference system) and
# docsum, on the same generated corpus, against the same fake OpenAI-compatible
# server (fakellm.py) with the same settings, one configuration after another.
#
#   bench/run_side_by_side.sh                 # every stage, then the tables
#   bench/run_side_by_side.sh small tables    # only N=10,100 at 0/300 ms
#
# Stages (run in the order given):
#   smoke     N=10, latency 0 only (about a minute; checks the set-up)
#   small     N=10 and N=100, latency 0 and 300 ms, 20 questions (10 at N=10)
#   1000      N=1,000, latency 0 ms, 20 questions
#   1000-300  N=1,000, latency 300 ms, 5 questions; LlamaIndex skips its
#             from-scratch rebuild (about 325 s) to keep the stage near 10 min
#   repeat    two more runs of each 0 ms configuration (5 questions each), so
#             that build wall times are medians of three runs
#   c1        docsum with --concurrency 1 at N=100 / 300 ms, 5 questions: how
#             much of the build speed-up is concurrency alone
#   tables    render bench/results/side_by_side.md from the JSON files
#
# Everything the shared harness does is done by calling its scripts by path
# (in $SHARED, which the caller names): runbench.py makes or reuses
# the corpus, starts fakellm on a free port, runs one peer, stops the server
# by its pid and saves the peer's JSON under bench/results/.
#
# Environment overrides: LI_PY (python of the LlamaIndex venv), DOCSUM
# (docsum executable), SHARED (the shared bench folder), RESULTS, FORCE=1
# (re-run configurations whose JSON already exists).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
# The reference system runs through the shared harness (runbench.py,
# peer_llamaindex.py, fakellm.py), which is not part of this repository: the
# caller names its folder; nothing is looked for outside the clone.
: "${SHARED:?set SHARED to the shared bench harness folder (runbench.py, peer_cli.py, peer_llamaindex.py, fakellm.py)}"
LI_PY="${LI_PY:-/tmp/bench-venvs/li/bin/python}"
DOCSUM="${DOCSUM:-/tmp/dev/bin/docsum}"
RESULTS="${RESULTS:-$HERE/results}"
CORPUS_ROOT="${CORPUS_ROOT:-/tmp/bench-corpus}"
mkdir -p "$RESULTS"

for f in "$SHARED/runbench.py" "$SHARED/peer_cli.py" "$SHARED/peer_llamaindex.py" "$SHARED/fakellm.py"; do
  [ -f "$f" ] || { echo "missing $f" >&2; exit 2; }
done
[ -x "$LI_PY" ] || { echo "no LlamaIndex venv at $LI_PY (see bench/README.md)" >&2; exit 2; }
[ -x "$DOCSUM" ] || { echo "no docsum at $DOCSUM" >&2; exit 2; }

# docsum reads no user config or store during the benchmark.
DOCSUM_HOME="$(mktemp -d /tmp/bench-docsum-home.XXXXXX)"
export DOCSUM_HOME
trap 'rm -rf "$DOCSUM_HOME"' EXIT

SKIP=(--skip-existing)
[ "${FORCE:-0}" = 1 ] && SKIP=()
LOG="$RESULTS/side_by_side.log"

note() { printf '%s %s | load %s\n' "$(date -u +%FT%TZ)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG" >&2; }

# Fairness: the settings LlamaIndex runs with, given to docsum explicitly.
#   context window 3900 (LlamaIndex's DEFAULT_CONTEXT_WINDOW), 256 reserved for
#   output (docsum's default too), chunks of 1024 tokens with 200 overlap,
#   top-1 document, 10 summaries per choice-select call, compact answers,
#   text-embedding-3-small for summaries and questions, and the same model name
#   ("fake-llm", the name peer_llamaindex.py sends), so docsum counts tokens as
#   it does for any non-OpenAI server (cl100k plus a 10% margin).
COMMON="--base-url {base_url} --model fake-llm --context-window 3900 --embed-model text-embedding-3-small"

li_run() {  # n latency [extra peer args] [tag]
  local n=$1 lat=$2 extra=${3:-} tag=${4:-}
  note "llamaindex n=$n latency=$lat $extra"
  "$LI_PY" "$SHARED/runbench.py" run --tool llamaindex \
    --peer "$LI_PY $SHARED/peer_llamaindex.py" --peer-args "$extra" \
    --n "$n" --latency "$lat" --results "$RESULTS" --corpus-root "$CORPUS_ROOT" \
    --server-python "$LI_PY" --tag="$tag" "${SKIP[@]}"
}

docsum_run() {  # n latency [extra peer args] [tool label] [extra docsum options] [tag]
  local n=$1 lat=$2 extra=${3:-} tool=${4:-docsum} dopts=${5:-} tag=${6:-}
  mkdir -p "$RESULTS/docsum-reports"
  local stem="$RESULTS/docsum-reports/${tool}-n${n}-w1000-lat${lat}${tag}"
  local build="$DOCSUM build {corpus} --store {index} $COMMON --chunk-size 1024 --chunk-overlap 200 $dopts -q --json"
  # build: a new store.  rebuild: the same command on the same store and the
  # unchanged folder (docsum's skip of unchanged files).  refresh: every file
  # touched first (new mtimes, same bytes), then the same command: content
  # hashing must still skip them.  docsum's own --json reports are kept next
  # to the result file so its self-reported usage can be checked against the
  # server's counters.
  local q="$DOCSUM ask {question} --store {index} $COMMON --top-k 1 --choice-batch-size 10 --no-stream --mode compact $dopts -q"
  note "docsum n=$n latency=$lat $extra $dopts"
  "$LI_PY" "$SHARED/runbench.py" run --tool "$tool" \
    --peer "python3 $SHARED/peer_cli.py --tool-name $tool \
      --build '$build > $stem.build.json' \
      --rebuild '$build > $stem.rebuild.json' \
      --refresh 'touch {corpus}/*.txt && $build > $stem.refresh.json' \
      --query 'llm=$q --retriever llm' \
      --query 'embedding=$q --retriever embedding' \
      --sources-in-output" \
    --peer-args "$extra" \
    --n "$n" --latency "$lat" --results "$RESULTS" --corpus-root "$CORPUS_ROOT" \
    --server-python "$LI_PY" --tag="$tag" "${SKIP[@]}"
}

stage() {
  case "$1" in
    smoke)
      li_run 10 0
      docsum_run 10 0 ;;
    small)
      for n in 10 100; do
        for lat in 0 300; do
          li_run "$n" "$lat"
          docsum_run "$n" "$lat"
        done
      done ;;
    1000)
      li_run 1000 0
      docsum_run 1000 0 ;;
    1000-300)
      li_run 1000 300 "--skip-rebuild --max-questions 5"
      docsum_run 1000 300 "--max-questions 5" ;;
    repeat)
      # two more runs of every 0 ms configuration (5 questions, no
      # from-scratch rebuild for the reference) so build times are medians of 3
      for n in 10 100 1000; do
        for r in 2 3; do
          li_run "$n" 0 "--skip-rebuild --max-questions 5" "-r$r"
          docsum_run "$n" 0 "--max-questions 5" docsum "" "-r$r"
        done
      done ;;
    c1)
      docsum_run 100 300 "--max-questions 5" docsum-c1 "--concurrency 1" ;;
    tables)
      python3 "$HERE/tables.py" side "$RESULTS" > "$RESULTS/side_by_side.md"
      note "tables -> $RESULTS/side_by_side.md" ;;
    *) echo "unknown stage $1" >&2; exit 2 ;;
  esac
}

# what was measured: docsum's source fingerprint and versions, in the log
note "start: stages ${*:-default}; docsum $("$(dirname "$DOCSUM")/python" -c 'import importlib.metadata as m; print(m.version("docsum"), "openai", m.version("openai"), "numpy", m.version("numpy"))') source sha256 $(cat "$REPO"/docsum/*.py "$REPO"/cli/*.py | sha256sum | cut -c1-12)"

STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(small 1000 repeat 1000-300 c1 tables)
for s in "${STAGES[@]}"; do stage "$s"; done
