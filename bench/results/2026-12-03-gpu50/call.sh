#!/usr/bin/env bash
# session-17 call C (lead): (1) checks of the GEMV L2-ahead twins, the SwiGLU GEMV and the early quantized down;
# (2) ATLAS_GEMV_L2_AHEAD A/B at batch 1 (35B twice in both orders, 8B, 30B, 0.6B); (3) batch-1 decode attention's
# split length: model/step_inputs.py decode_splits caps the split count at ceil(max_seq_len / DECODE_MIN_KEYS_PER_SPLIT),
# set per run by a tools-only wrapper (context 568: 18 splits of 32 keys by default, or 5 / 3 longer ones);
# (4) the NVFP4 35B default (early down); (5) the GPU-marked tests. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -k "gemv ahead" -k "gemv swiglu" -k "down early" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { prof "$1" "$2" --model "$3" --batch 1 --context 512; }
b1 g35_0 "X=1" $G/qwen3_5-35b-a3b
b1 g35_1 "ATLAS_GEMV_L2_AHEAD=1" $G/qwen3_5-35b-a3b
b1 g35_1b "ATLAS_GEMV_L2_AHEAD=1" $G/qwen3_5-35b-a3b
b1 g35_0b "X=1" $G/qwen3_5-35b-a3b
b1 g8_1 "ATLAS_GEMV_L2_AHEAD=1" $G/qwen3-8b
b1 g8_0 "X=1" $G/qwen3-8b
b1 g30_0 "X=1" $G/qwen3-30b-a3b
b1 g30_1 "ATLAS_GEMV_L2_AHEAD=1" $G/qwen3-30b-a3b
b1 g06_1 "ATLAS_GEMV_L2_AHEAD=1" $G/qwen3-0.6b
b1 g06_0 "X=1" $G/qwen3-0.6b
b1 n35 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
sp() {  # sp NAME MIN_KEYS MODEL
  TAILN=0 t 75 "$1" python3 -c "import sys, runpy; sys.argv = ['profile_decode.py', '--synthetic-seed', '0', '--model', '$3', '--batch', '1', '--context', '512', '--out', '$R/$1.json']; import atlas.model.step_inputs as s; s.DECODE_MIN_KEYS_PER_SPLIT = $2; runpy.run_path('tools/gpu/profile_decode.py', run_name='__main__')"
  echo "  $1: $(hdr $1 | head -1 | cut -c1-110) | $(grep -E '^decode_attn' $L/$1.log | head -1 | cut -c1-80)"
}
for k in 128 256; do sp s30_$k $k $G/qwen3-30b-a3b; done
sp s8_128 128 $G/qwen3-8b
TAILN=3 t 100 pytest_gpu python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu
for f in g35_0 g35_1 g8_0 g8_1; do echo "-- $f"; grep -E "^gemv" $L/$f.log | head -3 | cut -c1-100; done
echo "ALL DONE"
