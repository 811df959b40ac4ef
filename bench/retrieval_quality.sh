#!/usr/bin/env bash
# Retrieval quality with `docsum eval` on the two evaluation corpora:
#   sec-10-q  20 SEC 10-Q filings, 130 questions (single- and multi-document)
#   musique   328 Wikipedia articles, 150 multi-hop questions
#
# Each corpus is built once, offline (extractive summaries, lexical vectors),
# into its own store.  Then:
#   embedding retriever, top-k 1 / 3 / 5, beside the chunk baseline
#     (--baseline chunks: every node scored with the same vectors, documents
#     ranked by their best node), offline;
#   llm and hybrid retrievers, top-k 1 / 3 / 5, against fakellm.py (latency
#     0), which answers choice-select prompts by word overlap between the
#     question and each numbered summary.
#
# This measures docsum's retrieval pipeline (what is indexed, how candidates
# are batched, parsed and ranked), NOT the quality of any model: the summaries
# are extractive and the "LLM" is a word-overlap scorer.  A real model would
# change every figure.
#
#   bench/retrieval_quality.sh          # writes bench/results/quality/*.json, prints the table
#
# Environment overrides: DOCSUM, LI_PY (runs fakellm with tiktoken counts),
# EVAL (the shared eval folder), SHARED, RESULTS, KS (default "1 3 5").
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
# Nothing outside the clone is assumed: the evaluation corpora (EVAL) and the
# shared harness whose fakellm.py answers choice prompts by word overlap
# (SHARED; bench/fakeserver.py always picks the first document, which would
# make the llm and hybrid figures meaningless) are named by the caller.
: "${EVAL:?set EVAL to the folder of evaluation corpora (sec-10-q/, musique/, each with questions.jsonl)}"
: "${SHARED:?set SHARED to the shared bench harness folder (its fakellm.py serves the llm and hybrid runs)}"
DOCSUM="${DOCSUM:-/tmp/dev/bin/docsum}"
LI_PY="${LI_PY:-/tmp/bench-venvs/li/bin/python}"
[ -x "$LI_PY" ] || LI_PY=python3
RESULTS="${RESULTS:-$HERE/results}"
KS="${KS:-1 3 5}"
OUT="$RESULTS/quality"
mkdir -p "$OUT"

WORK="$(mktemp -d /tmp/bench-quality.XXXXXX)"
FAKE_PID=""
cleanup() {
  if [ -n "$FAKE_PID" ] && kill -0 "$FAKE_PID" 2>/dev/null; then kill "$FAKE_PID"; wait "$FAKE_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
export DOCSUM_HOME="$WORK/home"
unset OPENAI_API_KEY OPENAI_BASE_URL DOCSUM_API_KEY DOCSUM_STORE DOCSUM_MODEL DOCSUM_EMBED_MODEL || true
LOG="$OUT/quality.log"
: > "$LOG"
echo "[quality] $(date -u +%FT%TZ) docsum source sha256 $(cat "$REPO"/docsum/*.py "$REPO"/cli/*.py | sha256sum | cut -c1-12)" | tee -a "$LOG" >&2

# keep docsum's JSON, tagged with the corpus name, for tables.py
save() {  # corpus name file
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["_corpus"]=sys.argv[2]; json.dump(d, open(sys.argv[3],"w"), indent=1)' \
    "$WORK/last.json" "$1" "$OUT/$2.json"
}

run_eval() {  # corpus name docsum-eval-args...
  local corpus=$1 name=$2; shift 2
  echo "[quality] $name: docsum eval $*" | tee -a "$LOG" >&2
  local t0 rc=0
  t0=$EPOCHREALTIME
  "$DOCSUM" eval "$EVAL/$corpus/questions.jsonl" --store "$WORK/$corpus.sqlite" --json -q "$@" > "$WORK/last.json" 2>>"$LOG" || rc=$?
  printf '[quality] %s: exit %s, %.1f s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')" | tee -a "$LOG" >&2
  if [ "$rc" -ne 0 ]; then echo "[quality] $name FAILED (exit $rc), see $LOG" >&2; return 0; fi
  save "$corpus" "$name"
}

for corpus in sec-10-q musique; do
  echo "[quality] building $corpus offline" | tee -a "$LOG" >&2
  "$DOCSUM" build "$EVAL/$corpus" --store "$WORK/$corpus.sqlite" --llm extractive --json -q > "$OUT/build-$corpus.json" 2>>"$LOG"
  for k in $KS; do
    run_eval "$corpus" "$corpus-embedding-k$k" --llm extractive --retriever embedding --top-k "$k" --baseline chunks
  done
done

# fakellm for the llm and hybrid retrievers (started here, stopped by its pid)
PORT_FILE="$WORK/port"
"$LI_PY" "$SHARED/fakellm.py" --port 0 --port-file "$PORT_FILE" --latency-ms 0 >> "$LOG" 2>&1 &
FAKE_PID=$!
for _ in $(seq 100); do [ -s "$PORT_FILE" ] && break; sleep 0.1; done
[ -s "$PORT_FILE" ] || { echo "fakellm did not start" >&2; exit 1; }
sleep 0.1
BASE="http://127.0.0.1:$(cat "$PORT_FILE")/v1"
export OPENAI_API_KEY=fake-key

for corpus in sec-10-q musique; do
  for retriever in llm hybrid; do
    for k in $KS; do
      curl -s -X POST "${BASE%/v1}/stats/reset" > /dev/null
      run_eval "$corpus" "$corpus-$retriever-k$k" --llm openai --base-url "$BASE" --model fake-llm \
        --context-window 3900 --retriever "$retriever" --top-k "$k"
      # the server's view of the same run, kept beside docsum's JSON
      if [ -f "$OUT/$corpus-$retriever-k$k.json" ]; then
        curl -s "${BASE%/v1}/stats" > "$WORK/stats.json"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=json.load(open(sys.argv[2])); d["server"]={"llm_calls": s["llm"]["requests"], "prompt_tokens_cl100k": s["llm"]["prompt_tokens_cl100k"], "max_inflight": s["max_inflight"], "errors": s["errors"]}; json.dump(d, open(sys.argv[1],"w"), indent=1)' \
          "$OUT/$corpus-$retriever-k$k.json" "$WORK/stats.json"
      fi
    done
  done
done

python3 "$HERE/tables.py" quality "$RESULTS"
