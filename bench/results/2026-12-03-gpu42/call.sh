#!/usr/bin/env bash
# session-15 call A: batch-1 dense baselines (published configs 0.6B..8B), ATLAS_FUSED_NORM=1 (residual carried by
# the GEMVs, norm in the next GEMV's x load) and ATLAS_GEMV_CHUNKS=2 (two chunks a thread in single-row GEMVs) A/Bs
cd "$(dirname "$0")"; source ./head.sh
TAILN=3 t 120 checks python3 tools/gpu/check_kernels.py -k gemv_residual -k gemv_rmsnorm -k gemv_add_rmsnorm --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=3 t 120 checks_ch2 env ATLAS_GEMV_CHUNKS=2 python3 tools/gpu/check_kernels.py -k "gemv m1" -k "gemv general m1" -k "gemv_silu m1" -k gemv_residual -k gemv_rmsnorm -k gemv_add_rmsnorm --out $R/checks_ch2.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks_ch2.log | head -8 | cut -c1-200
prof() { local name=$1 envs=$2; shift 2; TAILN=0 t 75 $name env $envs python3 tools/gpu/profile_decode.py --synthetic-seed 0 "$@" --out $R/$name.json; echo "  $name: $(hdr $name | tr '\n' ' ' | cut -c1-230)"; }
for m in qwen3-0.6b qwen3-1.7b; do
  prof ${m}_def "X=1" --model $G/$m --batch 1 --context 512
  prof ${m}_fn "ATLAS_FUSED_NORM=1" --model $G/$m --batch 1 --context 512
  prof ${m}_ch2 "ATLAS_GEMV_CHUNKS=2" --model $G/$m --batch 1 --context 512
  prof ${m}_fnch2 "ATLAS_FUSED_NORM=1 ATLAS_GEMV_CHUNKS=2" --model $G/$m --batch 1 --context 512
done
for m in llama-3.2-1b qwen3-8b; do
  prof ${m}_def "X=1" --model $G/$m --batch 1 --context 512
  prof ${m}_fn "ATLAS_FUSED_NORM=1" --model $G/$m --batch 1 --context 512
done
prof qwen3_5-35b-a3b_def "X=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof qwen3_5-35b-a3b_ch2 "ATLAS_GEMV_CHUNKS=2" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
for m in qwen3-4b llama-3.2-3b llama-3.1-8b; do prof ${m}_def "X=1" --model $G/$m --batch 1 --context 512; done
prof qwen3-1.7b_def_pdl0 "ATLAS_PDL=0" --model $G/qwen3-1.7b --batch 1 --context 512
prof qwen3-1.7b_fn_pdl0 "ATLAS_PDL=0 ATLAS_FUSED_NORM=1" --model $G/qwen3-1.7b --batch 1 --context 512
echo "ALL DONE"
