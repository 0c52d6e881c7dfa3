"""One stream's decode rate through a running server, measured by the official `openai` SDK.

The engine profile (profile_decode.py) times the GPU step; a user sees the server's stream.
This client asks for a fixed number of tokens (`ignore_eos`, so generated weights cannot end
the stream early) one request at a time, and reports, per request, the time to the first
token and the decode rate between the first and the last content chunk, with the token count
taken from the server's usage record (a chunk may carry several tokens). Prints a table and
writes the rows as JSON.

Usage: stream_rate.py --url http://127.0.0.1:8897/v1 --model qwen3-0.6b [--tokens 1024]
       [--requests 5] [--out rows.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass

from openai import OpenAI


@dataclass(frozen=True)
class StreamTiming:
    """One request: seconds to the first content chunk, seconds from it to the last one,
    and the completion tokens the server counted."""

    ttft_s: float
    decode_s: float
    tokens: int

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first, over the time between the first and the last chunk."""
        return (self.tokens - 1) / self.decode_s if self.decode_s > 0 else float("nan")


def time_one(client: OpenAI, model: str, prompt: str, tokens: int) -> StreamTiming:
    """Stream one completion of exactly `tokens` tokens and time its chunks."""
    start = time.perf_counter()
    first = last = None
    used = 0
    stream = client.completions.create(
        model=model, prompt=prompt, max_tokens=tokens, temperature=0.0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    for chunk in stream:
        if chunk.usage is not None:
            used = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].text:
            now = time.perf_counter()
            first = now if first is None else first
            last = now
    if first is None or last is None:
        raise RuntimeError("the stream carried no text")
    if used != tokens:
        raise RuntimeError(f"asked for {tokens} tokens, the server counted {used}")
    return StreamTiming(first - start, last - first, used)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="the server's /v1 base URL")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--prompt", default="Write a long story about a lighthouse keeper.")
    ap.add_argument("--out", help="write the rows here as JSON")
    args = ap.parse_args()
    client = OpenAI(base_url=args.url, api_key="unused")
    time_one(client, args.model, args.prompt, 16)  # warm: first-request costs stay out
    rows = [time_one(client, args.model, args.prompt, args.tokens) for _ in range(args.requests)]
    print("| request | ttft ms | decode s | tokens | decode tok/s |")
    print("|---|---|---|---|---|")
    for i, r in enumerate(rows):
        print(f"| {i} | {r.ttft_s * 1e3:.1f} | {r.decode_s:.3f} | {r.tokens} "
              f"| {r.decode_tok_s:.1f} |")
    med = statistics.median(r.decode_tok_s for r in rows)
    print(f"median decode rate: {med:.1f} tok/s ({1e3 / med:.3f} ms a token)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": [asdict(r) | {"decode_tok_s": r.decode_tok_s} for r in rows],
                       "median_decode_tok_s": med}, f, indent=1)


if __name__ == "__main__":
    main()
