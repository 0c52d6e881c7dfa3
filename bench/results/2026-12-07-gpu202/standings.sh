#!/usr/bin/env bash
# On an H200 with the budget (session 57): gpu171's standings at this HEAD (the 0.6B server,
# the 8B c64 / c1 / c2, batch 1 of the 8B family and the MoE flagships, a c64 step, the four
# gate records, the c4..c32 levels, the other dense configs, FP8 / NVFP4; ~575 s), as it ran.
exec bash bench/results/2026-12-06-gpu171/call.sh
