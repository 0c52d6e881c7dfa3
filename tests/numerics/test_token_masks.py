"""Token masks beyond grammars on the CPU reference backend (engine/token_masks.py): a stop
token masked out of the draws before the request's first `min_tokens` output tokens, and
logit_bias's bans (-100) and exclusive selection (100), a multi-token bad word never completed.
A masked draw is the model's best allowed token, exactly."""

from pathlib import Path

import numpy as np

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest, FinishReason
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.kv_cache import BlockAllocator

MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
PROMPT = [5, 9, 200, 17, 33, 61]


def _runner():
    return load_runner(MODEL, backend="host", max_seq_len=64, max_batch_size=2,
                       max_prefill_tokens=32)


def _greedy_logits(runner, tokens: list[int]) -> np.ndarray:
    """The logits after prompt + tokens, one full prefill (no engine, no masks)."""
    seq = PROMPT + tokens
    pool = BlockAllocator(runner.num_kv_blocks)
    runner.execute([SeqChunk(0, seq, 0, pool.allocate(4), GREEDY, history=PenaltyHistory(seq))])
    logits = runner.read_logits(1)[0].copy()
    runner.release(0)
    return logits


def test_a_stop_token_waits_for_min_tokens_then_ends_the_output():
    runner = _runner()
    engine = LLMEngine(runner, max_prefill_tokens=32)
    free = engine.generate([EngineRequest(PROMPT, GREEDY, 8)])[0].token_ids
    stop = free[1]   # greedy's second token: a plain run stops there
    banned = frozenset({stop})
    plain = engine.generate([EngineRequest(PROMPT, GREEDY, 8, stop_token_ids=banned)])[0]
    assert plain.token_ids == free[:2] and plain.finish_reason == FinishReason.STOP

    (held,) = engine.generate([EngineRequest(PROMPT, GREEDY, 8, stop_token_ids=banned,
                                             min_tokens=4)])
    out = held.token_ids
    assert out[0] == free[0] and stop not in out[:4], out
    # the second draw is the model's best token other than the stop token
    logits = _greedy_logits(runner, out[:1])
    logits[stop] = -np.inf
    assert out[1] == int(np.argmax(logits))
    # after min_tokens the stop token ends the output again (or the budget does)
    assert (held.finish_reason == FinishReason.STOP and out[-1] == stop and len(out) > 4) or (
        held.finish_reason == FinishReason.LENGTH and len(out) == 8), (out, held.finish_reason)


def test_logit_bias_bans_and_exclusive_selection():
    runner = _runner()
    engine = LLMEngine(runner, max_prefill_tokens=32)
    free = engine.generate([EngineRequest(PROMPT, GREEDY, 6)])[0].token_ids
    (banned,) = engine.generate([EngineRequest(PROMPT, GREEDY, 6,
                                               banned_tokens=frozenset({free[0]}))])
    assert free[0] not in banned.token_ids
    logits = _greedy_logits(runner, [])
    logits[free[0]] = -np.inf
    assert banned.token_ids[0] == int(np.argmax(logits))
    # 100 on two tokens the model ranks low: every draw is one of them, the better first
    ranked = np.argsort(_greedy_logits(runner, []))
    pair = frozenset(int(t) for t in ranked[:2])
    (chosen,) = engine.generate([EngineRequest(PROMPT, GREEDY, 6, allowed_tokens=pair)])
    assert set(chosen.token_ids) <= pair and chosen.token_ids[0] == int(ranked[1])
    assert len(chosen.token_ids) == 6 and chosen.finish_reason == FinishReason.LENGTH


def test_a_multi_token_bad_word_is_never_completed():
    """bad_words (free[1], free[2]): the first draw of free[1] stays, the draw that would
    complete the word after it is the model's best other token; (free[0], 7) never matches
    the greedy path, so it changes nothing before the paths part."""
    runner = _runner()
    engine = LLMEngine(runner, max_prefill_tokens=32)
    free = engine.generate([EngineRequest(PROMPT, GREEDY, 6)])[0].token_ids
    word = (free[1], free[2])
    (got,) = engine.generate([EngineRequest(PROMPT, GREEDY, 6, bad_words=(word,))])
    out = got.token_ids
    assert out[:2] == free[:2] and out[2] != free[2]
    logits = _greedy_logits(runner, out[:2])
    logits[free[2]] = -np.inf
    assert out[2] == int(np.argmax(logits))
    assert all(tuple(out[i:i + 2]) != word for i in range(len(out) - 1))
    unmatched = (free[0], 7) if free[1] != 7 else (free[0], 8)
    (same,) = engine.generate([EngineRequest(PROMPT, GREEDY, 6, bad_words=(unmatched,))])
    assert same.token_ids == free
