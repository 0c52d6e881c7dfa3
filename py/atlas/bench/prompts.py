"""Prompts of a chosen length that no cache has seen.

Load levels need prompts of an exact token length whose prefixes differ, or a prefix cache
would turn prefill into a lookup and the sweep would measure the cache. When the server
tokenizes (`/tokenize`, as Atlas and vLLM do) the harness tokenizes a varied text once,
keeps the distinct ids (ordinary text never produces special tokens), and draws each
prompt as random ids from that pool, sent to /v1/completions as a token-id list: the length
is exact. Otherwise prompts are random common words, which most tokenizers encode as one
token each with the leading space, so the length is approximate (usage reports the truth).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from .client import BenchClient
from .errors import BenchError

PROMPT_MODES = ("auto", "tokens", "words")

WORDS = (
    "the of and to in is was for on are with as at be by this have from or had not but "
    "what all were when we there can an your which their said if do will each about how up "
    "out them then she many some so these would other into has more her two like him see "
    "time could no make than first been its who now people my made over did down only way "
    "find use may water long little very after words called just where most know get "
    "through back much before go good new write our used me man too any day same right look "
    "think also around another came come work three word must because does part even place "
    "well such here take why things help put years different away again off went old "
    "number great tell men say small every found still between name should home big give "
    "air line set own under read last never us left end along while might next sound below "
    "saw something thought both few those always looked show large often together asked "
    "house world going want school important until form food keep children feet land side "
    "without boy once animals life enough took sometimes four head above kind began almost "
    "live page got earth need far hand high year mother light parts country father let "
    "night following picture being study second eyes soon times story boys since white days "
    "ever paper hard near sentence better best across during today others however sure means "
    "knew try told young miles sun ways thing whole hear example heard several change answer "
    "room sea against top turned learn point city play toward five using himself usually"
).split()


def random_words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def _pool_text(rng: random.Random) -> str:
    """Every common word, shuffled, plus random letter strings for rarer sub-word ids."""
    words = list(WORDS)
    rng.shuffle(words)
    letters = "abcdefghijklmnopqrstuvwxyz"
    odd = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(400)]
    numbers = [str(rng.randint(0, 99999)) for _ in range(100)]
    return " ".join(words + odd + numbers)


@dataclass(frozen=True)
class PromptSource:
    """Makes prompts of `n` tokens (exact in "tokens" mode, about n in "words" mode)."""

    mode: Literal["tokens", "words"]
    pool: tuple[int, ...] = ()

    def prompt(self, rng: random.Random, n: int) -> list[int] | str:
        if self.mode == "tokens":
            return [rng.choice(self.pool) for _ in range(n)]
        return random_words(rng, n)


async def prompt_source(client: BenchClient, mode: str, rng: random.Random) -> PromptSource:
    """The source for `mode`: "tokens" needs the server's /tokenize; "auto" uses it when
    it is there and falls back to words."""
    if mode not in PROMPT_MODES:
        raise BenchError(f"prompt_mode must be one of {', '.join(PROMPT_MODES)}, got {mode!r}")
    if mode == "words":
        return PromptSource("words")
    ids = await client.tokenize(_pool_text(rng))
    pool = tuple(sorted(set(ids or ())))
    if len(pool) >= 2:
        return PromptSource("tokens", pool)
    if mode == "tokens":
        raise BenchError(f"prompt_mode=tokens needs the server's /tokenize endpoint, and "
                         f"{client.base}/tokenize gave no token ids; use prompt_mode=words")
    return PromptSource("words")
