#!/usr/bin/env bash
# session-29 call C: the session's defaults (31673a4c) against the session's start (7c7bb587's PTX, kernels_old):
# the Gated-DeltaNet decode's conv taps 2K + 1 words apart and the long attention's padded warp merge, on
# Qwen3.5-35B-A3B at batch 1 and 8 (both orders at 8); the batched GEMV from 3 rows (the new default) against
# ATLAS_BATCHED_GEMV_MIN_M=8 (the old) at Qwen3-8B batch 5 / 7 and Qwen3.5-35B-A3B batch 4, and against MIN_M=2 at
# Qwen3-0.6B batch 2; checks of gdn_decode and attention_long. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
OLD="ATLAS_KERNELS_DIR=$PWD/.device/kernels_old"
TAILN=3 t 120 checks python3 tools/gpu/check_kernels.py -m gdn_decode -m attention_long -x " leaf " --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
M35=$G/qwen3_5-35b-a3b
bn m35b8_new "X=1" $M35 8; bn m35b8_old "$OLD" $M35 8; bn m35b8_old2 "$OLD" $M35 8; bn m35b8_new2 "X=1" $M35 8
bn m35_new "X=1" $M35 1; bn m35_old "$OLD" $M35 1
G8="ATLAS_BATCHED_GEMV_MIN_M=8"
bn m35b4 "X=1" $M35 4; bn m35b4_8 "$G8" $M35 4
bn d8b5 "X=1" $G/qwen3-8b 5; bn d8b5_8 "$G8" $G/qwen3-8b 5; bn d8b7 "X=1" $G/qwen3-8b 7; bn d8b7_8 "$G8" $G/qwen3-8b 7
bn d06b2 "X=1" $G/qwen3-0.6b 2; bn d06b2_2 "ATLAS_BATCHED_GEMV_MIN_M=2" $G/qwen3-0.6b 2
echo "== GPU ms a step (graph replay), PDL on, x 512: this tree / session start (kernels_old)"
echo "m35 b8 new $(step m35b8_new) / $(step m35b8_new2)  old $(step m35b8_old) / $(step m35b8_old2)   b1 new $(step m35_new)  old $(step m35_old)"
echo "== batched GEMV: default (from 3 rows) / MIN_M=8 (0.6B b2: / MIN_M=2)"
for n in m35b4 d8b5 d8b7; do echo "$n $(step $n) / $(step ${n}_8)"; done
echo "d06b2 $(step d06b2) / $(step d06b2_2)"
echo "ALL DONE"
