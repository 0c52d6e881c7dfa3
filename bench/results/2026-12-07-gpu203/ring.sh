#!/usr/bin/env bash
# Prepared in session 58 after gpu201 (H200: every FP8 tensor-core projection faster alone than
# the convert GEMV, the Qwen3-8B FP8 step slower with them, 2.844 vs 2.712 ms: the attention
# after qkv +1.6 us, o_proj after the attention +1.7, down +0.9 on the critical path, each a
# kernel PDL launches beside a 112 KB-a-block, two-an-SM grid that leaves it no room). The
# kernel now takes its ring depth from the launch's shared memory and sizes its x tiles by the
# rank's k range (ATLAS_QUANT_FP8_WGMMA_STAGES, _SM_BLOCKS). Any card: the checks at the default
# depth and at 3 slots (the ring's wrap), then Qwen3-8B FP8 batch 1 x 512 on the convert GEMV
# against the kernel at depth x blocks an SM, in order of need.
# Expectation: at 4-6 slots two blocks (~55-72 KB) leave room for a 101.8 KB attention block,
# the attention and o_proj back to the GEMV step's 7.1 / 3.3 us, the step under 2.712 ms if the
# shallower ring still streams (in flight per SM 64-96 KB against ~70 KB that 4.8 TB/s x 2 us
# needs over 132 SMs).
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=3 t 120 chk_fp8 python3 tools/gpu/check_kernels.py -m gemm_decode_fp8
grep -E " FAIL" $L/chk_fp8.log | cut -c1-200
TAILN=3 t 120 chk_fp8_s3 env ATLAS_QUANT_FP8_WGMMA_STAGES=3 python3 tools/gpu/check_kernels.py -m gemm_decode_fp8
grep -E " FAIL" $L/chk_fp8_s3.log | cut -c1-200
F8=$G/q-fp8-block/qwen3-8b; WG="ATLAS_QUANT_FP8_WGMMA=1 ATLAS_QUANT_FP8_WGMMA_STAGES"
for v in def:X=1 s4b2:"$WG=4" s6b2:"$WG=6" s9b2:"$WG=9" s5b2:"$WG=5" s3b2:"$WG=3" \
         s12b1:"$WG=12 ATLAS_QUANT_FP8_WGMMA_SM_BLOCKS=1" s4b3:"$WG=4 ATLAS_QUANT_FP8_WGMMA_SM_BLOCKS=3" \
         defb:X=1; do
  PLIM=50 prof f8_${v%%:*} "${v#*:}" --model $F8 --batch 1 --context 512 > /dev/null; done
# batch 8: blocks now hold 32 k-tiles of x (gpu201's down took split 7, 38.0 us, against the
# GEMV's 23.0), at the old depth and at 4 slots
for v in def:X=1 s9b2:"$WG=9" s4b2:"$WG=4"; do
  PLIM=50 prof f8b8_${v%%:*} "${v#*:}" --model $F8 --batch 8 --context 512 > /dev/null; done
# the kernel alone at 4 slots (gpu201's rows at 9: qkv 8.29, o_proj 5.84, gate_up + SwiGLU
# 27.41, down 14.32 us): what the shallower ring costs a launch with nothing beside it
KLIM=90 kt f8s4 ATLAS_QUANT_FP8_WGMMA_STAGES=4 -k "qwen3-8b qkv b1 fp8-block wg" \
  -k "qwen3-8b o_proj b1 fp8-block wg" -k "qwen3-8b down b1 fp8-block wg" \
  -k "qwen3-8b gate_up+swiglu b1 fp8-block wg"
echo "== Qwen3-8B FP8-block batch 1 x 512: GPU replay / async wall ms a step (sSbB: S ring slots, B blocks an SM)"
for n in def s4b2 s6b2 s9b2 s5b2 s3b2 s12b1 s4b3 defb; do printf "%-8s %s\n" $n "$(aw f8_$n)"; done
for n in def s9b2 s4b2; do printf "b8 %-5s %s\n" $n "$(aw f8b8_$n)"; done
python3 - "$R" <<'PY'
import json, sys
from pathlib import Path
r = Path(sys.argv[1])
for f in sorted(r.glob("f8_*.json")):
    d = json.loads(f.read_text())
    rows = [f"{c['kernel'][:28]}>{c['us_per_call']:.2f}" for c in d["critical_path"][:7]]
    print(f"{f.stem:9s} {d['gpu_ms']:.3f} | " + " ".join(rows))
PY
# ttft-warm (gpu202: 36.2 ms, bar 35, 28.4 a call before with no default-path change): the
# request it times, a short question past a cached ~2,000-token prefix, as one profiled step
TAILN=14 t 120 pf_warm python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 \
  --tokens 24 --cached 2040 --out $R/pf_warm.json
echo "ALL DONE"
