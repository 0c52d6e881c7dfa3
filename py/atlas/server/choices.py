"""The choices of one request, generated side by side and merged into one event stream:
`n` for its prompt, or `n` for each of a legacy completion's prompts (choice p * n + i).

A prompt's choice 0 starts first; its others start once the engine holds the prompt's KV
(choice 0's first output), so admission finds the prompt's full blocks in the prefix cache
and the choices share them instead of prefilling the prompt n times. Pure asyncio over
`Generation`s; the OpenAI handlers shape the events.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Sequence

from ..model.batch import TokenLogprobs
from .generation import Generation, Outcome
from .response_stream import StreamDelta

#: (choice index, its next delta) or (index, None) once that choice has ended
ChoiceEvent = tuple[int, StreamDelta | None]


class Choices:
    """`first` and its n - 1 siblings, then each of `more` (other prompts of the request)
    and its n - 1; iterate `events()` once."""

    def __init__(self, first: Generation, n: int, more: Sequence[Generation] = ()) -> None:
        self.firsts = [first, *more]
        #: every choice in index order, and the choice 0 of its prompt
        self.gens = [g if i == 0 else g.sibling(i) for g in self.firsts for i in range(n)]
        self._leads = [g for g in self.firsts for _ in range(n)]

    @property
    def outcomes(self) -> list[Outcome]:
        return [g.outcome for g in self.gens]

    def prompt_logprobs(self, index: int) -> tuple[list[int], tuple[TokenLogprobs, ...] | None]:
        """Choice `index`'s prompt ids and their logprobs (from the second token on; None
        until its prompt's choice 0 has them): every choice of a prompt shares choice 0's."""
        lead = self._leads[index]
        return lead.prompt.ids, lead.prompt_logprobs

    def usage_counts(self) -> tuple[int, int, int]:
        """(prompt, completion, cached) tokens: each prompt once, every choice's output."""
        firsts = [g.outcome for g in self.firsts]
        return (sum(o.prompt_tokens for o in firsts),
                sum(o.completion_tokens for o in self.outcomes),
                sum(o.cached_tokens for o in firsts))

    async def events(self) -> AsyncIterator[ChoiceEvent]:
        queue: asyncio.Queue[ChoiceEvent | BaseException] = asyncio.Queue()

        async def pump(index: int, gen: Generation, first: Generation) -> None:
            try:
                if gen is not first:
                    await first.prefilled.wait()
                async for delta in gen.deltas():
                    queue.put_nowait((index, delta))
                queue.put_nowait((index, None))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # re-raised in the consumer, which owns the response
                queue.put_nowait(exc)
            finally:
                first.prefilled.set()   # a failed first choice must not strand the others

        tasks = [asyncio.create_task(pump(i, g, lead))
                 for i, (g, lead) in enumerate(zip(self.gens, self._leads))]
        try:
            for _ in range(len(self.gens)):
                while True:
                    item = await queue.get()
                    if isinstance(item, BaseException):
                        raise item
                    yield item
                    if item[1] is None:
                        break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
