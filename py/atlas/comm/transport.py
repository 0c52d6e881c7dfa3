"""A TCP star between the ranks of one group: rank 0 listens, every other rank connects.

It carries the host collectives (rank 0 gathers every payload, computes each rank's reply
and sends it back: simple, deterministic, fast enough for CPU tests) and, for NCCL, the
exchange of the unique id and the host barrier. A peer that dies closes its socket, so the
others fail with a `CommError` naming it instead of waiting forever; a peer that stops
answering (hung, stopped) fails rank 0's exchange after `op_timeout_s`. The other ranks
wait on rank 0 without a limit: an idle server sends them nothing for as long as it idles.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Callable

from .backend import CommError

_LEN = struct.Struct("<Q")
_HELLO = struct.Struct("<ii")  # rank, world_size


class Star:
    """Rank 0 holds one socket per peer (index = peer rank); a peer holds one to rank 0."""

    def __init__(self, rank: int, world_size: int, socks: dict[int, socket.socket]) -> None:
        self.rank = rank
        self.world_size = world_size
        self._socks = socks

    @classmethod
    def connect(cls, rank: int, world_size: int, addr: str, port: int,
                timeout_s: float = 120.0, op_timeout_s: float | None = 600.0) -> "Star":
        """`timeout_s` bounds the rendezvous; `op_timeout_s` how long rank 0 waits for a
        peer's part of one exchange (None: forever)."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside a world of {world_size}")
        if world_size == 1:
            return cls(0, 1, {})
        if rank == 0:
            peers = _accept_peers(world_size, addr, port, timeout_s)
            for sock in peers.values():
                sock.settimeout(op_timeout_s)
            return cls(0, world_size, peers)
        return cls(rank, world_size, {0: _dial_root(rank, world_size, addr, port, timeout_s)})

    def exchange(self, payload: bytes,
                 reply: Callable[[list[bytes]], list[bytes]]) -> bytes:
        """Every rank sends `payload`; rank 0 applies `reply` to all payloads (rank order)
        and each rank receives its entry of the result."""
        if self.world_size == 1:
            return reply([payload])[0]
        if self.rank != 0:
            _send(self._socks[0], payload, 0)
            return _recv(self._socks[0], 0)
        payloads = [payload] + [_recv(self._socks[p], p) for p in range(1, self.world_size)]
        replies = reply(payloads)
        for p in range(1, self.world_size):
            _send(self._socks[p], replies[p], p)
        return replies[0]

    def close(self) -> None:
        for s in self._socks.values():
            s.close()
        self._socks = {}


def _accept_peers(world_size: int, addr: str, port: int,
                  timeout_s: float) -> dict[int, socket.socket]:
    server = socket.create_server((addr, port), reuse_port=False)
    server.settimeout(timeout_s)
    peers: dict[int, socket.socket] = {}
    try:
        while len(peers) < world_size - 1:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                missing = sorted(set(range(1, world_size)) - set(peers))
                raise CommError(f"rendezvous on {addr}:{port}: ranks {missing} did not "
                                f"connect within {timeout_s:.0f} s") from None
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer, world = _HELLO.unpack(_recv_exact(conn, _HELLO.size, -1))
            if world != world_size or not 0 < peer < world_size or peer in peers:
                conn.close()
                raise CommError(f"rendezvous: a peer announced rank {peer} of {world}; "
                                f"expected a new rank in 1..{world_size - 1} of {world_size}")
            peers[peer] = conn
    finally:
        server.close()
    return peers


def _dial_root(rank: int, world_size: int, addr: str, port: int,
               timeout_s: float) -> socket.socket:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5.0)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise CommError(f"rank {rank}: cannot reach rank 0 at {addr}:{port} "
                                f"within {timeout_s:.0f} s ({exc})") from None
            time.sleep(0.05)
    conn.settimeout(None)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sendall(_HELLO.pack(rank, world_size))
    return conn


def _send(sock: socket.socket, payload: bytes, peer: int) -> None:
    try:
        sock.sendall(_LEN.pack(len(payload)) + payload)
    except OSError as exc:
        raise CommError(f"rank {peer} went away ({exc})") from None


def _recv(sock: socket.socket, peer: int) -> bytes:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size, peer))
    return _recv_exact(sock, n, peer)


def _recv_exact(sock: socket.socket, n: int, peer: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:])
        except socket.timeout:
            raise CommError(f"rank {peer} did not answer within {sock.gettimeout():g} s "
                            "(hung or stopped?)") from None
        except OSError as exc:
            raise CommError(f"rank {peer} went away ({exc})") from None
        if k == 0:
            who = f"rank {peer}" if peer >= 0 else "a connecting peer"
            raise CommError(f"{who} closed its connection (worker died?)")
        got += k
    return bytes(buf)
