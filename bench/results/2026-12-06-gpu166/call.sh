#!/usr/bin/env bash
# session-46 final call (as gpu159, not run in session 45): on an H200, the standings at this HEAD (gpu137's call without its
# kernel-table rows: the gate records, default servers, the 1..64 throughput sweep, batch 1 of
# every config), then batch 1 of Llama-3.2-1B / -3B with ATLAS_GEMV_SWIGLU_ROWS=4 against the default 8-row blocks (an H100
# A/B picked 8 for them: gpu145 / gpu146).
# Prepare: bash tools/gpu/prep_device.sh (all hopper sets); git archive HEAD py tools kernels |
#   gzip -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Repo root, carry [".device", ".whl"].
# On another card (session 46): the gated launch's late trigger on the NVFP4 35B, whose small
# o_proj (4.7 MB) leaves the route on the early one (gpu165: the gated launch 26.4 us a layer
# there against 21.6 late on bf16; the step 2.0% slower than the four launches), on late / off /
# off / on late, and on early once.
nvidia-smi --query-gpu=name --format=csv,noheader
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  source tools/gpu/call_head.sh
  N=$G/q-nvfp4/qwen3_5-35b-a3b LT=ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1
  PL=90 b1 n_late "ATLAS_DECODE_ATTN_LONG_GATED=1 $LT" $N
  PL=90 b1 n_off "ATLAS_DECODE_ATTN_LONG_GATED=0 $LT" $N
  PL=90 b1 n_off2 "ATLAS_DECODE_ATTN_LONG_GATED=0" $N
  PL=90 b1 n_late2 "ATLAS_DECODE_ATTN_LONG_GATED=1 $LT" $N
  PL=90 b1 n_early "ATLAS_DECODE_ATTN_LONG_GATED=1" $N
  for n in n_late n_off n_off2 n_late2 n_early; do printf "%-9s %s\n" $n "$(aw $n)"; done
  for n in n_late n_off; do echo "-- $n"; sed -n '/^critical path/,/^between/p' $L/$n.log \
    | grep -E "attn|rope|gate_mul|combine|nvfp4_h2x8" | cut -c1-110; done
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
for m in llama-3.2-1b llama-3.2-3b; do
  for r in 4 8; do PLIM=60 prof r${r}_$m "ATLAS_GEMV_SWIGLU_ROWS=$r" --model $G/$m --batch 1 \
    --context 512; done; done
for m in llama-3.2-1b llama-3.2-3b; do printf "%-14s rows 4: %s | rows 8: %s\n" $m "$(aw r4_$m)" "$(aw r8_$m)"; done
echo "ALL DONE"
