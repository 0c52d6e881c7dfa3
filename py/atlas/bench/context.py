"""What a workload runs with: the client, progress, the server's context length, and the
two ways of sending a batch of requests (one after another; N streams kept busy).

Every request must succeed. The first failure stops new sends (in-flight ones finish) and
breaks the run with the server's message: numbers computed around failed requests would
describe a different load than the one asked for.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from .client import BenchClient, RequestResult
from .errors import BenchError
from .progress import Progress

Endpoint = Literal["chat", "completion"]


@dataclass
class BenchContext:
    client: BenchClient
    progress: Progress
    max_model_len: int | None = None

    def check_fits(self, prompt_tokens: int, max_tokens: int, what: str) -> None:
        """Refuse, before sending anything, a shape the server's context cannot hold."""
        if self.max_model_len is not None and prompt_tokens + max_tokens > self.max_model_len:
            raise BenchError(f"{what}: {prompt_tokens} prompt + {max_tokens} output tokens "
                             f"exceed the server's context of {self.max_model_len} tokens")

    async def sequential(self, label: str, endpoint: Endpoint,
                         bodies: Sequence[dict[str, Any]]) -> list[RequestResult]:
        return await self.closed_loop(label, endpoint, bodies, 1)

    async def closed_loop(self, label: str, endpoint: Endpoint,
                          bodies: Sequence[dict[str, Any]],
                          concurrency: int) -> list[RequestResult]:
        """Send every body with `concurrency` streams: each stream sends its next request as
        soon as its previous one ends. Results come back in body order."""
        results: list[RequestResult | None] = [None] * len(bodies)
        pending = iter(range(len(bodies)))
        failed: list[tuple[int, RequestResult]] = []
        send = self.client.stream_chat if endpoint == "chat" else self.client.stream_completion

        async def stream() -> None:
            for index in pending:
                if failed:
                    return
                result = await send(bodies[index])
                results[index] = result
                if not result.ok:
                    failed.append((index, result))
                    return
                self.progress.advance()

        self.progress.begin(label, len(bodies))
        try:
            await asyncio.gather(*(stream() for _ in range(min(concurrency, len(bodies)))))
        finally:
            self.progress.end()
        if failed:
            index, result = failed[0]
            raise BenchError(f"{label}: request {index + 1} of {len(bodies)} failed: "
                             f"{result.error}")
        return [r for r in results if r is not None]
