"""Raw HTTP for bad-input tests (the SDKs refuse to send malformed requests)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def request(url: str, body: bytes | dict | None = None, headers: dict | None = None,
            method: str | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None
                                                                   else "GET"),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        status, raw, ctype = err.code, err.read(), err.headers.get("Content-Type", "")
    return status, json.loads(raw) if "json" in ctype else raw.decode()
