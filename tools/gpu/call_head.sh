# Sourced, from the repository root on the GPU machine, by each device call script
# (bench/results/<date>-gpuNN/call.sh) after tools/gpu/prep_device.sh made what it carries
# (carry [".device", ".whl"]). Unpacks the PTX sets, cubins and tokenizer, installs the
# wheels and the openai SDK, writes the synthetic-weight model directories under cfg/, and defines:
#
#   t LIMIT NAME CMD...    run CMD under a time limit, log to $L/NAME.log, print rc, seconds
#                          and the log's last $TAILN lines (default 4), pack the results
#   hdr NAME               the log's GPU-per-step lines (profile_decode)
#   prof NAME "ENV=.." ... profile_decode.py on synthetic weights (seed 0) with those env vars
#   kt NAME "ENV=.." ...   bench_kernels.py rows (-k selections follow), one line a row
#   ckpt MODEL             a generated checkpoint of that config under $C (with the tokenizer)
#   serve MODEL [ENV=..]   the default server (no flags) on port 8897, waiting until it listens
#   unserve                stop it
#   tp NAME LEVELS WEIGHTS N SEED MODEL   the `throughput` suite against that server
#   tp_show FILE...        its levels' totals, TTFT and inter-token percentiles, one line each
#   h200_gates             on an H200: the four gate records at the carried HEAD
#   b1 NAME "ENV=.." DIR   prof at batch 1 x 512 ($PL: its time limit, default 75 s)
#   aw NAME                that profile's GPU-replay and async-wall ms a step, one line
#
# Results go to $R, logs to $L; both come back as $OUT/all.tgz, also when the call is cut short.
set -uo pipefail
mkdir -p .device/kernels .device/sass
tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/sass.tar.xz -C .device/sass \
  && tar xJf .device/tok.tar.xz -C .device || { echo "call_head: carried artifacts missing"; exit 1; }
for v in .device/kernels_*.tar.xz; do  # prep_device.sh ATLAS_PREP_VARIANT sets (deltas)
  [ -f "$v" ] || continue
  d="${v%.tar.xz}"; mkdir -p "$d.delta" && tar xJf "$v" -C "$d.delta" \
    && python3 tools/gpu/ptxset_delta.py merge .device/kernels "$d.delta" "$d" > /dev/null \
    || { echo "call_head: variant $v unusable"; exit 1; }
done
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1
export PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/site && tar xJf .device/pysite.tar.xz -C /tmp/site  # openai SDK (prep_device.sh)
W=/tmp/cw; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt; G=$PWD/cfg
# Packed aside, then renamed: a call killed at the tool's time limit while packing keeps the
# last whole archive (session 28's first gpu106 run came back as an empty all.tgz).
pack() { tar czf "$OUT/all.tgz.part" -C $W r log && mv -f "$OUT/all.tgz.part" "$OUT/all.tgz"; }
trap pack EXIT
t() {
  local lim=$1 name=$2; shift 2; local s; s=$(date +%s)
  timeout "$lim" "$@" > "$L/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - s ))s"; tail -n "${TAILN:-4}" "$L/$name.log" | cut -c1-230; pack; return $rc
}
hdr() { grep -E "GPU per step|async scheduling" "$L/$1.log" | cut -c1-200; }
prof() {
  local name=$1 envs=$2; shift 2
  TAILN=0 t "${PLIM:-75}" "$name" env $envs python3 tools/gpu/profile_decode.py --synthetic-seed 0 "$@" --out "$R/$name.json"
  echo "  $name: $(hdr "$name" | head -1 | cut -c1-150)"
}
kt() {
  local name=$1 envs=$2; shift 2
  TAILN=0 t "${KLIM:-90}" "kt_$name" env $envs python3 tools/gpu/bench_kernels.py --repeats 40 "$@" --out-dir "$R/kt_$name"
  grep -E "^\| " "$L/kt_$name.log" | grep -v "^| kernel\|^|---" \
    | awk -F'|' '{printf "  %-44s %8s %8s %6s %5s\n", substr($3,1,44), $6, $7, $8, $10}'
}
# synthetic-weight model directories: cfg/<name>, cfg/q-<quant>/<name>, cfg/q-<quant>-head/qwen3-8b
# (config.json only)
python3 - "$G" <<'EOF'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
root = Path(sys.argv[1])
for name in ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "llama-3.2-1b", "llama-3.2-3b",
             "llama-3.1-8b", "qwen3-30b-a3b", "qwen3_5-35b-a3b", "qwen2.5-0.5b", "qwen2.5-1.5b",
             "qwen2.5-7b", "mistral-7b-v0.3", "mixtral-8x7b", "minimax-m2-8l", "gemma-3-1b",
             "gemma-3-4b", "mistral-7b-v0.1", "phi-4-mini", "phi-3-mini-4k", "phi-3.5-mini",
             "gpt-oss-20b"):
    synthetic_model_dir(name, root)
# glm-4.5-air in FP8 is 108 GB of weights (106B parameters): an H200 only (141 GB)
for quant, names in (("fp8-block", ("qwen3-8b", "qwen3_5-35b-a3b", "glm-4.5-air")),
                     ("nvfp4", ("qwen3-8b", "qwen3_5-35b-a3b"))):
    for name in names:
        synthetic_model_dir(name, root / f"q-{quant}", quant)
    # as `atlas models quantize` writes them by default: the LM head quantized too
    synthetic_model_dir("qwen3-8b", root / f"q-{quant}-head", quant, lm_head=True)
print("cfg:", len(list(root.rglob("config.json"))), "model directories")
EOF
ckpt() {
  python3 tools/make_fixtures.py --config "$1" --device cuda --out "$C/$1" --no-golden > "$L/ckpt_$1.log" 2>&1
  cp .device/qwen3-tok/tokenizer*.json "$C/$1/"
}
serve() {
  local m=$1; shift
  (env "$@" python3 -m atlas_cli.main serve "$C/$m" --backend cuda --port 8897 > "$L/server_$m.log" 2>&1 &)
  for _ in $(seq 360); do grep -q "Listening on" "$L/server_$m.log" && break; sleep 0.5; done
  grep -E "KV pool|Listening" "$L/server_$m.log" | head -3 | cut -c1-200
}
unserve() { pkill -f "atlas_cli.main serve"; sleep 3; }
tp() {
  local name=$1 levels=$2 weights=$3 n=$4 seed=$5 model=$6 s; s=$(date +%s)
  timeout 100 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 \
    --model "$model" --param concurrencies="$levels" --param weights="$weights" \
    --param requests_per_level="$n" --param seed="$seed" --format json --no-fail-on-verdict \
    > "$R/tp_$name.json" 2> "$L/tp_$name.err"
  echo "tp_$name rc=$? $(( $(date +%s) - s ))s"; pack
}
b1() { PLIM=${PL:-75} prof "$1" "$2" --model "$3" --batch 1 --context 512; }
aw() {
  grep -oE "GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+" \
    "$L/$1.log" 2>/dev/null | grep -oE "[0-9.]+$" | tr '\n' ' '
}
# The four gate records at this HEAD (.device/git.tar, tools/gpu/prep_git.sh), on an H200 only:
# BENCH.toml's thresholds are the H200's.
h200_gates() {
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ -f .device/git.tar ] \
    || return 0
  ckpt qwen3-8b; serve qwen3-8b
  rm -rf .git && mkdir .git && tar xf .device/git.tar -C .git && git status --porcelain > /dev/null
  for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do
    TAILN=2 t 90 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 \
      --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
  mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack; unserve
}
tp_show() {
  python3 - "$@" <<'PY' 2>&1 | tail -9
import json, sys
m = {}
for f in sys.argv[1:]:
    try:
        m.update(json.load(open(f))["metrics"])
    except (OSError, ValueError, KeyError) as e:
        print("unreadable", f, e)
for c in (1, 2, 4, 8, 16, 32, 64):
    k = f"c{c}."
    if k + "aggregate_total_tok_s" in m:
        print(f"c{c:<3} total {m[k + 'aggregate_total_tok_s']:9.1f} out {m[k + 'aggregate_output_tok_s']:8.1f}"
              f" ttft p50/p99 {m[k + 'ttft_p50_ms']:7.1f}/{m[k + 'ttft_p99_ms']:7.1f}"
              f" itl p50/p99 {m[k + 'itl_p50_ms']:5.2f}/{m[k + 'itl_p99_ms']:6.2f}")
PY
}
