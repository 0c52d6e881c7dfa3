"""Token buckets per key, refill over time, and the bounded key table."""

from __future__ import annotations

import pytest

from atlas.server.auth import TokenAuth, parse_tokens_file, presented_token
from atlas.server.rate_limit import RateLimiter, RateLimits


def test_requests_per_minute_with_burst_and_refill():
    rl = RateLimiter(RateLimits(rpm=60, burst_rpm=2))
    assert rl.admit("a", 0.0) is None and rl.admit("a", 0.0) is None
    assert "requests per minute" in rl.admit("a", 0.0)
    assert rl.admit("b", 0.0) is None             # independent key
    assert rl.admit("a", 0.5) is not None          # half a request refilled
    assert rl.admit("a", 1.0) is None              # 60/min = one per second


def test_tokens_per_minute_blocks_after_debt():
    rl = RateLimiter(RateLimits(tpm=600, burst_tpm=100))
    assert rl.admit("k", 0.0) is None
    rl.charge_tokens("k", 250, 0.0)                # bucket at -150
    assert "tokens per minute" in rl.admit("k", 0.0)
    assert rl.admit("k", 14.0) is not None         # +140 tokens: still -10
    assert rl.admit("k", 16.0) is None             # +160: positive again


def test_disabled_limits_admit_everything_and_track_nothing():
    rl = RateLimiter(RateLimits())
    assert all(rl.admit(f"k{i}", 0.0) is None for i in range(100))
    assert len(rl) == 0


def test_key_table_is_bounded_lru():
    rl = RateLimiter(RateLimits(rpm=60, burst_rpm=1), max_keys=3)
    for key in ("a", "b", "c"):
        assert rl.admit(key, 0.0) is None
    assert rl.admit("a", 0.0) is not None          # a is exhausted and now most recent
    assert rl.admit("d", 0.0) is None              # evicts b, the least recently used
    assert len(rl) == 3
    assert rl.admit("a", 0.0) is not None          # a survived eviction
    assert rl.admit("b", 0.0) is None              # b starts afresh


def test_limits_from_env():
    limits = RateLimits.from_env({"ATLAS_RATE_LIMIT_RPM": "30", "ATLAS_RATE_LIMIT_TPM": "1000",
                                  "ATLAS_RATE_LIMIT_BURST_TPM": "50"})
    assert limits == RateLimits(30, 1000, 30, 50)
    with pytest.raises(ValueError):
        RateLimits.from_env({"ATLAS_RATE_LIMIT_RPM": "-1"})


def test_token_auth():
    auth = TokenAuth(["alpha", "beta"])
    assert auth.check("alpha") and auth.check("beta")
    assert not auth.check("alph") and not auth.check(None) and not auth.check("")
    assert presented_token({"Authorization": "Bearer alpha"}) == "alpha"
    assert presented_token({"x-api-key": "beta"}) == "beta"
    assert presented_token({"Authorization": "Basic xyz"}) is None
    assert parse_tokens_file("# keys\nalpha\n\n beta \n") == ["alpha", "beta"]
    with pytest.raises(ValueError):
        TokenAuth([])
