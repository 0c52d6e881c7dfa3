#!/usr/bin/env bash
# session-21 call A: why the batch-64 step's attention is slower than its kernel-table row
# (attn_step_gap.py variants under PDL off / on, the table row itself, ncu on the step's launch
# and on the table variant, clocks while the step replays), and the staged trace's batch-64 row.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=12 t 150 gap_pdl0 env ATLAS_PDL=0 python3 tools/gpu/attn_step_gap.py
TAILN=12 t 150 gap_pdl1 python3 tools/gpu/attn_step_gap.py
kt rope "" -k "qwen3-8b b64 hist1536 +rope"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 > $L/smi.log 2>&1 &
SMI=$!
PLIM=150 prof b64 "ATLAS_PDL=0" --model $G/qwen3-8b --batch 64 --context 1536
kill $SMI
grep -E "^decode_attn|^gemm|attention keys" $L/b64.log | head -8 | cut -c1-150
awk -F, 'NR>1{print $1,$3}' $L/smi.log | sort | uniq -c | sort -rn | head -8
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,launch__grid_size,launch__waves_per_multiprocessor
NOPROF=1 TAILN=30 t 240 ncu_step env ATLAS_PDL=0 $NCU --clock-control none --cache-control none -k regex:decode_attn_long_rope_staged --launch-skip 2600 --launch-count 2 --metrics $M --section WarpStateStats python3 tools/gpu/profile_decode.py --synthetic-seed 0 --model $G/qwen3-8b --batch 64 --context 1536
TAILN=30 t 200 ncu_table env ATLAS_PDL=0 $NCU --clock-control none --cache-control none -k regex:decode_attn_long_rope_staged --launch-skip 20 --launch-count 1 --metrics $M --section WarpStateStats python3 tools/gpu/attn_step_gap.py --repeats 3
TAILN=40 t 200 trace python3 tools/gpu/trace_decode_attn.py --long --quick
echo "ALL DONE"
