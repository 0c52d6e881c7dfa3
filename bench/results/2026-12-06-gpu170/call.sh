#!/usr/bin/env bash
# session-47 call A: the 8-row single-row GEMVs (gemv_swiglu_bf16_x8_single, the gate_up + SwiGLU
# default from 4 KiB rows; gemv_bf16_x8_single, opt-in ATLAS_GEMV_ROWS=8) capped at 96 registers
# (__maxnreg__, ATLAS_GEMV_X8_MAXNREG): ptxas left free takes 114, so an SM holds two 192-thread
# blocks (k 3,072), three of 160 (k 2,560), four of 128 (k 2,048); at 96 three, four, five.
# gpu153 (H200): the gate_up + SwiGLU on the step's critical path streams 100.7 MB in 30.52 us
# at k 3,072 (Llama-3.2-3B, ~77% of copy) against 99.6 MB in 27.24 us at k 2,560 (Qwen3-4B, 86%)
# and 201 MB in 52.81 at k 4,096 (Qwen3-8B, 90%). Expect: Llama-3.2-3B and Phi-4-mini (k 3,072)
# gate_up several us faster a layer, Qwen3-4B / 1.7B / Llama-3.2-1B a little, Qwen3-8B (256
# threads: two blocks either way) unchanged. Variant set x8old = the uncapped entries.
# Prepare: ATLAS_PREP_VARIANT="x8old:ATLAS_GEMV_X8_MAXNREG=0" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git rev-parse --short HEAD
#   > .device/commit. Carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
OLD="ATLAS_KERNELS_DIR=$PWD/.device/kernels_x8old"
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m gemv -k x8
MS="llama-3.2-3b phi-4-mini qwen3-4b llama-3.2-1b qwen3-1.7b qwen3-8b"
for m in $MS; do b1 ${m}_new X=1 $G/$m; b1 ${m}_old "$OLD" $G/$m; done
for m in llama-3.2-3b qwen3-4b qwen3-1.7b; do b1 ${m}_old2 "$OLD" $G/$m; b1 ${m}_new2 X=1 $G/$m; done
for m in llama-3.2-3b qwen3-4b llama-3.2-1b qwen3-8b; do b1 ${m}_r8 ATLAS_GEMV_ROWS=8 $G/$m; done
echo "== batch 1 x 512: GPU replay / async wall ms a step (new: capped at 96 | old: uncapped | r8: capped, plain GEMVs 8-row too)"
for m in $MS; do printf "%-14s new %s| old %s| new2 %s| old2 %s| r8 %s\n" $m "$(aw ${m}_new)" "$(aw ${m}_old)" \
  "$(aw ${m}_new2 2>/dev/null)" "$(aw ${m}_old2 2>/dev/null)" "$(aw ${m}_r8 2>/dev/null)"; done
echo "== the gate_up + SwiGLU on the critical path (us a call), new | old"
for m in $MS; do printf "%-14s %s | %s\n" $m "$(sed -n '/^critical path/,/^between/p' $L/${m}_new.log | grep -m1 swiglu | cut -c42-110)" \
  "$(sed -n '/^critical path/,/^between/p' $L/${m}_old.log | grep -m1 swiglu | cut -c42-110)"; done
echo "ALL DONE"
