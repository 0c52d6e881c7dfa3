"""An embedding model's pooled hidden state as /v1/embeddings returns it.

The engine reports the prompt's last-token final-norm hidden state (last-token pooling, what
Qwen3-Embedding and other decoder embedding models use). It is returned unit length, as
OpenAI's embeddings are and sentence-transformers' `Normalize` step makes them; `dimensions`
keeps the leading ones first (Matryoshka truncation) and normalizes what is kept. `base64`
is the little-endian float32 bytes, the encoding OpenAI's SDK asks for by default.
"""

from __future__ import annotations

import base64

import numpy as np

from .errors import invalid


def embedding_vector(hidden: np.ndarray, dimensions: int | None) -> np.ndarray:
    """float32 unit vector of the first `dimensions` values of `hidden` (all by default)."""
    if dimensions is not None and dimensions > hidden.size:
        raise invalid(f"dimensions={dimensions} exceeds this model's {hidden.size}",
                      "dimensions")
    kept = np.asarray(hidden[:dimensions], dtype=np.float64)
    norm = np.linalg.norm(kept)
    return (kept / norm if norm > 0 else kept).astype(np.float32)


def encode_embedding(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    """The wire form: a list of floats, or base64 of the little-endian float32 bytes."""
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()
