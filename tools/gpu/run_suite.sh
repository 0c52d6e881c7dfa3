#!/usr/bin/env bash
# The one script to run on the GPU machine: environment check, wheels, kernel build, every
# kernel against its reference, the GPU-marked tests, then whatever stages are added below.
# Each stage logs to its own file; a failing stage does not stop the next one (except the
# environment check, which ends the run); a summary table prints last; the exit status is
# non-zero if any stage failed.
#
#   tools/gpu/run_suite.sh                 # every stage
#   tools/gpu/run_suite.sh check_kernels   # env_check plus the named stages only
#
# Environment:
#   OUT                   logs go to $OUT/logs, results to $OUT/results (else /tmp/atlas_gpu_suite/<time>)
#   ATLAS_SUITE_REUSE_PTX=1  keep existing PTX sets ($ATLAS_KERNELS_DIR or build/kernels)
#                         instead of rebuilding (PTX built on the CPU machine and carried)
#   ATLAS_8B_HF=eager,compiled  transformers baselines of the qwen3_8b stage
#   ATLAS_THROUGHPUT_LEVELS=1,2,4,8,16,32,64  levels of the throughput stage (weights follow
#                         the suite's 1,1,2,2,4,4,8 for those levels)
#   ATLAS_CHECK_SEED=N    fixed input seed for check_kernels (default: from the clock)
#   ATLAS_MOE_HF=eager,compiled  transformers baselines of the moe_bench stage (or none)
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"

STAMP="$(date -u +%Y%m%d-%H%M%S)"
# Logs and results live outside $OUT (which returns at most 8 files); a tarball of them
# and the JSON results are copied into $OUT at the end.
BASE="/tmp/atlas_gpu_suite/$STAMP"
LOGS="$BASE/logs"
RESULTS="$BASE/results"
mkdir -p "$LOGS" "$RESULTS"

PY="${PYTHON:-python3}"
export PYTHONPATH="$REPO/py${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

# ---- stages -------------------------------------------------------------------------------
# Each stage is a function `stage_<name>`; it returns non-zero on failure. Add new stages as
# functions and list them in STAGES (order = run order).

stage_env_check() {
  command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found"; return 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || return 1
  "$PY" --version || return 1
  "$PY" - <<'EOF' || return 1
from cuda.bindings import driver
import cuda.bindings, numpy
(err,) = driver.cuInit(0)
assert not err, f"cuInit failed: {err}"
err, n = driver.cuDeviceGetCount()
assert not err and n > 0, f"no CUDA device ({err}, {n})"
err, version = driver.cuDriverGetVersion()
print(f"cuda-bindings {cuda.bindings.__version__}, numpy {numpy.__version__}, "
      f"{n} device(s), driver CUDA {version // 1000}.{version % 1000 // 10}")
EOF
  command -v nvcc >/dev/null && nvcc --version | tail -n 2
  git -C "$REPO" log -1 --oneline 2>/dev/null || true
}

stage_install_wheels() {
  # Packages missing from the GPU image (orjson, structlog) travel as wheels in .whl/.
  shopt -s nullglob
  local wheels=("$REPO"/.whl/*.whl)
  shopt -u nullglob
  if [ ${#wheels[@]} -eq 0 ]; then
    echo "no wheels in .whl/; nothing to install"
    return 0
  fi
  local site=/tmp/site
  "$PY" -m pip install --no-index --no-deps --quiet --target "$site" "${wheels[@]}" || return 1
  echo "installed ${#wheels[@]} wheel(s) into $site"
}

stage_build_kernels() {
  shopt -s nullglob
  local dir="${ATLAS_KERNELS_DIR:-$REPO/build/kernels}"
  local sets=("$dir"/*.ptxset.json)
  shopt -u nullglob
  if [ "${ATLAS_SUITE_REUSE_PTX:-0}" = 1 ] && [ ${#sets[@]} -gt 0 ]; then
    echo "reusing ${#sets[@]} PTX set(s) in $dir (ATLAS_SUITE_REUSE_PTX=1)"
    return 0
  fi
  command -v nvcc >/dev/null || { echo "nvcc not found and no reusable PTX sets"; return 1; }
  ATLAS_TARGET_HW=hopper "$PY" -m atlas_cli.main kernels build -j "$(nproc)"
}

stage_check_kernels() {
  local seed_args=()
  [ -n "${ATLAS_CHECK_SEED:-}" ] && seed_args=(--seed "$ATLAS_CHECK_SEED")
  local select=() k
  for k in ${ATLAS_CHECK_SELECT:-}; do select+=(-k "$k"); done  # e.g. "moe gemv": those cases only
  "$PY" tools/gpu/check_kernels.py ${seed_args[@]+"${seed_args[@]}"} ${select[@]+"${select[@]}"} \
    --out "$RESULTS/gpu_check-$STAMP.json"
}

stage_pytest_gpu() {
  "$PY" -m pytest -m gpu -q -p no:cacheprovider tests/gpu \
    --junitxml="$RESULTS/pytest_gpu-$STAMP.xml"
}

CKPT="${ATLAS_CKPT_DIR:-/tmp/atlas_ckpt}"
export ATLAS_COMMIT="${ATLAS_COMMIT:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}"

stage_tiny_parity() {
  local name args=()
  for name in tiny-llama tiny-qwen3 tiny-llama3-rope tiny-qwen3-yarn tiny-qwen2 tiny-mistral \
              tiny-phi3 tiny-phi3-longrope tiny-smollm3 tiny-mixtral tiny-minimax-m2 tiny-qwen3_5 \
              tiny-qwen3_5_moe tiny-qwen3_next tiny-mistral-swa tiny-qwen2-swa tiny-gemma3 \
              tiny-glm4-moe tiny-phi3-d96 tiny-gpt-oss; do
    args+=(--model "tests/fixtures/$name")
  done
  "$PY" tools/gpu/model_parity.py --backend cuda "${args[@]}" --out "$RESULTS/parity_tiny.json"
}

# A random-weight checkpoint in a real config, with transformers goldens, made on this GPU.
# Benchmark-only stages call it with "weights" (no goldens: faster on a fresh machine).
make_checkpoint() {
  local name="$1" need="${2:-golden}"
  [ -f "$CKPT/$name/golden.npz" ] && return 0
  if [ "$need" = weights ]; then
    [ -f "$CKPT/$name/config.json" ] && ls "$CKPT/$name"/*.safetensors >/dev/null 2>&1 && return 0
    "$PY" tools/make_fixtures.py --config "$name" --device cuda --out "$CKPT/$name" --no-golden
    return
  fi
  "$PY" tools/make_fixtures.py --config "$name" --device cuda --out "$CKPT/$name"
}

model_stage() {
  local name="$1" hf="$2" rc=0
  make_checkpoint "$name" || return 1
  "$PY" tools/gpu/model_parity.py --backend cuda --model "$CKPT/$name" \
    --out "$RESULTS/parity_$name.json" || rc=1
  "$PY" tools/gpu/bench_decode.py --model "$CKPT/$name" --hf "$hf" \
    --out "$RESULTS/bench_decode_$name.json" || rc=1
  return $rc
}

# Atlas only (no transformers baselines): the quick re-measure after a kernel change.
stage_decode_bench() {
  local name rc=0
  for name in qwen3-0.6b qwen3-8b; do
    make_checkpoint "$name" weights || return 1
    "$PY" tools/gpu/bench_decode.py --model "$CKPT/$name" --hf none \
      --out "$RESULTS/bench_decode_$name.json" || rc=1
  done
  return $rc
}

stage_qwen3_0_6b() { model_stage qwen3-0.6b eager; }
# The hybrid dense Qwen3.5 (Gated-DeltaNet + gated attention, head_dim 256) in its published
# default shapes, 8 layers: parity with transformers, then Atlas's decode/prefill numbers.
stage_qwen3_5() { model_stage qwen3_5-9b-8l none; }
# The hybrid MoE flagships in their exact per-layer shapes, 8 layers each (Qwen3.5-35B-A3B:
# 256 experts, stacked tensors; Qwen3-Next-80B-A3B: 512 experts, key-head-grouped linear
# projections): parity with transformers (cosine, max error, transformers' own SDPA and f32
# controls). Each checkpoint (~9 and ~14 GB) is removed after its check (the disk is small).
stage_flagship_parity() {
  local name rc=0
  for name in qwen3_5-35b-a3b-8l qwen3-next-80b-a3b-8l; do
    make_checkpoint "$name" || { rc=1; continue; }
    "$PY" tools/gpu/model_parity.py --backend cuda --model "$CKPT/$name" --tail \
      --out "$RESULTS/parity_$name.json" || rc=1
    rm -rf "${CKPT:?}/$name"
  done
  return $rc
}

# Qwen3.5-35B-A3B at full size (synthetic weights made on the device): batch-1/8/32/64
# decode with bytes per token and the copy-bandwidth fraction, 2,048 and 16,384-token prefill.
stage_flagship_bench() {
  "$PY" tools/gpu/bench_moe.py --config qwen3_5-35b-a3b --batches 1,8,32,64 --prefill 2048 \
    --extra-prefill 16384 --target-tok-s 450 --hf none --out "$RESULTS/bench_flagship.json"
}

# The same flagship decode with each Gated-DeltaNet decode step as three kernels (conv1d,
# recurrent delta rule, gated RMSNorm) instead of the fused gdn_decode: the A/B of the fusion.
# Batches 1 and 8 and a short prefill only: the A/B costs a fraction of flagship_bench.
stage_flagship_bench_unfused() {
  ATLAS_GDN_FUSED=0 "$PY" tools/gpu/bench_moe.py --config qwen3_5-35b-a3b --batches 1,8 \
    --prefill 512 --target-tok-s 450 --hf none --out "$RESULTS/bench_flagship_unfused.json"
}

# The flagship's per-kernel decode profile at batch 8 with PDL off (each kernel's own time):
# which kernels the batch-8 step spends its time in (the fused GDN step, the MoE decode path).
stage_flagship_profile_b8() {
  local cfg="$CKPT/qwen3_5-35b-a3b-synthetic"
  "$PY" tools/make_fixtures.py --config qwen3_5-35b-a3b --out "$cfg" --config-only || return 1
  ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$cfg" --synthetic-seed 0 --batch 8 \
    --out "$RESULTS/profile_decode_qwen3_5-35b-a3b_b8_pdl0.json"
}

# Where the flagship's prefill goes: per-kernel times (PDL off: each launch's own time) of
# one 2,048-token and one 16,384-token prompt (the chunked delta rule, the projection GEMMs,
# the MoE grouped GEMMs, attention).
stage_flagship_profile_prefill() {
  local rc=0 n cfg="$CKPT/qwen3_5-35b-a3b-synthetic"
  "$PY" tools/make_fixtures.py --config qwen3_5-35b-a3b --out "$cfg" --config-only || return 1
  for n in 2048 16384; do
    ATLAS_PDL=0 "$PY" tools/gpu/profile_prefill.py --model "$cfg" --synthetic-seed 0 \
      --tokens "$n" --out "$RESULTS/profile_prefill_qwen3_5-35b-a3b_$n.json" || rc=1
  done
  return $rc
}

# The MoE decode layer as separate launches (router GEMV + top-k, the shared expert's own
# SwiGLU / gate / add, add_rmsnorm) instead of the three fused ones, batch 1 and 8 of both
# full-size MoE models: the A/B of ATLAS_MOE_FUSED_DECODE (the default is fused).
stage_moe_ab_unfused() {
  local rc=0
  ATLAS_MOE_FUSED_DECODE=0 "$PY" tools/gpu/bench_moe.py --batches 1,8 --prefill 512 --hf none \
    --out "$RESULTS/bench_moe_unfused.json" || rc=1
  ATLAS_MOE_FUSED_DECODE=0 "$PY" tools/gpu/bench_moe.py --config qwen3_5-35b-a3b --batches 1,8 \
    --prefill 512 --target-tok-s 450 --hf none --out "$RESULTS/bench_flagship_moe_unfused.json" \
    || rc=1
  return $rc
}

stage_qwen3_8b() { model_stage qwen3-8b "${ATLAS_8B_HF:-eager,compiled}"; }

# The same decode benchmark with programmatic dependent launch off: the A/B of PDL.
stage_decode_bench_nopdl() {
  local name rc=0
  for name in qwen3-0.6b qwen3-8b; do
    make_checkpoint "$name" weights || return 1
    ATLAS_PDL=0 "$PY" tools/gpu/bench_decode.py --model "$CKPT/$name" --hf none \
      --out "$RESULTS/bench_decode_${name}_nopdl.json" || rc=1
  done
  return $rc
}

stage_profile() {
  local name rc=0
  for name in qwen3-0.6b qwen3-8b; do
    make_checkpoint "$name" weights || return 1
    "$PY" tools/gpu/profile_decode.py --model "$CKPT/$name" \
      --out "$RESULTS/profile_decode_$name.json" || rc=1
  done
  return $rc
}

stage_kernel_table() {
  "$PY" tools/gpu/bench_kernels.py ${ATLAS_KERNEL_TABLE_ARGS:-} --out-dir "$RESULTS"
}

# The hybrid decode rows alone (a minute): Qwen3.5-35B-A3B's conv1d, recurrent delta rule and
# gated RMSNorm kernels and the fused step that replaces the three, each against transformers.
stage_gdn_table() {
  "$PY" tools/gpu/bench_kernels.py -k "qwen3.5-35b-a3b decode" --out-dir "$RESULTS"
}

# The 8B checkpoint served over HTTP; the Qwen3 tokenizer files travel in .device/qwen3-tok.
stage_server_sweep() {
  make_checkpoint qwen3-8b weights || return 1
  cp "$REPO"/.device/qwen3-tok/tokenizer*.json "$CKPT/qwen3-8b/" || return 1
  bash tools/gpu/server_sweep.sh "$CKPT/qwen3-8b" "$RESULTS/server_sweep_qwen3-8b.json"
}

# The contest-shaped `throughput` suite against the 8B server started with default flags, at
# ATLAS_THROUGHPUT_LEVELS
# (the whole 1..64 sweep takes ~10 min: split it over calls and merge the JSONs).
stage_throughput() {
  make_checkpoint qwen3-8b weights || return 1
  cp "$REPO"/.device/qwen3-tok/tokenizer*.json "$CKPT/qwen3-8b/" || return 1
  local levels="${ATLAS_THROUGHPUT_LEVELS:-1,2,4,8,16,32,64}" weights=() c
  declare -A w=([1]=1 [2]=1 [4]=2 [8]=2 [16]=4 [32]=4 [64]=8)
  for c in ${levels//,/ }; do weights+=("${w[$c]:-1}"); done
  ATLAS_SERVE_ARGS="" ATLAS_THROUGHPUT_LEVELS="$levels" \
    ATLAS_THROUGHPUT_WEIGHTS="$(IFS=,; echo "${weights[*]}")" bash tools/gpu/server_sweep.sh "$CKPT/qwen3-8b" \
    "$RESULTS/throughput_qwen3-8b_c${levels//,/-}.json" none
}

# Decode batches 2..16 with the batched tensor-core GEMV from 2 rows vs the default routing
# (CUDA-core GEMV up to 8 rows): where the crossover lies.
stage_batched_min_m() {
  local rc=0
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none --batches 2,4,8,16 \
    --prefill 512 --out "$RESULTS/bench_decode_qwen3-8b_routing_default.json" || rc=1
  ATLAS_BATCHED_GEMV_MIN_M=2 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" \
    --hf none --batches 2,4,8,16 --prefill 512 \
    --out "$RESULTS/bench_decode_qwen3-8b_routing_min2.json" || rc=1
  return $rc
}

# Issue 15's long contexts on Qwen3-8B (synthetic weights, no checkpoint): a 32,000-token
# prefill as % of the bf16 matmul peak (attention FLOPs counted), batch-8 decode at 16k and
# 32k contexts as % of the (weights + KV) bandwidth; then the prefill again with the wgmma
# prefill attention off (ATLAS_PREFILL_ATTN_SM90=0: prefill_attn_bf16, no decode).
stage_long_context() {
  local rc=0
  "$PY" tools/gpu/bench_long_context.py --config qwen3-8b --prefill-repeats 2 --new 32 \
    --out "$RESULTS/long_context_qwen3-8b.json" || rc=1
  ATLAS_PREFILL_ATTN_SM90=0 "$PY" tools/gpu/bench_long_context.py --config qwen3-8b --contexts "" \
    --prefill-repeats 2 --out "$RESULTS/long_context_qwen3-8b_prefill_mma_sync.json" || rc=1
  return $rc
}

# Where the 32k-token Qwen3-8B prefill goes: per-kernel times (PDL off) of one 32,000-token
# prompt in one step (the projection GEMMs vs the wgmma prefill attention vs the rest).
stage_long_context_profile() {
  local cfg="$CKPT/qwen3-8b-synthetic"
  "$PY" tools/make_fixtures.py --config qwen3-8b --out "$cfg" --config-only || return 1
  ATLAS_PDL=0 "$PY" tools/gpu/profile_prefill.py --model "$cfg" --synthetic-seed 0 \
    --tokens 32000 --out "$RESULTS/profile_prefill_qwen3-8b_32000.json"
}

# The 32k prefill again on the prefill attention's Q-in-registers entry point
# (ATLAS_PREFILL_ATTN_QREG=1): the A/B that decides its default.
stage_long_context_qreg() {
  ATLAS_PREFILL_ATTN_QREG=1 "$PY" tools/gpu/bench_long_context.py --config qwen3-8b --contexts "" \
    --prefill-repeats 2 --out "$RESULTS/long_context_qwen3-8b_prefill_qreg.json"
}

# The decode half again with the long-context attention kernel off (ATLAS_DECODE_ATTN_LONG=0):
# the A/B of decode_attn_long at batch 8, 16k and 32k.
stage_long_context_nolong() {
  ATLAS_DECODE_ATTN_LONG=0 "$PY" tools/gpu/bench_long_context.py --config qwen3-8b --prefill 0 \
    --out "$RESULTS/long_context_qwen3-8b_nolong.json"
}

# Issue 15's kernel-table rows in one short run: the wgmma decode GEMM (Qwen3-8B gate_up at
# every batch, o_proj b64 with its cluster split) beside gemv_mma's gate_up b32, batch-8
# decode attention at 16k / 32k (the long-context kernel), prefill attention T4096 on
# mma.sync and on wgmma, and the long-prompt rows (ATLAS_ISSUE15_LONG=0 leaves them out).
stage_issue15_table() {
  local long=()
  [ "${ATLAS_ISSUE15_LONG:-1}" = 1 ] && long=(-k "qwen3-8b T16384 sm90" -k "qwen3-8b T32768 sm90"
    -k "qwen3.5-35b-a3b T4096" -k "qwen3-8b gate_up prefill" -k "qwen3-8b down prefill")
  "$PY" tools/gpu/bench_kernels.py --out-dir "$RESULTS" -k "decode_gemm_sm90 qwen3-8b gate_up" \
    -k "decode_gemm_sm90 qwen3-8b o_proj b64" -k "decode_batched_gemv qwen3-8b gate_up b32" \
    -k "decode_attention qwen3-8b b8 hist" -k "qwen3-8b T4096" "${long[@]}"
}

# The skinny wgmma decode GEMM (gemm_decode_sm90, the default for 9..256 rows) against the
# routes before it (ATLAS_DECODE_GEMM=0: gemv_mma up to 64 rows, the GEMMs above), Qwen3-8B
# decode at batches 8..128; then batches 2..8 with it from 2 rows (ATLAS_DECODE_GEMM_MIN_M=2)
# against the default run's batch 8 (gemv_mma) and decode_bench's CUDA-core GEMV rows.
stage_decode_gemm_ab() {
  local rc=0
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none --batches 8,16,32,64,128 \
    --out "$RESULTS/bench_decode_qwen3-8b_decode_gemm.json" || rc=1
  ATLAS_DECODE_GEMM=0 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none \
    --batches 8,16,32,64,128 --out "$RESULTS/bench_decode_qwen3-8b_no_decode_gemm.json" || rc=1
  ATLAS_DECODE_GEMM_MIN_M=2 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none \
    --batches 2,4,8 --out "$RESULTS/bench_decode_qwen3-8b_decode_gemm_min2.json" || rc=1
  return $rc
}

# Issue 12 item 4, KV cache formats on Qwen3-8B (synthetic weights): sequences of 8,192
# tokens the pool holds and batch-64 decode tok/s at 8,192-token contexts, bf16 vs fp8 vs
# nvfp4 KV (decode only, no prefill: see the script's doc).
stage_kv_dtypes() {
  "$PY" tools/gpu/bench_kv_dtypes.py --config qwen3-8b --context 8192 --batch 64 \
    --out "$RESULTS/kv_dtypes_qwen3-8b.json"
}

# The required benchmark gates (decode-floor, concurrency-sweep, ttft-cold, ttft-warm) on the
# Qwen3-8B-config checkpoint served with default flags: `atlas gate record` writes each record
# under .benchmarks/ (scored by kernels/hopper/qwen3-8b/BENCH.toml) and they come back in
# results/benchmarks/. Records name the commit, so the tree needs git: a shallow clone's .git
# travels as .device/git.tar (tools/gpu/prep_git.sh) and replaces whatever .git the device's
# copy holds (a warm machine keeps an earlier call's: gpu142's records named session 41's
# commit with this one's kernels as dirty paths).
stage_gates() {
  local port=8897 log="$LOGS/gates_server.log" pid g rc=0
  make_checkpoint qwen3-8b weights || return 1
  cp "$REPO"/.device/qwen3-tok/tokenizer*.json "$CKPT/qwen3-8b/" || return 1
  if [ -f "$REPO/.device/git.tar" ]; then  # refreshing the index once: no large blobs in it
    rm -rf "$REPO/.git" && mkdir "$REPO/.git" && tar xf "$REPO/.device/git.tar" -C "$REPO/.git" \
      && git -C "$REPO" status --porcelain > /dev/null || return 1
  fi
  "$PY" -m atlas_cli.main serve "$CKPT/qwen3-8b" --backend cuda --port "$port" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "Listening on" "$log" && break
    kill -0 $pid 2>/dev/null || { tail -n 30 "$log"; return 1; }
    sleep 0.5
  done
  for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do
    "$PY" -m atlas_cli.main gate record "$g" --url "http://127.0.0.1:$port" --model qwen3-8b \
      --checkpoint Qwen/Qwen3-8B || rc=1
  done
  kill $pid; wait $pid 2>/dev/null
  mkdir -p "$RESULTS/benchmarks" && cp -r "$REPO/.benchmarks/." "$RESULTS/benchmarks/"
  return $rc
}

# ---- multi-GPU (issue 16) --------------------------------------------------------------------
# NVLink multicast stays off: it can take shared GPUs out of service.
export NCCL_NVLS_ENABLE=0

# One GPU: NCCL with one rank and the one-shot peer-memory kernel with one rank (its sums
# checked), so the all-reduce harness runs before the two-GPU machine.
stage_allreduce_1gpu() {
  "$PY" tools/gpu/bench_tp.py allreduce --world 1 --hidden 5120 \
    --out "$RESULTS/allreduce_1gpu.json"
}

# Two GPUs: TP=2 vs TP=1 on the Qwen3-8B config: prefill-logit cosine >= 0.9999 and the
# greedy tokens (exit 1 below the cosine).
two_gpus() {
  local n
  n=$(nvidia-smi -L | wc -l)
  [ "$n" -ge 2 ] && return 0
  echo "SKIP: needs 2 GPUs, this machine has $n (run on the nvidia-h200-x2 kind)"
  return 1
}

stage_tp_check() {
  two_gpus || return 0
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/bench_tp.py decode --model "$CKPT/qwen3-8b" --tp 1,2 --steps 32 \
    --min-cosine 0.9999 --out "$RESULTS/tp_check_qwen3-8b.json"
}

# Two GPUs: batch-1 decode, TP=2 vs TP=1, on random weights in the Qwen3-32B shapes
# (ATLAS_TP_LAYERS of its 64 layers, default 16: 19 GB, loads in seconds), the fraction of
# one GPU's copy bandwidth per rank, and the all-reduce latency at decode sizes: NCCL and
# the one-shot kernel over CUDA IPC peer pointers side by side (exit 1 on a wrong sum).
stage_tp_bench() {
  two_gpus || return 0
  local layers="${ATLAS_TP_LAYERS:-16}" rc=0
  local dir="$CKPT/qwen3-32b-${layers}l"
  [ -f "$dir/model.safetensors" ] || "$PY" tools/gpu/bench_tp.py checkpoint --out "$dir" \
    --layers "$layers" || return 1
  "$PY" tools/gpu/bench_tp.py decode --model "$dir" --tp 1,2 --steps 128 \
    --out "$RESULTS/tp_bench_qwen3-32b-${layers}l.json" || rc=1
  "$PY" tools/gpu/bench_tp.py allreduce --world 2 --hidden 5120 \
    --out "$RESULTS/allreduce_2gpu.json" || rc=1
  # the same decode with every all-reduce up to 1 MiB on the one-shot kernel (A/B vs NCCL)
  ATLAS_ONESHOT_ALLREDUCE_BYTES=1048576 "$PY" tools/gpu/bench_tp.py decode --model "$dir" \
    --tp 2 --steps 128 --out "$RESULTS/tp_bench_qwen3-32b-${layers}l_oneshot.json" || rc=1
  return $rc
}
# Two GPUs: the contest-shaped `throughput` suite at 64 streams against the 8B server with
# TP=1 and with --tensor-parallel-size 2 (otherwise the server's defaults, as the throughput
# stage runs it), same checkpoint, one after the other.
stage_tp_throughput() {
  two_gpus || return 0
  local tp rc=0
  make_checkpoint qwen3-8b weights || return 1
  cp "$REPO"/.device/qwen3-tok/tokenizer*.json "$CKPT/qwen3-8b/" || return 1
  for tp in 1 2; do
    ATLAS_SERVE_ARGS="--tensor-parallel-size $tp" ATLAS_THROUGHPUT_LEVELS=64 \
      ATLAS_THROUGHPUT_WEIGHTS=8 bash tools/gpu/server_sweep.sh "$CKPT/qwen3-8b" \
      "$RESULTS/throughput_qwen3-8b_c64_tp$tp.json" none || rc=1
  done
  return $rc
}
# One GPU: expert parallelism's numerics on the device kernels. Two ranks share GPU 0 over
# the host collectives (ATLAS_COMM=host: NCCL refuses two ranks on one GPU; eager decode),
# against one process: the tiny MoE fixtures (stacked and per-expert experts, a shared
# expert, the hybrid family) with EP=2, and the 8-layer Qwen3-30B-A3B config from synthetic
# weights with EP=2 and TP=2+EP=2. Prefill (grouped path) and batch-2 decode (fused decode
# path): greedy tokens and prefill-logit cosine vs one process (exit 1 below 0.999).
stage_ep_1gpu() {
  local rc=0 m cfg="$CKPT/qwen3-30b-a3b-8l-synthetic"
  for m in tiny-qwen3-moe tiny-qwen2-moe tiny-qwen3_5_moe; do
    "$PY" tools/gpu/bench_tp.py decode --model "tests/fixtures/$m" --split ep --tp 1,2 \
      --same-device --batch 2 --steps 8 --prompt-len 24 --min-cosine 0.999 \
      --out "$RESULTS/ep_1gpu_$m.json" || rc=1
  done
  "$PY" tools/make_fixtures.py --config qwen3-30b-a3b-8l --out "$cfg" --config-only || return 1
  "$PY" tools/gpu/bench_tp.py decode --model "$cfg" --split ep,tp+ep --synthetic-seed 0 \
    --tp 1,2 --same-device --batch 2 --steps 8 --prompt-len 24 --min-cosine 0.999 \
    --out "$RESULTS/ep_1gpu_qwen3-30b-a3b-8l.json" || rc=1
  return $rc
}
# Two GPUs: expert parallelism on the full Qwen3-30B-A3B config from synthetic weights
# (61 GB: one GPU holds it all), batch 1 and ATLAS_EP_BATCH (default 32) decode: one GPU,
# then EP=2 (each rank half of every layer's experts, the rest replicated), then TP=2 with
# EP=2 (attention and LM head split too): tok/s, speedup, greedy tokens and prefill-logit
# cosine against one GPU (exit 1 below 0.999).
stage_ep_bench() {
  two_gpus || return 0
  local cfg="$CKPT/qwen3-30b-a3b-synthetic" rc=0 b
  "$PY" tools/make_fixtures.py --config qwen3-30b-a3b --out "$cfg" --config-only || return 1
  for b in 1 "${ATLAS_EP_BATCH:-32}"; do
    "$PY" tools/gpu/bench_tp.py decode --model "$cfg" --split ep,tp+ep --synthetic-seed 0 \
      --tp 1,2 --batch "$b" --steps 64 --min-cosine 0.999 \
      --out "$RESULTS/ep_bench_qwen3-30b-a3b_b$b.json" || rc=1
  done
  return $rc
}

# Speculative decoding on the 8B config: verification step cost for K = 1..4 against a plain
# step, and tok/s with the oracle drafter at per-token acceptance 0.7 (2.53 tokens per K = 3
# verification) at batch 1/8/32, with K = 3 and with the draft policy (K per step from the
# step-cost table). Batch 1's verifications run the verification kernel (ATLAS_DECODE_ATTN_VERIFY,
# not row-invariant against the plain decode kernel): the reference is then the output of
# all-rejected K = 3 verification steps ("=ref" 1.00, "=plain" may be lower), measured
# acceptance ~0.70 (bar: K = 3 >= 2x plain). A runner without speculation is measured first
# ("vs fused": against its plain tok/s, with the single-row norm fusions the speculating
# runner switches off).
stage_spec_bench() {
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/bench_spec.py --model "$CKPT/qwen3-8b" --batches 1,8,32 --max-k 4 --k 3 \
    --accept 0.7 --steps 20 --new 192 --out "$RESULTS/bench_spec_qwen3-8b.json"
}

# Structured output on the 8B config: greedy decode tok/s with every sequence under a grammar
# mask (a JSON-lines regex over the real Qwen3 vocabulary) against plain decoding, batch 1
# and 32 (bar: constrained >= 90%). The Qwen3 tokenizer.json cannot be fetched here (no
# network): carried as build/tokenizers/qwen3/tokenizer.json it is used, else a synthetic
# vocabulary of the same 151,936 rows stands in (the JSON says which).
stage_grammar_bench() {
  make_checkpoint qwen3-8b weights || return 1
  local tok="$REPO/build/tokenizers/qwen3/tokenizer.json" vocab=(--vocab synthetic)
  [ -f "$tok" ] && vocab=(--vocab qwen3 --tokenizer "$tok")
  "$PY" tools/gpu/bench_grammar_decode.py --model "$CKPT/qwen3-8b" --batches 1,32 --steps 64 --warmup 32 \
    "${vocab[@]}" --out "$RESULTS/bench_grammar_qwen3-8b.json"
}

# Prefix cache on the 8B config: an 8,192-token shared prefix + a 64-token new turn, warm
# TTFT against cold (bar: warm <= 10% of cold).
stage_prefix_bench() {
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/bench_prefix.py --model "$CKPT/qwen3-8b" --prefix 8192 --turn 64 \
    --out "$RESULTS/bench_prefix_qwen3-8b.json"
}

# The 8-layer hybrid Qwen3.5 config (with its MTP head, see below): the same turn, whose
# hits restore recurrent-state snapshots (prints their counters).
stage_prefix_bench_hybrid() {
  hybrid_mtp_checkpoint || return 1
  "$PY" tools/gpu/bench_prefix.py --model "$CKPT/qwen3_5-9b-8l" --prefix 8192 --turn 64 \
    --out "$RESULTS/bench_prefix_qwen3_5-9b-8l.json"
}

# qwen3_5-9b-8l with the MTP head its config now declares (a checkpoint made before that
# is made again).
hybrid_mtp_checkpoint() {
  local dir="$CKPT/qwen3_5-9b-8l"
  if [ -f "$dir/config.json" ] && ! grep -q mtp_num_hidden_layers "$dir/config.json"; then
    rm -rf "$dir"
  fi
  make_checkpoint qwen3_5-9b-8l weights
}

# Speculation on the 8-layer hybrid Qwen3.5 config (verification in captured graphs, the
# Gated-DeltaNet layers token by token through the decode kernel, each token's state in a
# slot of its own): step cost for K = 1..4 and oracle tok/s at batch 1 and 8 (batch 1, K = 3
# is row-invariant: "exact" yes, =plain 1.00, acceptance ~ the requested rate), then the
# checkpoint's (random) MTP head as the drafter: its acceptance and tok/s.
stage_spec_bench_hybrid() {
  hybrid_mtp_checkpoint || return 1
  "$PY" tools/gpu/bench_spec.py --model "$CKPT/qwen3_5-9b-8l" --batches 1,8 --max-k 4 --k 3 \
    --accept 0.7 --steps 20 --new 128 --mtp \
    --out "$RESULTS/bench_spec_qwen3_5-9b-8l.json"
}

# Issue 12: the Qwen3-8B-config random checkpoint quantized by `atlas models quantize` to
# FP8-block and NVFP4, each checked against its dequantized bf16 twin (every step's logits,
# tools/gpu/quant_parity.py), then decode (batches 1/8/32/64) and prefill tok/s with weight
# bytes and the copy-bandwidth fraction for bf16, FP8-block and NVFP4 in the same run.
# Targets (batch 1): FP8-block >= 1.75x and NVFP4 >= 2.6x the bf16 tok/s.
stage_quant_bench() {
  local rc=0 fmt q name
  make_checkpoint qwen3-8b weights || return 1
  for fmt in fp8-block nvfp4; do
    q="$CKPT/qwen3-8b-$fmt"
    if [ ! -f "$q/config.json" ]; then
      rm -rf "$q"
      "$PY" -m atlas_cli.main models quantize "$CKPT/qwen3-8b" "$q" --to "$fmt" \
        2>"$LOGS/quantize_$fmt.log" || { echo "quantize $fmt failed"; rc=1; continue; }
      tail -n 1 "$LOGS/quantize_$fmt.log"
    fi
    rm -rf "$q-dequantized"
    "$PY" -c 'import sys; from atlas.runtime.dequantize import dequantize_checkpoint as d
print(d(sys.argv[1], sys.argv[2]), "weights dequantized")' "$q" "$q-dequantized" || rc=1
    "$PY" tools/gpu/quant_parity.py --quantized "$q" --reference "$q-dequantized" \
      --out "$RESULTS/quant_parity_$fmt.json" || rc=1
    rm -rf "$q-dequantized"  # 16 GB of disk
  done
  for name in qwen3-8b qwen3-8b-fp8-block qwen3-8b-nvfp4; do
    [ -f "$CKPT/$name/config.json" ] || continue
    "$PY" tools/gpu/bench_decode.py --model "$CKPT/$name" --hf none --batches 1,8,32,64 \
      --out "$RESULTS/bench_decode_$name.json" || rc=1
  done
  return $rc
}

# Qwen3-30B-A3B full size from synthetic weights only (no 8-layer checkpoint, no transformers,
# no profile): the quick re-measure of the MoE decode after a kernel change.
stage_moe_full() {
  "$PY" tools/gpu/bench_moe.py --config qwen3-30b-a3b --batches 1,8,32,64 --prefill 2048 \
    --hf none --out "$RESULTS/bench_moe_full.json"
}

# One quantized Qwen3-8B (QUANT_FORMAT: fp8-block, the default, or nvfp4): quantize, decode
# tok/s (batches 1/8/32) and the per-kernel profile of a batch-1 step, to find where a
# quantized step spends its time (quicker than quant_bench). A/B at batch 1: the tensor-core
# GEMV's shared-memory ring kernel (ATLAS_QUANT_DIRECT=0) instead of its register-fed twin.
# QUANT_LM_HEAD=1: the LM head quantized too (`quantize --lm-head`, checkpoint *-lmhead).
stage_quant_profile() {
  local fmt="${QUANT_FORMAT:-fp8-block}" rc=0 flags=() name
  name="qwen3-8b-$fmt"
  if [ "${QUANT_LM_HEAD:-0}" = 1 ]; then flags=(--lm-head); name="$name-lmhead"; fi
  local q="$CKPT/$name"
  make_checkpoint qwen3-8b weights || return 1
  if [ ! -f "$q/config.json" ]; then
    rm -rf "$q"
    "$PY" -m atlas_cli.main models quantize "$CKPT/qwen3-8b" "$q" --to "$fmt" "${flags[@]}" \
      2>"$LOGS/quantize_$name.log" || return 1
  fi
  "$PY" tools/gpu/bench_decode.py --model "$q" --hf none --batches 1,8,32 \
    --out "$RESULTS/bench_decode_$name.json" || rc=1
  ATLAS_QUANT_DIRECT=0 "$PY" tools/gpu/bench_decode.py --model "$q" --hf none --batches 1 \
    --out "$RESULTS/bench_decode_${name}_ring.json" || rc=1
  # PDL off: per-kernel times that add up (with PDL each record includes its wait)
  ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$q" \
    --out "$RESULTS/profile_decode_$name.json" || rc=1
  return $rc
}

# The same for NVFP4 (QUANT_FORMAT=nvfp4 of quant_profile).
stage_quant_profile_nvfp4() {
  QUANT_FORMAT=nvfp4 stage_quant_profile
}

# Both formats with the LM head quantized too: decode tok/s at batches 1/8/32 (the bytes a
# step reads drop by 0.62 GB FP8 / 0.89 GB NVFP4). Parity of the quantized head: the host
# tests and check_kernels (gemv_*_f32 cases); quant_bench has the model-level parity.
stage_quant_lm_head() {
  local rc=0 fmt q
  make_checkpoint qwen3-8b weights || return 1
  for fmt in fp8-block nvfp4; do
    q="$CKPT/qwen3-8b-$fmt-lmhead"
    if [ ! -f "$q/config.json" ]; then
      rm -rf "$q"
      "$PY" -m atlas_cli.main models quantize "$CKPT/qwen3-8b" "$q" --to "$fmt" --lm-head \
        2>"$LOGS/quantize_$fmt-lmhead.log" || { rc=1; continue; }
    fi
    "$PY" tools/gpu/bench_decode.py --model "$q" --hf none --batches 1,8,32 \
      --out "$RESULTS/bench_decode_qwen3-8b-$fmt-lmhead.json" || rc=1
  done
  return $rc
}

# MoE kernels (issue 10): every MoE check case (on every hopper set, the qwen3-30b-a3b leaf's
# compile-time shapes included), then the MoE rows of the kernel table: on the baseline set
# with the grouped GEMMs on wgmma (the default where moe_grouped_sm90 loads), on mma.sync
# (ATLAS_MOE_SM90=0), and the Qwen3-30B-A3B rows on its own leaf (the specialization's gain).
stage_moe_kernels() {
  local rc=0
  "$PY" tools/gpu/check_kernels.py -k moe_ --out "$RESULTS/gpu_check_moe-$STAMP.json" || rc=1
  "$PY" tools/gpu/bench_kernels.py -k moe --out-dir "$RESULTS" || rc=1
  ATLAS_MOE_SM90=0 "$PY" tools/gpu/bench_kernels.py -k moe_grouped \
    --out-dir "$RESULTS/moe_mma_sync" || rc=1
  "$PY" tools/gpu/bench_kernels.py --model qwen3-30b-a3b -k qwen3-30b-a3b \
    --out-dir "$RESULTS/moe_leaf" || rc=1
  return $rc
}

# MoE models (issue 10): the tiny MoE fixtures, then the 8-layer Qwen3-30B-A3B config (every
# per-layer shape of the published one) against transformers, with goldens and
# transformers-vs-transformers controls made on this GPU.
stage_moe_parity() {
  local rc=0
  "$PY" tools/gpu/model_parity.py --backend cuda --model tests/fixtures/tiny-qwen3-moe \
    --model tests/fixtures/tiny-qwen2-moe --out "$RESULTS/parity_tiny_moe.json" || rc=1
  make_checkpoint qwen3-30b-a3b-8l || return 1
  "$PY" tools/gpu/model_parity.py --backend cuda --model "$CKPT/qwen3-30b-a3b-8l" --tail \
    --out "$RESULTS/parity_qwen3-30b-a3b-8l.json" || rc=1
  # each sparse layer of the same prefill against the references, from the device's inputs
  "$PY" tools/gpu/moe_layer_check.py --model "$CKPT/qwen3-30b-a3b-8l" \
    --out "$RESULTS/moe_layer_check_qwen3-30b-a3b-8l.json" || rc=1
  return $rc
}

# The same 8-layer checkpoint and golden on the host backend (every kernel its numpy
# reference, on this machine's CPU: a few minutes, ~50 GB of RAM): where its cosine vs the
# float32 forward is transformers-like and the cuda one is not, a device kernel is wrong.
stage_moe_host_parity() {
  make_checkpoint qwen3-30b-a3b-8l || return 1
  ATLAS_HOST_MEMORY_GIB=64 "$PY" tools/gpu/model_parity.py --backend host \
    --model "$CKPT/qwen3-30b-a3b-8l" --tail \
    --out "$RESULTS/parity_qwen3-30b-a3b-8l_host.json"
}

# Where the device parts from the host backend on the 8-layer Qwen3-30B-A3B config: the
# residual stream at every sublayer boundary of the golden prefill on both, compared.
stage_layer_diff() {
  local ck="$CKPT/qwen3-30b-a3b-8l" rc=0 b
  make_checkpoint qwen3-30b-a3b-8l || return 1
  for b in cuda transformers transformers-sdpa host; do
    [ "$b" = host ] && export ATLAS_HOST_MEMORY_GIB=64
    "$PY" tools/gpu/layer_diff.py capture --model "$ck" --backend "$b" \
      --out "$RESULTS/layer_diff_$b.npz" || return 1
  done
  unset ATLAS_HOST_MEMORY_GIB
  for b in "host cuda" "transformers cuda" "transformers host" "transformers transformers-sdpa"; do
    set -- $b
    echo "== $1 vs $2"
    "$PY" tools/gpu/layer_diff.py compare "$RESULTS/layer_diff_$1.npz" \
      "$RESULTS/layer_diff_$2.npz" || rc=1
  done | tee "$RESULTS/layer_diff_qwen3-30b-a3b-8l.txt"
  rm -f "$RESULTS"/layer_diff_*.npz
  return $rc
}

# Qwen3-30B-A3B at full size from synthetic weights (61 GB in bf16 does not fit the disk):
# batch 1/8/32/64 decode, 2,048-token prefill, the bandwidth fraction over the bytes read per
# token; Atlas vs transformers (ATLAS_MOE_HF, default eager,compiled) on the 8-layer
# checkpoint; the per-kernel breakdown of a batch-1 decode step.
stage_moe_bench() {
  local rc=0 cfg="$CKPT/qwen3-30b-a3b-synthetic"
  make_checkpoint qwen3-30b-a3b-8l weights || return 1
  "$PY" tools/gpu/bench_moe.py --small-model "$CKPT/qwen3-30b-a3b-8l" \
    --hf "${ATLAS_MOE_HF:-eager,compiled}" --out "$RESULTS/bench_moe.json" || rc=1
  "$PY" tools/make_fixtures.py --config qwen3-30b-a3b --out "$cfg" --config-only || return 1
  "$PY" tools/gpu/profile_decode.py --model "$cfg" --synthetic-seed 0 \
    --out "$RESULTS/profile_decode_qwen3-30b-a3b.json" || rc=1
  return $rc
}

# Per-kernel decode profiles (batch 1, graph replay) with PDL on and off (off: each row is
# the kernel's own time, not overlapped with its neighbours' waits): Qwen3-0.6B, and the
# full-size Qwen3-30B-A3B and Qwen3.5-35B-A3B from synthetic weights.
stage_decode_profiles() {
  local rc=0 name cfg pdl
  make_checkpoint qwen3-0.6b weights || return 1
  for pdl in 1 0; do
    ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-0.6b" \
      --out "$RESULTS/profile_decode_qwen3-0.6b_pdl$pdl.json" || rc=1
  done
  for name in qwen3-30b-a3b qwen3_5-35b-a3b; do
    cfg="$CKPT/$name-synthetic"
    "$PY" tools/make_fixtures.py --config "$name" --out "$cfg" --config-only || return 1
    for pdl in 1 0; do
      ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py --model "$cfg" --synthetic-seed 0 \
        --out "$RESULTS/profile_decode_${name}_pdl$pdl.json" || rc=1
    done
  done
  return $rc
}

# The families added in sessions 31-32 on the GPU: bias_add's and rmsnorm's (the pitched
# entry) check cases, parity with transformers at their published per-layer shapes
# (Qwen2.5-7B and Mistral-7B 8 layers, Mixtral-8x7B 4, MiniMax-M2 2, GLM-4.5-Air 4: each checkpoint removed
# after its check), then batch-1 profiles of the published configs from synthetic weights
# (issue 15's bar of 75% of copy for every dense shape; Mixtral-8x7B's 22.5 GB a token on the
# MoE kernels; MiniMax-M2's per-layer time from 8 of its 62 layers, 460 GB in bf16).
stage_families() {
  local rc=0 name cfg
  "$PY" tools/gpu/check_kernels.py -m bias_add --out "$RESULTS/check_bias_add.json" || rc=1
  "$PY" tools/gpu/check_kernels.py -m rmsnorm --out "$RESULTS/check_rmsnorm.json" || rc=1
  for name in qwen2.5-7b-8l mistral-7b-v0.3-8l mixtral-8x7b-4l minimax-m2-2l glm-4.5-air-4l; do
    make_checkpoint "$name" || { rc=1; continue; }
    "$PY" tools/gpu/model_parity.py --backend cuda --model "$CKPT/$name" --tail \
      --out "$RESULTS/parity_$name.json" || rc=1
    rm -rf "${CKPT:?}/$name"
  done
  for name in qwen2.5-0.5b qwen2.5-1.5b qwen2.5-7b mistral-7b-v0.3 mixtral-8x7b minimax-m2-8l; do
    cfg="$CKPT/$name-synthetic"
    "$PY" tools/make_fixtures.py --config "$name" --out "$cfg" --config-only || return 1
    "$PY" tools/gpu/profile_decode.py --model "$cfg" --synthetic-seed 0 \
      --out "$RESULTS/profile_decode_$name.json" || rc=1
  done
  return $rc
}

# The decode profiles the per-kernel work needs beyond decode_profiles: Qwen3-8B with PDL on
# and off, and Qwen3.5-35B-A3B at batch 8 with PDL off.
stage_profiles_extra() {
  local rc=0 pdl cfg="$CKPT/qwen3_5-35b-a3b-synthetic"
  make_checkpoint qwen3-8b weights || return 1
  for pdl in 1 0; do
    ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" \
      --out "$RESULTS/profile_decode_qwen3-8b_pdl$pdl.json" || rc=1
  done
  "$PY" tools/make_fixtures.py --config qwen3_5-35b-a3b --out "$cfg" --config-only || return 1
  ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$cfg" --synthetic-seed 0 --batch 8 \
    --out "$RESULTS/profile_decode_qwen3_5-35b-a3b_b8_pdl0.json" || rc=1
  return $rc
}

# Issue 15's async scheduling: decode wall per step with it off and on beside the GPU time
# (profile_decode prints both: wall - GPU is the host time on the critical path), Qwen3-0.6B
# and Qwen3-8B at batch 1 and the 8B at 64 rows; the decode bench at batches 1/8/32 with it
# on (the default) and off. The 64-stream throughput with default flags is `throughput`.
stage_async_scheduling() {
  local name rc=0
  for name in qwen3-0.6b qwen3-8b; do
    make_checkpoint "$name" weights || return 1
    "$PY" tools/gpu/profile_decode.py --model "$CKPT/$name" \
      --out "$RESULTS/profile_async_$name.json" || rc=1
    "$PY" tools/gpu/bench_decode.py --model "$CKPT/$name" --hf none --new 128 --prefill 512 \
      --out "$RESULTS/bench_decode_async_$name.json" || rc=1
    "$PY" tools/gpu/bench_decode.py --model "$CKPT/$name" --hf none --new 128 --prefill 512 \
      --no-async-scheduling --out "$RESULTS/bench_decode_sync_$name.json" || rc=1
  done
  "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" --batch 64 \
    --out "$RESULTS/profile_async_qwen3-8b_b64.json" || rc=1
  return $rc
}

# Issue 12, the quantized decode GEMV alone (a couple of minutes): the GPU check cases of the
# register-fed kernel (every gemv_qd_* case vs float64: both formats, batch 1..8, the NVFP4
# bit-move decode under every E4M3 scale code, its byte-table twins), then the kernel-table
# rows of Qwen3-8B's projections at batch 1 (qkv 4096->6144, o 4096->4096, gate_up
# 4096->24576 plain and ending with the SwiGLU, down 12288->4096), FP8-block and NVFP4, each
# with GB/s and % of copy; A/B rows: `ring` (the shared-memory ring kernel) and `nvfp4 lut`
# (the byte-table decode, ATLAS_QUANT_E2M1_LUT=1).
stage_quant_kernels() {
  local rc=0 p f sel=()
  "$PY" tools/gpu/check_kernels.py -k gemv_qd --out "$RESULTS/gpu_check_quant-$STAMP.json" || rc=1
  for p in qkv o_proj gate_up down gate_up+swiglu; do
    for f in fp8-block nvfp4; do sel+=(-k "qwen3-8b $p b1 $f"); done
  done
  "$PY" tools/gpu/bench_kernels.py "${sel[@]}" --out-dir "$RESULTS" || rc=1
  return $rc
}

stage_startup() {
  "$PY" tools/gpu/bench_startup.py --target hopper/common/bf16 --out "$RESULTS/startup.json"
}

# Decode attention latency: the attention kernels' decode, rope-fused and row-invariance
# check cases, the kernel table's latency rows (512 and 2,048 keys, batch 1 and 8, the head
# geometries of Qwen3-0.6B/8B/30B-A3B rope-fused and Qwen3.5-35B-A3B at D 256) and the
# rope-fused rows, and Qwen3-0.6B's batch-1 decode profile with PDL on (decode_attn_rope's
# us/call in the model, where its pre-wait prologue overlaps the qkv projection), then the
# same profile with ATLAS_DECODE_ATTN_LATENCY=0 (the session-start decode path: the A/B).
stage_decode_attn() {
  local rc=0
  "$PY" tools/gpu/check_kernels.py -k decode_rope -k "decode D" -k "row invariance verify" \
    --out "$RESULTS/gpu_check_decode_attn-$STAMP.json" || rc=1
  "$PY" tools/gpu/bench_kernels.py -k latency -k "+rope" --out-dir "$RESULTS" || rc=1
  make_checkpoint qwen3-0.6b weights || return 1
  "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-0.6b" \
    --out "$RESULTS/profile_decode_attn_qwen3-0.6b.json" || rc=1
  ATLAS_DECODE_ATTN_LATENCY=0 "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-0.6b" \
    --out "$RESULTS/profile_decode_attn_qwen3-0.6b_latency0.json" || rc=1
  return $rc
}

# Issue 15's 64-stream decode step: Qwen3-8B per-kernel profiles at 64 rows and a 1,536-token
# context (the throughput suite's average: 1,024 prompt + half of 1,024 generated), PDL on
# (what serving runs) and off (each kernel's own time: the rows add up to the step).
stage_throughput_b64_profile() {
  local pdl rc=0
  make_checkpoint qwen3-8b weights || return 1
  for pdl in 1 0; do
    ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" --batch 64 \
      --context 1536 --out "$RESULTS/profile_decode_qwen3-8b_b64_c1536_pdl$pdl.json" || rc=1
  done
  return $rc
}

# What the serve default --max-mixed-step-tokens (1,024) costs decoding streams: Qwen3-8B with 64
# streams decoding at ~1,024 tokens while 4,000-token prompts prefill beside them in steps of
# 512..2,048 tokens; the mixed step's wall is the inter-token latency it causes (target <= 40
# ms at p99 in the throughput suite) and (budget - 64) / (mixed - decode) the prompt rate.
stage_throughput_mixed_step() {
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/bench_mixed_step.py --model "$CKPT/qwen3-8b" --batch 64 --context 1024 \
    --out "$RESULTS/bench_mixed_step_qwen3-8b_b64.json"
}

# The skinny decode GEMM's two-warpgroup blocks (128 weight rows sharing each x tile: 1.5x the
# weight bytes through L2 at 64 rows instead of 2x) against the default one-warpgroup blocks
# at issue 15's 64 rows: Qwen3-8B's five kernel-table rows both ways (labels "... b64" and
# "... b64 wide"; then qkv / o_proj / gate_up / down again at each forced cluster split 1, 2,
# 4, 8 into results/splitS: the data of matmul_decode.decode_split's rule), the decode bench
# at batch 64 with ATLAS_DECODE_GEMM_WIDE=1 vs default, and the b64 profile with it (PDL off,
# beside throughput_b64_profile's). ~4 minutes.
stage_decode_gemm_wide_ab() {
  local rc=0 name sel=()
  make_checkpoint qwen3-8b weights || return 1
  for name in qkv o_proj gate_up down lm_head; do sel+=(-k "decode_gemm_sm90 qwen3-8b $name b64"); done
  "$PY" tools/gpu/bench_kernels.py --out-dir "$RESULTS" "${sel[@]}" || rc=1
  # the split rule's data: the four layer products at every cluster split, both widths
  local split
  for split in 1 2 4 8; do
    ATLAS_DECODE_GEMM_SPLIT=$split "$PY" tools/gpu/bench_kernels.py \
      --out-dir "$RESULTS/split$split" "${sel[@]:0:8}" || rc=1
  done
  "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none --batches 64 \
    --out "$RESULTS/bench_decode_qwen3-8b_b64_narrow.json" || rc=1
  ATLAS_DECODE_GEMM_WIDE=1 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none \
    --batches 64 --out "$RESULTS/bench_decode_qwen3-8b_b64_wide.json" || rc=1
  ATLAS_PDL=0 ATLAS_DECODE_GEMM_WIDE=1 "$PY" tools/gpu/profile_decode.py \
    --model "$CKPT/qwen3-8b" --batch 64 --context 1536 \
    --out "$RESULTS/profile_decode_qwen3-8b_b64_c1536_pdl0_wide.json" || rc=1
  return $rc
}

# The session's headline decode numbers in one short stage (a mid-session check): Qwen3-0.6B
# batch 1, Qwen3-8B batch 1 and 64, both full-size MoE models (synthetic weights) at batch 1
# and 8, with their 2,048-token prefill; transformers baselines are in the long stages.
stage_headline() {
  local rc=0 name
  for name in qwen3-0.6b qwen3-8b; do make_checkpoint "$name" weights || return 1; done
  "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-0.6b" --hf none --batches 1 \
    --out "$RESULTS/headline_qwen3-0.6b.json" || rc=1
  "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none --batches 1,64 \
    --out "$RESULTS/headline_qwen3-8b.json" || rc=1
  for name in qwen3-30b-a3b qwen3_5-35b-a3b; do
    "$PY" tools/gpu/bench_moe.py --config "$name" --batches 1,8 --prefill 2048 --hf none \
      --out "$RESULTS/headline_$name.json" || rc=1
  done
  return $rc
}

# The batch-1 paths new this session against the session-start ones, in one short stage
# (each row a separate process, same tree; labels name the switches, `default` is the tree as
# committed): the session-start decode attention (ATLAS_DECODE_ATTN_LATENCY=0), the MoE
# bulk-copy rings and router-fused norm (opt-in), and the flagship at its defaults.
stage_batch1_ab() {
  local rc=0 name
  for name in qwen3-0.6b qwen3-8b; do make_checkpoint "$name" weights || return 1; done
  ab_decode() {  # label model batches [env...]
    local label="$1" model="$2" batches="$3"; shift 3
    env "$@" "$PY" tools/gpu/bench_decode.py --model "$CKPT/$model" --hf none \
      --batches "$batches" --out "$RESULTS/ab_${model}_$label.json" || rc=1
  }
  ab_moe() {  # label config batches [env...]
    local label="$1" config="$2" batches="$3"; shift 3
    env "$@" "$PY" tools/gpu/bench_moe.py --config "$config" --batches "$batches" \
      --prefill 2048 --hf none --out "$RESULTS/ab_${config}_$label.json" || rc=1
  }
  ab_decode default qwen3-0.6b 1
  ab_decode attn0 qwen3-0.6b 1 ATLAS_DECODE_ATTN_LATENCY=0
  ab_decode default qwen3-8b 1,64
  ab_decode attn0 qwen3-8b 1 ATLAS_DECODE_ATTN_LATENCY=0
  ab_moe default qwen3-30b-a3b 1,8
  ab_moe attn0 qwen3-30b-a3b 1 ATLAS_DECODE_ATTN_LATENCY=0
  ab_moe default qwen3_5-35b-a3b 1,8
  return $rc
}

# helper thru's short final A/B (~2 minutes): the decode GEMM's and the token-mask kernel's
# check cases (the two-warpgroup ones included), then Qwen3-8B decode at batch 64 with
# ATLAS_DECODE_GEMM_WIDE=1 (compare with the default's b64 in `headline` / `decode_bench`) and
# its five b64 kernel-table rows both ways.
stage_thru_ab() {
  local rc=0 name sel=()
  "$PY" tools/gpu/check_kernels.py -k gemm_decode_sm90 -k token_bitmask \
    --out "$RESULTS/gpu_check_thru.json" || rc=1
  make_checkpoint qwen3-8b weights || return 1
  ATLAS_DECODE_GEMM_WIDE=1 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b" --hf none \
    --batches 64 --out "$RESULTS/bench_decode_qwen3-8b_b64_wide.json" || rc=1
  for name in qkv o_proj gate_up down lm_head; do sel+=(-k "decode_gemm_sm90 qwen3-8b $name b64"); done
  "$PY" tools/gpu/bench_kernels.py --out-dir "$RESULTS" "${sel[@]}" || rc=1
  return $rc
}

# helper moe (session 7): the decode MoE expert kernels at batch 1 and 8 (~3 minutes).
# Qwen3-30B-A3B and Qwen3.5-35B-A3B full size from synthetic weights: decode tok/s at batch 1
# and 8 with the defaults (_new: gate/up on the GEMV-shaped kernel, down on equal blocks of
# one wave) and with both switched back to the session-6 launches (_old:
# ATLAS_MOE_GATE_UP_GEMV=0 ATLAS_MOE_DOWN_WAVE=0), Qwen3-30B-A3B batch 8 with the
# GEMV-shaped gate/up at every batch (ATLAS_MOE_GATE_UP_GEMV_MAX_M=8, compare with _new's b8);
# the batch-1 per-kernel profiles with PDL off (each row the kernel's own time) of both
# models, new and old (35B: new only), and Qwen3-30B-A3B's with PDL on, new and old.
stage_moe_b1_profile() {
  local rc=0 name cfg tag
  local -a old=(ATLAS_MOE_GATE_UP_GEMV=0 ATLAS_MOE_DOWN_WAVE=0)
  for name in qwen3-30b-a3b qwen3_5-35b-a3b; do
    cfg="$CKPT/$name-synthetic"
    "$PY" tools/make_fixtures.py --config "$name" --out "$cfg" --config-only || return 1
    for tag in new old; do
      if [ "$tag" = old ]; then set -- "${old[@]}"; else set --; fi
      env "$@" "$PY" tools/gpu/bench_moe.py --config "$name" --batches 1,8 --prompt 512 \
        --new 128 --prefill 512 --hf none --out "$RESULTS/moe_b1_${name}_$tag.json" || rc=1
      if [ "$tag" = new ] || [ "$name" = qwen3-30b-a3b ]; then
        env "$@" ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$cfg" \
          --synthetic-seed 0 --out "$RESULTS/moe_b1_profile_${name}_pdl0_$tag.json" || rc=1
      fi
    done
  done
  # PDL on (each row includes its wait: what overlaps), new and old
  cfg="$CKPT/qwen3-30b-a3b-synthetic"
  for tag in new old; do
    if [ "$tag" = old ]; then set -- "${old[@]}"; else set --; fi
    env "$@" ATLAS_PDL=1 "$PY" tools/gpu/profile_decode.py --model "$cfg" --synthetic-seed 0 \
      --out "$RESULTS/moe_b1_profile_qwen3-30b-a3b_pdl1_$tag.json" || rc=1
  done
  ATLAS_MOE_GATE_UP_GEMV_MAX_M=8 "$PY" tools/gpu/bench_moe.py --config qwen3-30b-a3b \
    --batches 8 --prompt 512 --new 128 --prefill 512 --hf none \
    --out "$RESULTS/moe_b1_qwen3-30b-a3b_gemv_max_m8.json" || rc=1
  return $rc
}

# Issue 12 (sessions 7-8): the quantized decode GEMV's variants, A/B in one run: its GPU check
# cases (gemv_qd_*: the default loops, each format's other loop, the staged variant; all
# passed in gpu19), the kernel-table rows of Qwen3-8B's qkv / o / gate_up / down / gate_up +
# SwiGLU / quantized LM head (f32 logits) at batch 1, FP8-block and NVFP4 (GB/s and % of
# copy) on the default (FP8 one block per tile, NVFP4 pipelined), ATLAS_QUANT_STAGED=1
# (staged through shared memory by bulk copies, one block of 16 warps per SM) and
# ATLAS_QUANT_TILE_LOOP=1 (NVFP4 one block per tile too); then Qwen3-8B FP8-block and NVFP4 (`atlas models quantize`: LM head
# quantized, its default) decode at batch 1 and 8 on the default and staged, NVFP4 batch 1 on
# the tile loop.
stage_quant_ab() {
  local rc=0 p f v fmt sel=()
  "$PY" tools/gpu/check_kernels.py -k gemv_qd --out "$RESULTS/gpu_check_quant_ab-$STAMP.json" || rc=1
  for p in qkv o_proj gate_up down gate_up+swiglu lm_head; do
    for f in fp8-block nvfp4; do sel+=(-k "qwen3-8b $p b1 $f"); done
  done
  # (the ring and lut rows the labels also match: other kernels' references)
  "$PY" tools/gpu/bench_kernels.py "${sel[@]}" --out-dir "$RESULTS/quant_ab_default" || rc=1
  ATLAS_QUANT_STAGED=1 "$PY" tools/gpu/bench_kernels.py "${sel[@]}" \
    --out-dir "$RESULTS/quant_ab_staged" || rc=1
  ATLAS_QUANT_TILE_LOOP=1 "$PY" tools/gpu/bench_kernels.py "${sel[@]}" \
    --out-dir "$RESULTS/quant_ab_tile_loop" || rc=1
  for fmt in fp8-block nvfp4; do
    quantized_8b "$fmt" || { rc=1; continue; }
    for v in 0 1; do
      ATLAS_QUANT_STAGED=$v "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b-$fmt" \
        --hf none --batches 1,8 --out "$RESULTS/bench_decode_qwen3-8b-${fmt}_staged$v.json" \
        || rc=1
    done
  done
  ATLAS_QUANT_TILE_LOOP=1 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-8b-nvfp4" \
    --hf none --batches 1 --out "$RESULTS/bench_decode_qwen3-8b-nvfp4_tile_loop.json" || rc=1
  return $rc
}

# Quantized MoE experts (issue 12): the FP8 / NVFP4 expert kernels against their float64
# oracle (moe_decode_quant); the per-kernel batch-1 decode profile (PDL off) of the flagship
# Qwen3.5-35B-A3B from NVFP4 synthetic weights as published (experts per expert with the
# shared expert folded in, attention NVFP4; Gated-DeltaNet projections and LM head bf16:
# gpu16 measured it at 351.8 tok/s, no faster than bf16 — which kernels?); then bench_moe.py
# --quant at batch 1 and 8 (bytes per token, copy-bandwidth fraction): NVFP4 with those
# projections and the LM head quantized too (--linear-attn --lm-head: 1.8 instead of 4.0 GB
# a token), FP8-block, and NVFP4 as published. Issue 12's target: NVFP4 b1 >= 900 tok/s.
stage_moe_quant_bench() {
  local rc=0 cfg="$CKPT/qwen3_5-35b-a3b-nvfp4-synthetic"
  "$PY" tools/gpu/check_kernels.py -k moe_decode_quant -k moe_dequant_nvfp4 \
    --out "$RESULTS/gpu_check_moe_quant-$STAMP.json" || rc=1
  rm -rf "$cfg"
  "$PY" -c "import sys; sys.path[:0] = ['tools', 'tools/gpu']; from pathlib import Path; \
from bench_moe import synthetic_model_dir; \
print(synthetic_model_dir('qwen3_5-35b-a3b', Path(sys.argv[1]), 'nvfp4'))" "$cfg" || return 1
  ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$cfg/qwen3_5-35b-a3b" --synthetic-seed 0 \
    --out "$RESULTS/profile_decode_qwen3_5-35b-a3b_nvfp4_pdl0.json" || rc=1
  local args=(--config qwen3_5-35b-a3b --batches 1,8 --prompt 512 --new 64 --prefill 512
              --target-tok-s 900 --hf none)
  "$PY" tools/gpu/bench_moe.py "${args[@]}" --quant nvfp4 --linear-attn --lm-head \
    --out "$RESULTS/bench_flagship_nvfp4_all.json" || rc=1
  "$PY" tools/gpu/bench_moe.py "${args[@]}" --quant fp8-block \
    --out "$RESULTS/bench_flagship_fp8_block.json" || rc=1
  "$PY" tools/gpu/bench_moe.py "${args[@]}" --quant nvfp4 \
    --out "$RESULTS/bench_flagship_nvfp4.json" || rc=1
  return $rc
}

# helper thru's issue-15 stage (session 7, ~3.5-4 minutes): Qwen3-8B decode at 64 rows and a
# 1,536-token context (the throughput suite's average), GPU ms per step, async wall (64 / it =
# tok/s) and the per-kernel profile, with the tree's defaults (PDL on, then PDL off: each
# kernel's own time, the rows add up) and with each session-7 switch turned back
# (ATLAS_DECODE_GEMM_SWIGLU=0: gate_up + silu_mul; ATLAS_DECODE_GEMM_L2_TILES=0: no L2
# prefetch before the decode GEMM's PDL wait), and with the decode GEMM's two-warpgroup blocks
# (ATLAS_DECODE_GEMM_WIDE=1: 112 KB of weights in flight per SM instead of 64, x re-read 1.5x
# instead of 2x); right after the default profile, the contest-shaped throughput suite at 64
# streams only (default server flags: TTFT / ITL p50 and p99).
stage_thru_b64() {
  local rc=0
  make_checkpoint qwen3-8b weights || return 1
  thru_profile() {  # label [env...]
    local label="$1"; shift
    env "$@" "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" --batch 64 \
      --context 1536 --out "$RESULTS/thru_b64_c1536_$label.json" || rc=1
  }
  # most wanted first (a call's time limit may stop the stage part way)
  thru_profile default
  ATLAS_THROUGHPUT_LEVELS=64 stage_throughput || rc=1
  thru_profile swiglu0 ATLAS_DECODE_GEMM_SWIGLU=0
  thru_profile l2tiles0 ATLAS_DECODE_GEMM_L2_TILES=0
  thru_profile pdl0 ATLAS_PDL=0
  thru_profile wide1 ATLAS_DECODE_GEMM_WIDE=1
  # one line per variant: GPU ms per step and async tok/s
  "$PY" - "$RESULTS"/thru_b64_c1536_*.json <<'EOF' || rc=1
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    print(f"{path.rsplit('_', 1)[-1][:-5]:>9}: GPU {r['gpu_ms']:.3f} ms/step, async wall "
          f"{r['async_wall_ms']:.3f} ms = {r['batch'] * 1e3 / r['async_wall_ms']:,.0f} tok/s")
EOF
  # the scheduler's 64-stream level at this step cost, per mixed-step budget (CPU, seconds)
  local budget
  for budget in 512 768 1024 1536; do
    echo -n "model, mixed-step budget $budget: "
    "$PY" tools/throughput_model.py --profile "$RESULTS/thru_b64_c1536_default.json" \
      --max-mixed-step-tokens "$budget" || rc=1
  done
  return $rc
}

# Decode attention, where its time goes (helper "attn", session 7): the traced twins against
# their references, the phase trace of the real kernels (batch 1 at 64 / 512 / 4,096 keys for
# the four head geometries, alone / behind itself / behind the qkv GEMV under PDL, and the
# batch-64 x 1,536 launch), the batch-1 time-vs-keys line (intercept = fixed latency, slope =
# bandwidth), and the kernel-table rows of the bandwidth regime (Qwen3-8B heads at batch 64 x
# 1,536 keys, plain and rope-fused; batch 8 x 16k / 32k) with GB/s and % of copy vs SDPA,
# then the batch-64 rows again with ATLAS_DECODE_ATTN_AHEAD=0 (the kernels before session 7),
# and the latency rows and b1 curves with ATLAS_DECODE_ATTN_SPLIT_MAJOR=1 against the default.
stage_attn_trace() {
  local rc=0
  "$PY" tools/gpu/check_kernels.py -k traced -k rounds48 -k split_major \
    --out "$RESULTS/gpu_check_attn_trace-$STAMP.json" || rc=1
  "$PY" tools/gpu/trace_decode_attn.py | tee "$RESULTS/attn_trace-$STAMP.txt" || rc=1
  "$PY" tools/gpu/bench_kernels.py -k "b64 hist1536" -k "b32 hist4096" -k "b8 hist16384" \
    -k "b8 hist32768" -k latency --out-dir "$RESULTS" || rc=1
  # the A/B of the unclustered kernels' L2 prefetch ahead of the register loads
  ATLAS_DECODE_ATTN_AHEAD=0 "$PY" tools/gpu/bench_kernels.py -k "b64 hist1536" \
    -k "b32 hist4096" --out-dir "$RESULTS/ahead1" || rc=1
  # the A/B of the clustered kernels' split-major order (batch 1..4): latency rows, b1 curves
  ATLAS_DECODE_ATTN_SPLIT_MAJOR=1 "$PY" tools/gpu/bench_kernels.py -k latency \
    --out-dir "$RESULTS/split_major" || rc=1
  ATLAS_DECODE_ATTN_SPLIT_MAJOR=1 "$PY" tools/gpu/trace_decode_attn.py --curves-only --quick \
    | tee "$RESULTS/attn_curves_split_major-$STAMP.txt" || rc=1
  return $rc
}

# The decode GEMM on TMA tensor maps (helper "gemm64", session 8; gemm_decode_tma, the default
# where the set has it) against its cp.async twin (ATLAS_DECODE_GEMM_TMA=0), ~6 minutes: the
# resident blocks the driver allows each launch shape and split (decode_gemm_occupancy.py),
# every gemm_decode check case (both kernels; the TMA cases also compare the two bit for bit),
# Qwen3-8B's four layer products (+ gate_up ending with the SwiGLU) at 8..256 rows on both
# kernels and both block shapes (labels "... bB", "... bB wide", "... cp.async"; GB/s and %
# of copy vs torch.mm), the b64 rows again at each forced cluster split (results/tma_splitS:
# the split rule's data) and with the rule counting the driver's resident blocks
# (ATLAS_DECODE_GEMM_OCCUPANCY=1, results/tma_occupancy), the tuner's picks against the
# model's per published shape (tune_decode_gemm.py), then Qwen3-8B decode at batch 64
# and its PDL-off per-kernel profile at a 1,536-token context, TMA on and off. Each command
# under a timeout (the kernel traps a ring wait that never ends; this bounds the rest).
stage_decode_gemm_tma() {
  local rc=0 name tma split sel=() b64=()
  timeout 180 "$PY" tools/gpu/decode_gemm_occupancy.py \
    --out "$RESULTS/decode_gemm_occupancy.json" || rc=1
  timeout 180 "$PY" tools/gpu/tune_decode_gemm.py --out "$RESULTS/decode_gemm_tune.json" || rc=1
  timeout 400 "$PY" tools/gpu/check_kernels.py -k gemm_decode \
    --out "$RESULTS/gpu_check_decode_gemm.json" || rc=1
  for name in qkv o_proj gate_up down; do
    sel+=(-k "decode_gemm_sm90 qwen3-8b $name b")
    b64+=(-k "decode_gemm_sm90 qwen3-8b $name b64")
  done
  timeout 400 "$PY" tools/gpu/bench_kernels.py --out-dir "$RESULTS/decode_gemm_tma" \
    "${sel[@]}" || rc=1
  for split in 1 2 4 8; do
    ATLAS_DECODE_GEMM_SPLIT=$split timeout 200 "$PY" tools/gpu/bench_kernels.py \
      --out-dir "$RESULTS/tma_split$split" "${b64[@]}" || rc=1
  done
  ATLAS_DECODE_GEMM_OCCUPANCY=1 timeout 200 "$PY" tools/gpu/bench_kernels.py \
    --out-dir "$RESULTS/tma_occupancy" "${b64[@]}" || rc=1
  make_checkpoint qwen3-8b weights || return 1
  for tma in 1 0; do
    ATLAS_DECODE_GEMM_TMA=$tma timeout 300 "$PY" tools/gpu/bench_decode.py \
      --model "$CKPT/qwen3-8b" --hf none --batches 64 \
      --out "$RESULTS/bench_decode_qwen3-8b_b64_tma$tma.json" || rc=1
    ATLAS_PDL=0 ATLAS_DECODE_GEMM_TMA=$tma timeout 300 "$PY" tools/gpu/profile_decode.py \
      --model "$CKPT/qwen3-8b" --batch 64 --context 1536 \
      --out "$RESULTS/profile_decode_qwen3-8b_b64_c1536_pdl0_tma$tma.json" || rc=1
  done
  return $rc
}

# The persistent batch-1 decode kernel (ATLAS_PERSISTENT_DECODE=1, decode_persistent.cu): its
# check cases (both schedules), tiny-model parity with transformers through it, Qwen3-0.6B
# batch-1 decode default vs persistent (readiness counts) vs persistent with device-wide
# barriers (ATLAS_PERSISTENT_FLAGS=0; bench_decode, same machine, back to back), the
# persistent profile and every block's phase timeline under both schedules. Each command under
# a timeout: a wait that never returns traps after ~2^24 polls, and a hung process never
# hangs the suite.
stage_persistent_ab() {
  local rc=0 label
  make_checkpoint qwen3-0.6b weights || return 1
  timeout 300 "$PY" tools/gpu/check_kernels.py -k persistent \
    --out "$RESULTS/gpu_check_persistent-$STAMP.json" || rc=1
  ATLAS_PERSISTENT_DECODE=1 timeout 180 "$PY" tools/gpu/model_parity.py --backend cuda \
    --model tests/fixtures/tiny-qwen3 --model tests/fixtures/tiny-llama \
    --out "$RESULTS/parity_tiny_persistent.json" || rc=1
  for label in default persistent barriers; do
    env ATLAS_PERSISTENT_DECODE="$([ "$label" = default ] && echo 0 || echo 1)" \
      ATLAS_PERSISTENT_FLAGS="$([ "$label" = barriers ] && echo 0 || echo 1)" \
      timeout 240 "$PY" tools/gpu/bench_decode.py --model "$CKPT/qwen3-0.6b" --hf none \
      --batches 1 --out "$RESULTS/bench_decode_qwen3-0.6b_persistent_$label.json" || rc=1
  done
  ATLAS_PERSISTENT_DECODE=1 timeout 180 "$PY" tools/gpu/profile_decode.py \
    --model "$CKPT/qwen3-0.6b" --out "$RESULTS/profile_decode_qwen3-0.6b_persistent.json" || rc=1
  for label in 1 0; do
    ATLAS_PERSISTENT_FLAGS=$label timeout 180 "$PY" tools/gpu/persistent_trace.py \
      --model "$CKPT/qwen3-0.6b" --out "$RESULTS/persistent_trace_qwen3-0.6b_flags$label.json" \
      || rc=1
  done
  return $rc
}

# The persistent kernel's knobs on Qwen3-0.6B batch 1 (after persistent_ab): fewer blocks
# (cheaper barriers, fewer weight streams; ATLAS_PERSISTENT_BLOCKS), no L2 prefetch of the
# streamed phases (ATLAS_PERSISTENT_PREFETCH_KB=0), fewer / more attention splits a head
# (ATLAS_PERSISTENT_SPLITS; default 8 at 16 q heads).
stage_persistent_sweep() {
  local rc=0 knob
  make_checkpoint qwen3-0.6b weights || return 1
  for knob in ATLAS_PERSISTENT_BLOCKS=66 ATLAS_PERSISTENT_BLOCKS=100 ATLAS_PERSISTENT_STAGE=0 \
      ATLAS_PERSISTENT_PREFETCH_KB=0 ATLAS_PERSISTENT_SPLITS=4 ATLAS_PERSISTENT_SPLITS=16; do
    env ATLAS_PERSISTENT_DECODE=1 "$knob" timeout 240 "$PY" tools/gpu/bench_decode.py \
      --model "$CKPT/qwen3-0.6b" --hf none --batches 1 \
      --out "$RESULTS/bench_decode_qwen3-0.6b_persistent_${knob#ATLAS_PERSISTENT_}.json" || rc=1
  done
  return $rc
}

# Issue 13's verification cost on the 8B config at batch 1 (K = 3 at per-token acceptance 0.7
# emits 2.53 tokens, so 2x plain needs a K = 3 verification <= 1.265x a plain step): one plain
# and one K = 3 verification step profiled per kernel with PDL off (rows add up), side by side
# by kernel family with their extra us, the GPU time of each graph and each step's wall time
# (a verification is synchronous: its wall - GPU is host time on the critical path), with the
# 2..8-row GEMV on the ring kernel (the default) and on the register-tiled one
# (ATLAS_GEMV_RING=0); then bench_spec's step-cost table for K = 1..4 (wall ratios against
# the plain async step).
stage_spec_profile() {
  make_checkpoint qwen3-8b weights || return 1
  local rc=0
  ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" --verify 3 \
    --out "$RESULTS/profile_verify_qwen3-8b_k3_pdl0.json" || rc=1
  ATLAS_PDL=0 ATLAS_GEMV_RING=0 "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" \
    --verify 3 --out "$RESULTS/profile_verify_qwen3-8b_k3_pdl0_ring0.json" || rc=1
  "$PY" tools/gpu/bench_spec.py --model "$CKPT/qwen3-8b" --batches 1 --max-k 4 --k 3 \
    --steps 20 --step-cost-only --no-fused-baseline \
    --out "$RESULTS/bench_spec_cost_qwen3-8b.json" || rc=1
  return $rc
}

# The ring GEMV's A/B (ATLAS_GEMV_RING: 2..8-row bf16 products on the cp.async-ring kernel,
# the default, or the register-tiled gemv_bf16): its GPU check cases and the row-invariance
# ones (every ring and tiled row bit for bit the single-row kernel's), the kernel-table rows of
# Qwen3-8B's projections and LM head at 1, 2 and 4 rows on both kernels (GB/s and % of copy;
# "b1 tiled" is the single-row kernel), then the K = 3 verification profile with 3 ring stages
# (spec_profile has 2, the default, and the ring off).
stage_spec_ring_ab() {
  local rc=0 p sfx sel=()
  make_checkpoint qwen3-8b weights || return 1
  "$PY" tools/gpu/check_kernels.py -k "gemv ring" -k "gemv_silu ring" -k "gemv_silu tiled" \
    -k "row invariance gemv" -k "gemv m" --out "$RESULTS/gpu_check_ring-$STAMP.json" || rc=1
  for p in qkv o_proj gate_up down lm_head; do
    for sfx in "b1 ring" "b1 tiled" "b2 ring" "b2 tiled" "b4 ring" "b4 tiled"; do
      sel+=(-k "qwen3-8b $p $sfx")
    done
  done
  "$PY" tools/gpu/bench_kernels.py --out-dir "$RESULTS" "${sel[@]}" || rc=1
  ATLAS_PDL=0 ATLAS_GEMV_RING_STAGES=3 "$PY" tools/gpu/profile_decode.py \
    --model "$CKPT/qwen3-8b" --verify 3 \
    --out "$RESULTS/profile_verify_qwen3-8b_k3_pdl0_ring3.json" || rc=1
  return $rc
}

# Verification attention (issue 13, helper vattn): the verification kernel's check cases
# (attention_verify: K 1..7, groups 1..64, D 64/128/256, contexts 1..4,096, mixed batches,
# and a graph replay of them: the tickets left zero); the kernel-table rows (Qwen3-8B b1/b8 K = 3 at 512 keys and b1
# at 4,096 on the verification kernel and rows apart, beside the plain b1 rows: the kernel
# should be within ~1.3x of one plain row, not 2x); Qwen3-8B's K = 3 verification profile,
# PDL off and on, on the verification kernel and with ATLAS_DECODE_ATTN_VERIFY=0 (rows apart:
# decode_attn_cluster 34.8 us a call at gpu17); then bench_spec at batch 1 and 8 (K = 3,
# acceptance 0.7; bar 2x plain at batch 1), and its batch-1 step cost with the switch off.
stage_verify_attn() {
  local rc=0 pdl
  "$PY" tools/gpu/check_kernels.py -k "verify D" -x "row invariance" \
    --out "$RESULTS/gpu_check_verify_attn-$STAMP.json" || rc=1
  "$PY" tools/gpu/bench_kernels.py -k " verify" -k "qwen3-8b b1 hist512" \
    -k "qwen3-8b b1 hist4096" --out-dir "$RESULTS" || rc=1
  make_checkpoint qwen3-8b weights || return 1
  for pdl in 0 1; do
    ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py --model "$CKPT/qwen3-8b" --verify 3 \
      --out "$RESULTS/profile_verify_qwen3-8b_k3_pdl$pdl.json" || rc=1
    ATLAS_PDL=$pdl ATLAS_DECODE_ATTN_VERIFY=0 "$PY" tools/gpu/profile_decode.py \
      --model "$CKPT/qwen3-8b" --verify 3 \
      --out "$RESULTS/profile_verify_qwen3-8b_k3_pdl${pdl}_verify0.json" || rc=1
  done
  "$PY" tools/gpu/bench_spec.py --model "$CKPT/qwen3-8b" --batches 1,8 --max-k 4 --k 3 \
    --accept 0.7 --steps 20 --new 192 --out "$RESULTS/bench_spec_verify_qwen3-8b.json" || rc=1
  ATLAS_DECODE_ATTN_VERIFY=0 "$PY" tools/gpu/bench_spec.py --model "$CKPT/qwen3-8b" \
    --batches 1 --max-k 4 --k 3 --steps 20 --step-cost-only --no-fused-baseline \
    --out "$RESULTS/bench_spec_cost_qwen3-8b_verify0.json" || rc=1
  return $rc
}

# $CKPT/qwen3-8b-$1: Qwen3-8B quantized to $1 (fp8-block, nvfp4) by `atlas models quantize`
# (bf16 LM head), made once (the quantizer's log: $LOGS/quantize_qwen3-8b-$1.log).
quantized_8b() {
  local q="$CKPT/qwen3-8b-$1"
  [ -f "$q/config.json" ] && return 0
  make_checkpoint qwen3-8b weights || return 1
  rm -rf "$q"
  "$PY" -m atlas_cli.main models quantize "$CKPT/qwen3-8b" "$q" --to "$1" \
    2>"$LOGS/quantize_qwen3-8b-$1.log"
}

# helper attn64 (session 8): decode batches of 8+ on the tensor-core split-K kernel
# (attention_long.cu, D 64/128/256, its rope-fused entry for the classic qkv layout;
# ATLAS_DECODE_ATTN_LONG_MIN_BATCH, default 8) against the session-7 routing (=0:
# decode_attn_rope / decode_attn / the clustered kernels). Its check cases (D 256, one-split
# launches writing the output, the rope entry), the kernel table's batched rows (Qwen3-8B and
# Qwen3.5-35B-A3B heads at batch 8 and 64 x 512 / 1,536 / 2,048 / 16,384 keys, vs SDPA), the
# batch-64 rows and the b8 latency rows (rope-fused, as the models launch them), both
# routings, then Qwen3-8B's batch-64 x 1,536 decode step profiled both ways (PDL on: what
# serving runs) and decode tok/s at batch 8 / 64 both ways. ~5 minutes.
stage_attn64() {
  local rc=0 mb
  "$PY" tools/gpu/check_kernels.py -k long --out "$RESULTS/gpu_check_attn64-$STAMP.json" || rc=1
  "$PY" tools/gpu/bench_kernels.py -k " batched" -k "b64 hist1536" -k "b8 hist2048 latency" \
    --out-dir "$RESULTS/attn64" || rc=1
  ATLAS_DECODE_ATTN_LONG_MIN_BATCH=0 "$PY" tools/gpu/bench_kernels.py -k " batched" \
    -k "b64 hist1536" -k "b8 hist2048 latency" --out-dir "$RESULTS/attn64_minbatch0" || rc=1
  make_checkpoint qwen3-8b weights || return 1
  for mb in 8 0; do
    ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb "$PY" tools/gpu/profile_decode.py \
      --model "$CKPT/qwen3-8b" --batch 64 --context 1536 \
      --out "$RESULTS/profile_decode_qwen3-8b_b64_c1536_minbatch$mb.json" || rc=1
    ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb "$PY" tools/gpu/bench_decode.py \
      --model "$CKPT/qwen3-8b" --hf none --batches 8,64 \
      --out "$RESULTS/bench_decode_qwen3-8b_minbatch$mb.json" || rc=1
  done
  return $rc
}

# helper attn64: the flagship (Qwen3.5-35B-A3B, synthetic weights: D-256 gated attention, hq
# 16 / hkv 2) decode at batch 8 and 32 with its attention on the tensor-core kernel (default)
# and on the session-7 clustered kernel (ATLAS_DECODE_ATTN_LONG_MIN_BATCH=0). ~3 minutes.
stage_attn64_flagship() {
  local rc=0 mb
  for mb in 8 0; do
    ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb "$PY" tools/gpu/bench_moe.py \
      --config qwen3_5-35b-a3b --batches 8,32 --prompt 2048 --new 128 --hf none \
      --out "$RESULTS/bench_moe_qwen3_5-35b-a3b_minbatch$mb.json" || rc=1
  done
  return $rc
}

# Batch-1 decode attention's chain after the PDL wait (session 8, helper "b1lat"): the
# decode attention check cases (the default push merge, the pull twins), the phase trace and
# b1 curves of the default kernels, the curves with ATLAS_DECODE_ATTN_B1_CHAIN=0 (the
# session-7 pull merge), then bench_decode at batch 1 on Qwen3-0.6B and Qwen3-8B with the
# switch on and off and with ATLAS_DECODE_ATTN_SPLIT_MAJOR=1 (the push merge, working clusters
# started first), back to back. Checks and traces under a timeout: an mbarrier that never
# completes would hang the process, never the suite.
stage_b1lat() {
  local rc=0 name chain
  timeout 300 "$PY" tools/gpu/check_kernels.py -k decode_rope -k "decode D" \
    -k "row invariance verify" --out "$RESULTS/gpu_check_b1lat-$STAMP.json" || rc=1
  timeout 300 "$PY" tools/gpu/trace_decode_attn.py --quick \
    | tee "$RESULTS/attn_trace_b1lat-$STAMP.txt" || rc=1
  ATLAS_DECODE_ATTN_B1_CHAIN=0 timeout 300 "$PY" tools/gpu/trace_decode_attn.py --curves-only \
    --quick | tee "$RESULTS/attn_curves_b1chain0-$STAMP.txt" || rc=1
  for name in qwen3-0.6b qwen3-8b; do
    make_checkpoint "$name" weights || return 1
    for chain in 1 0; do
      ATLAS_DECODE_ATTN_B1_CHAIN=$chain timeout 300 "$PY" tools/gpu/bench_decode.py \
        --model "$CKPT/$name" --hf none --batches 1 \
        --out "$RESULTS/bench_decode_${name}_b1chain$chain.json" || rc=1
    done
    ATLAS_DECODE_ATTN_SPLIT_MAJOR=1 timeout 300 "$PY" tools/gpu/bench_decode.py \
      --model "$CKPT/$name" --hf none --batches 1 \
      --out "$RESULTS/bench_decode_${name}_splitmajor.json" || rc=1
  done
  return $rc
}

# helper moe (session 8): the GEMV-shaped batch-1 down kernels (moe_down_gemv_*, switch
# ATLAS_MOE_DOWN_GEMV) and the gate/up GEMV's two-chunk blocks (128 threads at hidden 2048,
# ATLAS_MOE_GATE_UP_GEMV_THREADS=256 is the session-7 width): every decode expert and router
# check case, then Qwen3-30B-A3B and Qwen3.5-35B-A3B full size (synthetic weights) tok/s with
# the defaults (_new), each switch back alone (30B) and both back (_old), the down GEMV a
# tile a block (_tiles1: ATLAS_MOE_DOWN_GEMV_TILES=1, two waves); batch 8 with the
# down GEMV at every batch (_gemv8: ATLAS_MOE_DOWN_GEMV_MAX_M=8); and Qwen3-30B-A3B's b1 per-kernel profile with PDL off (each row the kernel's own time) and
# on, new and old (~6 minutes).
stage_moe_s8_ab() {
  local rc=0 name tag pdl
  local -a old=(ATLAS_MOE_DOWN_GEMV=0 ATLAS_MOE_GATE_UP_GEMV_THREADS=256)
  "$PY" tools/gpu/check_kernels.py -k moe_decode -k moe_down -k moe_gate_topk -k moe_topk \
    --out "$RESULTS/gpu_check_moe_s8-$STAMP.json" || rc=1
  # the kernel table's router and decode expert rows (gate/up + down), new and old
  "$PY" tools/gpu/bench_kernels.py -k moe_router -k moe_decode_experts \
    --out-dir "$RESULTS/moe_s8_table_new" || rc=1
  env "${old[@]}" "$PY" tools/gpu/bench_kernels.py -k moe_decode_experts \
    --out-dir "$RESULTS/moe_s8_table_old" || rc=1
  for name in qwen3-30b-a3b qwen3_5-35b-a3b; do
    "$PY" tools/make_fixtures.py --config "$name" --out "$CKPT/$name-synthetic" --config-only \
      || return 1
  done
  moe_s8_bench() {  # tag config batches [env...]
    local tag="$1" name="$2" batches="$3"
    shift 3
    env "$@" "$PY" tools/gpu/bench_moe.py --config "$name" --batches "$batches" --prompt 512 \
      --new 128 --prefill 512 --hf none --out "$RESULTS/moe_s8_${name}_$tag.json"
  }
  for name in qwen3-30b-a3b qwen3_5-35b-a3b; do
    moe_s8_bench new "$name" 1,8 || rc=1
    moe_s8_bench old "$name" 1,8 "${old[@]}" || rc=1
    moe_s8_bench gemv8 "$name" 8 ATLAS_MOE_DOWN_GEMV_MAX_M=8 || rc=1
  done
  moe_s8_bench down0 qwen3-30b-a3b 1 ATLAS_MOE_DOWN_GEMV=0 || rc=1
  moe_s8_bench tiles1 qwen3-30b-a3b 1 ATLAS_MOE_DOWN_GEMV_TILES=1 || rc=1
  moe_s8_bench threads256 qwen3-30b-a3b 1 ATLAS_MOE_GATE_UP_GEMV_THREADS=256 || rc=1
  for tag in new old; do
    if [ "$tag" = old ]; then set -- "${old[@]}"; else set --; fi
    for pdl in 0 1; do
      env "$@" ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py \
        --model "$CKPT/qwen3-30b-a3b-synthetic" --synthetic-seed 0 \
        --out "$RESULTS/moe_s8_profile_qwen3-30b-a3b_pdl${pdl}_$tag.json" || rc=1
    done
  done
  return $rc
}

# Batched decode attention inside the step (session 9, helper "attn"): the check cases of the
# tensor-core kernel (the rope entry, the in-kernel split merge and its A/B twin), the kernel
# rows of the batched regime (Qwen3-8B b64 x 1,536 plain and rope-fused, batch 8 / 32 x 2,048
# for D 128 and D 256) with the defaults and with the opt-in on (ATLAS_DECODE_ATTN_LONG_MERGE=1:
# multi-split launches merge in their last split, no combine launch), then Qwen3-8B and
# Qwen3-0.6B decode at 64 x 1,536 (synthetic weights) PDL on and off: the attention row in the
# step against the kernel row alone.
stage_attn_s9() {
  local rc=0 cfg="$RESULTS/attn_s9_cfg" name pdl rows
  rows=(-k "b64 hist1536" -k "hist2048 batched" -k "b8 hist2048 latency")
  "$PY" tools/gpu/check_kernels.py -k long --out "$RESULTS/gpu_check_attn_s9-$STAMP.json" || rc=1
  "$PY" tools/gpu/bench_kernels.py "${rows[@]}" --out-dir "$RESULTS/attn_s9" || rc=1
  ATLAS_DECODE_ATTN_LONG_MERGE=1 "$PY" tools/gpu/bench_kernels.py \
    "${rows[@]}" --out-dir "$RESULTS/attn_s9_on" || rc=1
  for name in qwen3-8b qwen3-0.6b; do
    "$PY" -c "import sys; sys.path[:0] = ['tools', 'tools/gpu']; from pathlib import Path; \
from bench_moe import synthetic_model_dir; \
print(synthetic_model_dir(sys.argv[2], Path(sys.argv[1])))" "$cfg" "$name" || return 1
    for pdl in 1 0; do
      ATLAS_PDL=$pdl "$PY" tools/gpu/profile_decode.py --model "$cfg/$name" --synthetic-seed 0 \
        --batch 64 --context 1536 --out "$RESULTS/attn_s9_${name}_pdl$pdl.json" || rc=1
    done
  done
  return $rc
}

# Session 9, helper "spec" (issue 13: 2x at batch 1). Qwen3-8B from synthetic weights (config
# only), K = 3, 512-token context. Checks: the ring GEMV, the verification kernel (incl. its
# min128/min256 split cases) and its rope entry point (bit for bit its unfused twin). Kernel
# rows: the 4-row ring GEMVs beside the single-row kernel ("b1 tiled"); the verification
# attention rows at splits of >= 64 (default) and 256 keys. Profiles (PDL off: rows add up):
# the K = 3 verification step vs a plain one, default, ATLAS_DECODE_ATTN_VERIFY_ROPE=1 (one
# launch a layer) and MIN_KEYS=256. Then bench_spec at batch 1 and 8 (oracle p = 0.7, K = 3;
# PDL on).
stage_spec_s9() {
  local rc=0 cfg="$CKPT/qwen3-8b-synthetic" sel=() p v
  "$PY" tools/make_fixtures.py --config qwen3-8b --out "$cfg" --config-only || return 1
  "$PY" tools/gpu/check_kernels.py -k "gemv ring" -k "gemv_silu ring" -k "row invariance gemv" \
    -k "verify D" -k "verify rope" --out "$RESULTS/gpu_check_spec_s9-$STAMP.json" || rc=1
  for p in qkv o_proj gate_up down; do
    sel+=(-k "qwen3-8b $p b4 ring" -k "qwen3-8b $p b1 tiled")
  done
  "$PY" tools/gpu/bench_kernels.py --out-dir "$RESULTS/spec_s9_ring" "${sel[@]}" || rc=1
  for v in 64 256; do
    ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS=$v "$PY" tools/gpu/bench_kernels.py \
      --out-dir "$RESULTS/spec_s9_verify_min$v" -k "qwen3-8b b1 hist512 K3 verify" \
      -k "qwen3-8b b1 hist4096 K3 verify" || rc=1
  done
  for v in default ATLAS_DECODE_ATTN_VERIFY_ROPE=1 ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS=256; do
    env ATLAS_PDL=0 $([ "$v" = default ] || echo "$v") "$PY" tools/gpu/profile_decode.py \
      --model "$cfg" --synthetic-seed 0 --batch 1 --context 512 --verify 3 \
      --out "$RESULTS/spec_s9_profile_${v//=/_}.json" || rc=1
  done
  "$PY" tools/gpu/bench_spec.py --model "$cfg" --synthetic-seed 0 --batches 1,8 --max-k 3 \
    --k 3 --accept 0.7 --new 128 --steps 20 --no-fused-baseline \
    --out "$RESULTS/spec_s9_bench_spec.json" || rc=1
  return $rc
}

# helper quant (session 9), the narrow loops of the register-fed quantized GEMV (~4 minutes):
# their GPU check cases (gemv_qd_{fp8,nvfp4}_n{1,2}: 38 cases vs float64), Qwen3-8B's batch-1
# kernel-table rows (the four projections, gate_up + SwiGLU, both formats: default loop, n1,
# n2; the NVFP4 LM head), then Qwen3-8B decode tok/s at batches 1 / 8 (synthetic weights) for
# NVFP4 (+ LM head) and FP8-block with ATLAS_QUANT_NARROW=0 / 1 / 2 (0 = today's loops).
stage_quant_narrow() {
  local rc=0 p f q nw sel=()
  "$PY" tools/gpu/check_kernels.py -k gemv_qd_nvfp4_n -k gemv_qd_fp8_n \
    --out "$RESULTS/gpu_check_quant_narrow-$STAMP.json" || rc=1
  for p in qkv o_proj gate_up down gate_up+swiglu; do
    for f in fp8-block nvfp4; do sel+=(-k "qwen3-8b $p b1 $f"); done
  done
  sel+=(-k "qwen3-8b lm_head b1 nvfp4")
  "$PY" tools/gpu/bench_kernels.py "${sel[@]}" --out-dir "$RESULTS/quant_narrow" || rc=1
  for q in "nvfp4 --lm-head" fp8-block; do
    for nw in 0 1 2; do
      # shellcheck disable=SC2086  # q holds the format and its flag
      ATLAS_QUANT_NARROW=$nw "$PY" tools/gpu/bench_moe.py --config qwen3-8b --quant $q \
        --batches 1,8 --new 128 --prefill 512 --hf none \
        --out "$RESULTS/quant_narrow_${q%% *}_n$nw.json" || rc=1
    done
  done
  return $rc
}

# helper quant (session 12), batch-1 FP8 on the CUDA-core convert GEMV (gemv_fp8_cvt_bf16_single,
# ATLAS_QUANT_FP8_CORE; ~4 minutes): its GPU check cases (gemv_fp8_cvt: 7 cases vs float64),
# Qwen3-8B's batch-1 FP8 kernel-table rows (qkv, o_proj, gate_up, down: the default = convert
# GEMV, ` tc` = the tensor-core route), then Qwen3-8B FP8-block decode tok/s at batches 1 / 8
# with ATLAS_QUANT_FP8_CORE=1 / 0.
stage_quant_core() {
  local rc=0 p on sel=(-k "b1 fp8-block tc")
  "$PY" tools/gpu/check_kernels.py -k gemv_fp8_cvt \
    --out "$RESULTS/gpu_check_quant_core-$STAMP.json" || rc=1
  for p in qkv o_proj gate_up down; do sel+=(-k "qwen3-8b $p b1 fp8-block m=1"); done
  "$PY" tools/gpu/bench_kernels.py "${sel[@]}" --out-dir "$RESULTS/quant_core" || rc=1
  for on in 1 0; do
    ATLAS_QUANT_FP8_CORE=$on "$PY" tools/gpu/bench_moe.py --config qwen3-8b --quant fp8-block \
      --batches 1,8 --new 128 --prefill 512 --hf none \
      --out "$RESULTS/quant_core_fp8_core$on.json" || rc=1
  done
  return $rc
}

# Session 9's batch-1 MoE A/B (helper moe): every MoE decode check case (the tiled gate/up,
# routing inside the expert launches, ties, zero-token ids, top-k = experts), then batch-1
# decode of both full-size synthetic models: old (the defaults, session 8's launches), noroute
# (ATLAS_MOE_GATE_UP_TILED=1: the tiled gate/up alone), new (that and
# ATLAS_MOE_ROUTE_IN_EXPERTS=1; gpu22: no gain over old); per-kernel profiles with PDL off
# (new, old) and on (new).
stage_moe_s9_ab() {
  local rc=0 name cfg
  local -a noroute=(ATLAS_MOE_GATE_UP_TILED=1) new=(ATLAS_MOE_GATE_UP_TILED=1
                                                     ATLAS_MOE_ROUTE_IN_EXPERTS=1)
  "$PY" tools/gpu/check_kernels.py -k moe_gate_up -k moe_route_in_experts -k moe_decode \
    -k moe_down -k moe_gate_topk -k moe_topk --out "$RESULTS/gpu_check_moe_s9-$STAMP.json" || rc=1
  for name in qwen3-30b-a3b qwen3_5-35b-a3b; do
    cfg="$CKPT/$name-synthetic"
    "$PY" tools/make_fixtures.py --config "$name" --out "$cfg" --config-only || return 1
    env "${new[@]}" "$PY" tools/gpu/bench_moe.py --config "$name" --batches 1 --prompt 512 \
      --new 128 --prefill 512 --hf none --out "$RESULTS/moe_s9_${name}_new.json" || rc=1
    env "${noroute[@]}" "$PY" tools/gpu/bench_moe.py --config "$name" --batches 1 --prompt 512 \
      --new 128 --prefill 512 --hf none --out "$RESULTS/moe_s9_${name}_noroute.json" || rc=1
    "$PY" tools/gpu/bench_moe.py --config "$name" --batches 1 --prompt 512 \
      --new 128 --prefill 512 --hf none --out "$RESULTS/moe_s9_${name}_old.json" || rc=1
    env "${new[@]}" ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$cfg" \
      --synthetic-seed 0 --out "$RESULTS/moe_s9_profile_${name}_pdl0_new.json" || rc=1
  done
  cfg="$CKPT/qwen3-30b-a3b-synthetic"
  ATLAS_PDL=0 "$PY" tools/gpu/profile_decode.py --model "$cfg" \
    --synthetic-seed 0 --out "$RESULTS/moe_s9_profile_qwen3-30b-a3b_pdl0_old.json" || rc=1
  env "${new[@]}" ATLAS_PDL=1 "$PY" tools/gpu/profile_decode.py --model "$cfg" \
    --synthetic-seed 0 --out "$RESULTS/moe_s9_profile_qwen3-30b-a3b_pdl1_new.json" || rc=1
  return $rc
}

# Session 10's paths (first run at gpu26, session 11): checks and A/Bs against the default in
# the same run.
# * ATLAS_PREFILL_ATTN_WIDE=0: the 64-key tiles in the wgmma prefill attention instead of the
#   128-key default (gpu26: 32k prefill 53.7% vs 56.2% of the matmul peak, bar 55%).
stage_s10_ab() {
  local rc=0 v
  "$PY" tools/gpu/check_kernels.py -m attention_sm90 -m attention_long \
    --out "$RESULTS/gpu_check_s10-$STAMP.json" || rc=1
  for v in default ATLAS_PREFILL_ATTN_WIDE=0; do
    env $([ "$v" = default ] || echo "$v") "$PY" tools/gpu/bench_long_context.py \
      --config qwen3-8b --contexts "" --out "$RESULTS/s10_prefill32k_${v//=/_}.json" || rc=1
  done
  return $rc
}

# Session 11's clustered verification attention (ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1,
# attention_verify.cu decode_attn_verify_cluster_bf16): its check cases, then Qwen3-8B batch 1
# K = 3 (synthetic weights) with and without it: the verification step's per-kernel profile
# (PDL off: the attention row vs decode_attn_verify_bf16's ~39.6 us) and bench_spec's tok/s.
stage_s11_verify() {
  local rc=0 cfg="$CKPT/qwen3-8b-synthetic" v
  "$PY" tools/make_fixtures.py --config qwen3-8b --out "$cfg" --config-only || return 1
  "$PY" tools/gpu/check_kernels.py -k "verify cluster" \
    --out "$RESULTS/gpu_check_s11_verify-$STAMP.json" || rc=1
  for v in default ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1; do
    env ATLAS_PDL=0 $([ "$v" = default ] || echo "$v") "$PY" tools/gpu/profile_decode.py \
      --model "$cfg" --synthetic-seed 0 --batch 1 --context 512 --verify 3 \
      --out "$RESULTS/s11_verify_${v//=/_}.json" || rc=1
    env $([ "$v" = default ] || echo "$v") "$PY" tools/gpu/bench_spec.py --model "$cfg" \
      --synthetic-seed 0 --batches 1 --max-k 3 --k 3 --accept 0.7 --new 128 --steps 20 \
      --no-fused-baseline --out "$RESULTS/s11_spec_${v//=/_}.json" || rc=1
  done
  return $rc
}

STAGES=(env_check install_wheels build_kernels check_kernels pytest_gpu tiny_parity decode_bench
        qwen3_0_6b qwen3_5 flagship_parity flagship_bench flagship_bench_unfused
        flagship_profile_b8 flagship_profile_prefill moe_ab_unfused qwen3_8b decode_bench_nopdl
        profile kernel_table gdn_table server_sweep throughput batched_min_m long_context
        long_context_qreg long_context_profile long_context_nolong issue15_table decode_gemm_ab
        kv_dtypes gates ep_1gpu spec_bench grammar_bench prefix_bench prefix_bench_hybrid
        spec_bench_hybrid quant_bench moe_full quant_profile quant_profile_nvfp4 quant_lm_head
        moe_kernels moe_parity moe_host_parity layer_diff moe_bench decode_profiles profiles_extra
        allreduce_1gpu tp_check tp_bench tp_throughput ep_bench async_scheduling startup
        quant_kernels decode_attn throughput_b64_profile
        throughput_mixed_step decode_gemm_wide_ab headline batch1_ab thru_ab moe_b1_profile
        quant_ab moe_quant_bench thru_b64 spec_profile spec_ring_ab persistent_ab persistent_sweep
        attn_trace verify_attn attn64 attn64_flagship b1lat decode_gemm_tma moe_s8_ab
        attn_s9 spec_s9 quant_narrow moe_s9_ab s10_ab s11_verify quant_core families)

# ---- runner -------------------------------------------------------------------------------

if [ -d /tmp/site ] || ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

selected=("$@")
declare -A STATUS=() SECONDS_TAKEN=()
ORDER=()

run_stage() {
  local name="$1" log="$LOGS/$1.log" start rc
  start=$(date +%s)
  echo "=== $name (log: $log)"
  "stage_$name" >"$log" 2>&1
  rc=$?
  tail -n 15 "$log" | sed 's/^/    /'
  STATUS[$name]=$rc
  SECONDS_TAKEN[$name]=$(( $(date +%s) - start ))
  ORDER+=("$name")
  return $rc
}

wanted() {
  local name="$1" s
  [ ${#selected[@]} -eq 0 ] && return 0
  for s in "${selected[@]}"; do [ "$s" = "$name" ] && return 0; done
  return 1
}

for s in ${selected[@]+"${selected[@]}"}; do
  declare -F "stage_$s" >/dev/null || { echo "unknown stage '$s'; stages: ${STAGES[*]}"; exit 2; }
done

if ! run_stage env_check; then
  echo "environment check failed; see $LOGS/env_check.log"
  exit 1
fi
for name in "${STAGES[@]}"; do
  [ "$name" = env_check ] && continue
  wanted "$name" || continue
  run_stage "$name"
done

echo
printf '%-22s %-6s %8s  %s\n' stage status seconds log
failed=0
for name in "${ORDER[@]}"; do
  rc=${STATUS[$name]}
  if [ "$rc" -eq 0 ]; then word=PASS; else word="FAIL($rc)"; failed=1; fi
  printf '%-22s %-6s %8s  %s\n' "$name" "$word" "${SECONDS_TAKEN[$name]}" "$LOGS/$name.log"
done
echo "results: $RESULTS"
if [ -n "${OUT:-}" ]; then  # one file: the device tool returns at most 8
  tar czf "$OUT/suite.tgz" -C "$BASE" logs results
  ls "$RESULTS"
fi
exit $failed
