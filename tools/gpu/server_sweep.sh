#!/usr/bin/env bash
# Serve one checkpoint on the CUDA backend and drive it with the benchmark harness's
# concurrency sweep (GPU machine). Usage: server_sweep.sh MODEL_DIR OUT_JSON [CONCURRENCIES]
# The server's own log goes beside OUT_JSON; the harness's JSON result to OUT_JSON.
# CONCURRENCIES=none skips the sweep (the throughput suite alone).
# With ATLAS_THROUGHPUT_LEVELS=16,32,64 (and ATLAS_THROUGHPUT_WEIGHTS to match) the same
# server then runs the contest-shaped `throughput` suite at those levels into
# ${OUT_JSON%.json}.throughput.json (the full 1..64 sweep takes over ten minutes).
set -uo pipefail
model="$1" out="$2" levels="${3:-1,4,16,64}"
port="${ATLAS_SWEEP_PORT:-8899}"
py="${PYTHON:-python3}"
log="${out%.json}.server.log"
# ATLAS_SERVE_ARGS: the serve flags (default: the sweep's historical sizing; the throughput
# stage passes none, so the server runs with its defaults as a user would start it)
# shellcheck disable=SC2086
"$py" -m atlas_cli.main serve "$model" --backend cuda --port "$port" \
  ${ATLAS_SERVE_ARGS---max-batch-size 64 --max-seq-len 2304 --max-prefill-tokens 4096} \
  >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  grep -q "Listening on" "$log" && break
  kill -0 $pid 2>/dev/null || { echo "server exited:"; tail -n 30 "$log"; exit 1; }
  sleep 0.5
done
grep -q "Listening on" "$log" || { echo "server not ready after 300 s"; tail -n 30 "$log"; exit 1; }
rc=0
if [ "$levels" != none ]; then
  "$py" -m atlas_cli.main benchmark run concurrency-sweep --url "http://127.0.0.1:$port" \
    --model "$(basename "$model")" --param "concurrencies=$levels" --param isls=512 \
    --param osl=128 --param rounds=2 --format json --no-fail-on-verdict >"$out"
  rc=$?
fi
if [ $rc -eq 0 ] && [ -n "${ATLAS_THROUGHPUT_LEVELS:-}" ]; then
  "$py" -m atlas_cli.main benchmark run throughput --url "http://127.0.0.1:$port" \
    --model "$(basename "$model")" --param "concurrencies=$ATLAS_THROUGHPUT_LEVELS" \
    --param "weights=${ATLAS_THROUGHPUT_WEIGHTS:-4,4,8}" --format json \
    --no-fail-on-verdict >"${out%.json}.throughput.json"
  rc=$?
  if [ "$levels" = none ]; then mv "${out%.json}.throughput.json" "$out"; fi
fi
tail -n 5 "$log"
exit $rc
