#!/usr/bin/env bash
# session-44 call F: the H200 standings with this session's defaults (gpu137's call: default
# servers, the 1..64 throughput sweep, batch 1 of every config, the gate records); on any other
# card nothing (exits at once). Prepare as gpu148 (.device at this HEAD, .device/git.tar).
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
exec bash bench/results/2026-12-05-gpu137/call.sh
