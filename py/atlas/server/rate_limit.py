"""Per-key token buckets for requests/minute and tokens/minute, with a bounded key table.

Off unless ATLAS_RATE_LIMIT_RPM / ATLAS_RATE_LIMIT_TPM are positive; bursts default to the
per-minute caps (ATLAS_RATE_LIMIT_BURST_RPM / _TPM). The key table is an LRU of at most
`max_keys` entries, so a client inventing keys cannot grow memory without bound (an evicted
key simply starts again with a full bucket).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping

MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class RateLimits:
    rpm: float = 0.0
    tpm: float = 0.0
    burst_rpm: float = 0.0
    burst_tpm: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.rpm > 0 or self.tpm > 0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "RateLimits":
        def read(name: str, default: float) -> float:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            value = float(raw)
            if value < 0:
                raise ValueError(f"{name} must not be negative")
            return value
        rpm, tpm = read("ATLAS_RATE_LIMIT_RPM", 0.0), read("ATLAS_RATE_LIMIT_TPM", 0.0)
        return cls(rpm, tpm, read("ATLAS_RATE_LIMIT_BURST_RPM", rpm),
                   read("ATLAS_RATE_LIMIT_BURST_TPM", tpm))


class _Bucket:
    __slots__ = ("level", "stamp")

    def __init__(self, level: float, stamp: float) -> None:
        self.level = level
        self.stamp = stamp

    def refill(self, rate_per_min: float, capacity: float, now: float) -> None:
        self.level = min(capacity, self.level + (now - self.stamp) * rate_per_min / 60.0)
        self.stamp = now


class RateLimiter:
    """`admit(key, now)` charges one request; `charge_tokens` spends tokens (the bucket may
    go negative, which blocks the key's later requests until it refills)."""

    def __init__(self, limits: RateLimits, max_keys: int = MAX_KEYS) -> None:
        self.limits = limits
        self.max_keys = max_keys
        self._keys: OrderedDict[str, tuple[_Bucket, _Bucket]] = OrderedDict()

    def _buckets(self, key: str, now: float) -> tuple[_Bucket, _Bucket]:
        buckets = self._keys.get(key)
        if buckets is None:
            buckets = (_Bucket(self.limits.burst_rpm, now), _Bucket(self.limits.burst_tpm, now))
            self._keys[key] = buckets
            if len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(key)
        requests, tokens = buckets
        requests.refill(self.limits.rpm, self.limits.burst_rpm, now)
        tokens.refill(self.limits.tpm, self.limits.burst_tpm, now)
        return buckets

    def admit(self, key: str, now: float) -> str | None:
        """None when allowed (and charged one request); otherwise why not."""
        if not self.limits.enabled:
            return None
        requests, tokens = self._buckets(key, now)
        if self.limits.rpm > 0 and requests.level < 1.0:
            return f"rate limit of {self.limits.rpm:g} requests per minute exceeded"
        if self.limits.tpm > 0 and tokens.level <= 0.0:
            return f"rate limit of {self.limits.tpm:g} tokens per minute exceeded"
        if self.limits.rpm > 0:
            requests.level -= 1.0
        return None

    def charge_tokens(self, key: str, tokens: int, now: float) -> None:
        if self.limits.tpm > 0:
            self._buckets(key, now)[1].level -= tokens

    def __len__(self) -> int:
        return len(self._keys)
