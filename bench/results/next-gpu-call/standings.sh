#!/usr/bin/env bash
# gpu171's (session 47), again in session 57: on an H200, the standings at this HEAD
# (gpu166's H200 branch: the 0.6B server,
# the 8B c64 / c1 / c2, batch 1 of the 8B family and the MoE flagships, a c64 step, the four
# gate records, the c4..c32 levels, the other dense configs, FP8 / NVFP4), with the 8-row
# gate_up + SwiGLU's narrow blocks capped at 96 registers (gpu170). On any other card: below.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Repo root, carry [".device", ".whl"].
nvidia-smi --query-gpu=name --format=csv,noheader
# On another card: the narrow twin on the device (its checks) and batch 1 at this HEAD of
# Llama-3.2-3B / Qwen3-1.7B (gemv_swiglu_bf16_x8n_single) and Qwen3-8B (the uncapped entry):
# expect gpu170's capped 2.374 / 1.407 and uncapped 5.247 on an H100.
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  source tools/gpu/call_head.sh
  TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m gemv -k x8
  for m in llama-3.2-3b qwen3-1.7b qwen3-8b; do b1 $m X=1 $G/$m; done
  for m in llama-3.2-3b qwen3-1.7b qwen3-8b; do printf "%-14s %s| %s\n" $m "$(aw $m)" \
    "$(sed -n '/^critical path/,/^between/p' $L/$m.log | grep -m1 swiglu | cut -c1-110)"; done
  echo "ALL DONE"; exit 0
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
b1() { PLIM=${PL:-75} prof "$1" X=1 --model $2 --batch 1 --context 512; }
# in order of need (a call cut short keeps what ran): the 0.6B server, the 8B c64 and c1/c2,
# the 8B ratios on the checkpoints `atlas models quantize` writes, the MoE flagships' batch 1,
# a c64 step, the gate records (H200 only: BENCH.toml's thresholds are the H200's), then the
# c4..c32 levels, the other dense configs and the ratios with the LM head kept bf16
ckpt qwen3-0.6b; ckpt qwen3-8b
serve qwen3-0.6b
t 60 sr_q06 python3 tools/gpu/stream_rate.py --url http://127.0.0.1:8897/v1 --model qwen3-0.6b \
  --tokens 1024 --requests 5 --out $R/sr_q06.json
unserve
serve qwen3-8b; tp d 64 8 64 2001 qwen3-8b; tp a 1,2 1,1 4 2004 qwen3-8b; unserve
for m in qwen3-0.6b qwen3-8b; do b1 b1_$m $G/$m; done
b1 b1_q8_fp8h $G/q-fp8-block-head/qwen3-8b; b1 b1_q8_nvfp4h $G/q-nvfp4-head/qwen3-8b
PL=120 b1 b1_q35 $G/qwen3_5-35b-a3b; PL=120 b1 b1_q30 $G/qwen3-30b-a3b
PLIM=90 prof b64_q8 X=1 --model $G/qwen3-8b --batch 64 --context 1536  # a c64 step mid-run
serve qwen3-8b
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ -f .device/git.tar ]; then
  rm -rf .git && mkdir .git && tar xf .device/git.tar -C .git  # this HEAD's, not a stale one
  git status --porcelain > /dev/null  # refreshes the index: the blob-less clone's diff needs it
  for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do
    TAILN=2 t 90 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 \
      --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
  mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack
fi
tp c 16,32 4,4 64 2002 qwen3-8b; tp b 4,8 2,2 16 2003 qwen3-8b; unserve
for m in qwen3-1.7b qwen3-4b llama-3.2-1b llama-3.2-3b llama-3.1-8b; do b1 b1_$m $G/$m; done
b1 b1_q8_fp8 $G/q-fp8-block/qwen3-8b; b1 b1_q8_nvfp4 $G/q-nvfp4/qwen3-8b
echo "== throughput suite, default Qwen3-8B server"
tp_show $R/tp_a.json $R/tp_b.json $R/tp_c.json $R/tp_d.json
echo "== Qwen3-0.6B server (openai SDK, 1,024 tokens): $(grep median $L/sr_q06.log)"
echo "== batch 1 x 512: GPU replay / async wall ms a step | weights GB/s over GPU time"
aw() { grep -oE "GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+" $L/$1.log | grep -oE "[0-9.]+$" | tr '\n' ' '; }
echo "b64 x 1,536: $(hdr b64_q8 | head -1 | cut -c1-150)"
sed -n '/^kernel  .*calls/,/^critical/p' $L/b64_q8.log | head -12 | cut -c1-100
for n in b1_qwen3-0.6b b1_qwen3-1.7b b1_qwen3-4b b1_qwen3-8b b1_llama-3.2-1b b1_llama-3.2-3b b1_llama-3.1-8b b1_q8_fp8 b1_q8_nvfp4 b1_q8_fp8h b1_q8_nvfp4h b1_q35 b1_q30; do
  printf "%-18s %s| %s\n" $n "$(aw $n)" "$(grep -oE 'weights [0-9.]+ GB -> [0-9]+ GB/s over GPU' $L/$n.log)"; done
echo "ALL DONE"
