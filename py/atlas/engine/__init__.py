"""The engine core: one loop that turns requests into tokens, whoever drives it.

`schedule -> execute -> commit` (vLLM v1's engine core, nano-vllm's small files):

* `request`      — what a caller asks (`EngineRequest`) and gets back (`EngineOutput`)
* `sequence`     — one request's live state, everything that must survive preemption
* `block_manager`— the KV block pool protocol and which blocks each sequence holds
* `scheduler`    — continuous batching under a step token budget, with preemption
* `scheduling_policy` — who goes first (FIFO, SLO-aware)
* `core`         — `EngineCore`: one step of schedule, execute, commit
* `llm_engine`   — `LLMEngine.generate(requests)`: the offline loop (CLI, tools, tests)

The server's engine thread drives the same `EngineCore`. Pure logic: no device, no I/O;
the model is reached through `atlas.model.batch.StepExecutor`.
"""
