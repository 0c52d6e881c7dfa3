"""OpenAI's logit_bias between its mask values on the CPU reference backend: the bias is added
to the token's logit before the draw, so a greedy draw is exactly the argmax of the biased
logits, and a biased sequence keeps its biases on every step (the sampler's per-slot
tables), beside an unbiased one in the same batch."""

import numpy as np

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from tests.numerics.test_token_masks import PROMPT, _greedy_logits as _logits, _runner


def test_greedy_draws_are_the_argmax_of_the_biased_logits():
    runner = _runner()
    engine = LLMEngine(runner, max_prefill_tokens=32)
    free = engine.generate([EngineRequest(PROMPT, GREEDY, 4)])[0].token_ids
    logits = _logits(runner, [])
    assert free[0] == int(np.argmax(logits))
    # lift a token the model ranks in the middle just past the best one
    target = int(np.argsort(logits)[logits.size // 2])
    lift = float(logits.max() - logits[target]) + 0.25
    assert lift < 100
    up = SamplingParams(temperature=0.0, logit_bias={target: lift})
    # suppress the best token by just enough to let the runner-up through
    second = int(np.argsort(logits)[-2])
    drop = float(logits[second] - logits[free[0]]) - 0.25
    down = SamplingParams(temperature=0.0, logit_bias={free[0]: drop})
    lifted, dropped, plain = engine.generate([EngineRequest(PROMPT, up, 4),
                                              EngineRequest(PROMPT, down, 4),
                                              EngineRequest(PROMPT, GREEDY, 4)])
    assert lifted.token_ids[0] == target and dropped.token_ids[0] == second
    assert plain.token_ids == free  # its batch neighbours' biases are not its own
    # every later step keeps the bias: each draw is the argmax of that step's biased logits
    for params, out in ((up, lifted.token_ids), (down, dropped.token_ids)):
        for k in range(1, len(out)):
            x = _logits(runner, out[:k])
            for token, bias in params.logit_bias:
                x[token] += np.float32(bias)
            assert out[k] == int(np.argmax(x)), (params, out, k)
