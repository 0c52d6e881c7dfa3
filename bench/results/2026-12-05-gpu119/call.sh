#!/usr/bin/env bash
# session-32 call B: the families added in sessions 31-32 at their published per-layer shapes on the H200:
# (1) parity with transformers (torch on the device) of MiniMax-M2 (2 of 62 layers: 256 experts top-8,
# sigmoid + score bias, whole-projection q/k norm), Qwen2.5-7B (8 layers, q/k/v biases), Mistral-7B-v0.3 (8)
# and Mixtral-8x7B (4), each checkpoint made on the GPU and removed after its check; (2) batch-1 profiles from
# synthetic weights: Qwen2.5-1.5B / 7B, Mistral-7B-v0.3, Mixtral-8x7B, MiniMax-M2 8 of 62 layers.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-90} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
for name in minimax-m2-2l qwen2.5-7b-8l mistral-7b-v0.3-8l mixtral-8x7b-4l; do
  TAILN=2 t 150 mk_$name python3 tools/make_fixtures.py --config $name --device cuda --out $C/$name
  TAILN=6 t 120 par_$name python3 tools/gpu/model_parity.py --backend cuda --model $C/$name --tail --out $R/parity_$name.json
  rm -rf "${C:?}/$name"
done
for m in qwen2.5-1.5b qwen2.5-7b mistral-7b-v0.3 mixtral-8x7b minimax-m2-8l; do bn $m "X=1" $G/$m 1; done
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512"
for m in qwen2.5-1.5b qwen2.5-7b mistral-7b-v0.3 mixtral-8x7b minimax-m2-8l; do echo "$m $(step $m)"; done
echo "ALL DONE"
