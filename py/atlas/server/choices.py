"""The `n` choices of one request, generated side by side and merged into one event stream.

Choice 0 starts first; the others start once the engine holds the prompt's KV (choice 0's
first output), so admission finds the prompt's full blocks in the prefix cache and the
choices share them instead of prefilling the prompt n times. Pure asyncio over
`Generation`s; the OpenAI handlers shape the events.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from .generation import Generation, Outcome
from .response_stream import StreamDelta

#: (choice index, its next delta) or (index, None) once that choice has ended
ChoiceEvent = tuple[int, StreamDelta | None]


class Choices:
    """`first` and its n - 1 siblings; iterate `events()` once."""

    def __init__(self, first: Generation, n: int) -> None:
        self.gens = [first] + [first.sibling(i) for i in range(1, n)]

    @property
    def outcomes(self) -> list[Outcome]:
        return [g.outcome for g in self.gens]

    def usage_counts(self) -> tuple[int, int, int]:
        """(prompt, completion, cached) tokens: the prompt once, every choice's output."""
        first = self.gens[0].outcome
        return (first.prompt_tokens, sum(o.completion_tokens for o in self.outcomes),
                first.cached_tokens)

    async def events(self) -> AsyncIterator[ChoiceEvent]:
        queue: asyncio.Queue[ChoiceEvent | BaseException] = asyncio.Queue()
        first = self.gens[0]

        async def pump(gen: Generation) -> None:
            try:
                if gen is not first:
                    await first.prefilled.wait()
                async for delta in gen.deltas():
                    queue.put_nowait((gen.index, delta))
                queue.put_nowait((gen.index, None))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # re-raised in the consumer, which owns the response
                queue.put_nowait(exc)
            finally:
                first.prefilled.set()   # a failed first choice must not strand the others

        tasks = [asyncio.create_task(pump(g)) for g in self.gens]
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
