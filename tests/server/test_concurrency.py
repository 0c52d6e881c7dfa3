"""16 (and 64) simultaneous streaming clients each get exactly their solo output; a client
that disconnects mid-stream has its sequence aborted and its KV blocks freed."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from atlas.server.app_serve import EngineLimits
from tests.server.conftest import make_executor
from tests.server.fakes import FakeBlockPool
from tests.server.harness import ServerThread

NUM_CLIENTS = 16


@pytest.fixture(scope="module")
def tight(model_dir):
    """A small KV pool and prefill budget so 16 clients force chunking and preemption."""
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    pools: list[FakeBlockPool] = []

    def pool_factory(n):
        pools.append(FakeBlockPool(n))
        return pools[-1]

    executor = make_executor(tok, block_size=4, num_kv_blocks=120, step_delay_s=0.002)
    srv = ServerThread(model_dir, executor, pool_factory=pool_factory,
                       limits=EngineLimits(max_num_seqs=16, max_seq_len=256,
                                           max_prefill_tokens=24)).start()
    srv.pool = pools[0]
    yield srv
    srv.stop()


async def stream_chat(session, url, prompt, max_tokens=24):
    body = {"model": "tiny", "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": prompt}]}
    text, finish = "", None
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        async for line in resp.content:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = json.loads(line[6:])["choices"][0]
            text += choice["delta"].get("content") or ""
            finish = choice["finish_reason"] or finish
    return text, finish


def prompts():
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    return [f"Story {i}: " + " ".join(words[(i + j) % len(words)] for j in range(3 + i * 2))
            for i in range(NUM_CLIENTS)]


def test_sixteen_streams_equal_their_solo_runs(tight):
    async def main():
        async with aiohttp.ClientSession() as session:
            solo = [await stream_chat(session, tight.url, p) for p in prompts()]
            together = await asyncio.gather(*(stream_chat(session, tight.url, p)
                                              for p in prompts()))
            # 64 streams (each prompt four times) queue behind a 16-sequence batch
            crowd = await asyncio.gather(*(stream_chat(session, tight.url, p)
                                           for p in prompts() * 4))
        return solo, together, crowd

    solo, together, crowd = asyncio.run(main())
    assert len({t for t, _ in solo}) == NUM_CLIENTS      # different prompts, different text
    assert together == solo
    assert crowd == solo * 4
    assert all(f == "length" for _, f in solo)
    assert tight.ctx.engine.scheduler.num_preemptions > 0   # the pool really was tight
    wait_for(lambda: held_blocks(tight) == 0)


def held_blocks(srv) -> int:
    """KV blocks some sequence holds (unused prefix-cache blocks are free to evict)."""
    blocks = srv.ctx.engine.scheduler.blocks
    return blocks.num_blocks - blocks.num_available


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


def test_disconnect_frees_kv_blocks(tight):
    async def main():
        async with aiohttp.ClientSession() as session:
            body = {"model": "tiny", "stream": True, "max_tokens": 200,
                    "messages": [{"role": "user", "content": "Tell me a very long story."}]}
            resp = await session.post(tight.url + "/v1/chat/completions", json=body)
            seen = 0
            async for line in resp.content:
                if line.startswith(b"data: "):
                    seen += 1
                if seen >= 4:
                    break
            assert tight.pool.num_free < tight.pool.num_blocks   # holds blocks mid-stream
            resp.close()   # the client goes away

    released_before = set(tight.executor.released)
    steps_before = len(tight.executor.steps)
    asyncio.run(main())
    wait_for(lambda: held_blocks(tight) == 0
             and not tight.ctx.engine.scheduler.has_work)
    (seq_id,) = set(tight.executor.released) - released_before
    sampled = sum(1 for step in tight.executor.steps[steps_before:] for st in step
                  if st.seq_id == seq_id and st.sample)
    assert sampled < 150   # aborted, not run to its 200 tokens
