"""The Responses API's store: stored responses (each with the conversation it ends) and
`/v1/conversations` (an object and its items) in SQLite (stdlib sqlite3), the one I/O
adapter of the Responses API.

A file under the server's state directory (`--store-path`, default
~/.atlas/responses.sqlite3) survives restarts; ":memory:" keeps it in the process.
Bounded: entries older than `max_age_s` and all but the newest `max_entries` (of each
table) are deleted on every insert. Safe under concurrent requests: one connection,
serialized by a lock (handlers call in from worker threads), read-modify-write of a
conversation in one transaction, WAL journaling for a file so readers of other processes
never see a half-written row.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    response TEXT NOT NULL,
    history TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses (created_at);
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    conversation TEXT NOT NULL,
    items TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_created ON conversations (created_at);
"""

#: a conversation as stored: its object (id, created_at, metadata) and its items
ConversationRecord = tuple[dict[str, Any], list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A response object as returned, and the conversation it ends (chat messages)."""

    response: dict[str, Any]
    history: list[dict[str, Any]]


class SqliteResponseStore:
    def __init__(self, path: str | Path, *, max_entries: int = 10_000,
                 max_age_s: float = 30 * 24 * 3600,
                 clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1 or max_age_s <= 0:
            raise ValueError("the response store needs max_entries >= 1 and max_age_s > 0")
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise ValueError(f"cannot open the response store {self.path}: {exc}") from None

    def put(self, rid: str, stored: StoredResponse) -> None:
        now = self._clock()
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                             (rid, now, json.dumps(stored.response),
                              json.dumps(stored.history)))
            self._db.execute("DELETE FROM responses WHERE created_at < ?",
                             (now - self.max_age_s,))
            self._db.execute("DELETE FROM responses WHERE id NOT IN (SELECT id FROM responses "
                             "ORDER BY created_at DESC LIMIT ?)", (self.max_entries,))

    def get(self, rid: str) -> StoredResponse | None:
        """The stored response, None when absent or past `max_age_s`."""
        with self._lock:
            row = self._db.execute("SELECT response, history FROM responses WHERE id = ? "
                                   "AND created_at >= ?",
                                   (rid, self._clock() - self.max_age_s)).fetchone()
        return None if row is None else StoredResponse(json.loads(row[0]), json.loads(row[1]))

    def delete(self, rid: str) -> bool:
        with self._lock, self._db:
            return self._db.execute("DELETE FROM responses WHERE id = ?", (rid,)).rowcount > 0

    # -- conversations (same bounds) --------------------------------------------------------

    def put_conversation(self, cid: str, record: ConversationRecord) -> None:
        now = self._clock()
        with self._lock, self._db:
            self._write_conversation(cid, now, record)
            self._db.execute("DELETE FROM conversations WHERE created_at < ?",
                             (now - self.max_age_s,))
            self._db.execute("DELETE FROM conversations WHERE id NOT IN (SELECT id FROM "
                             "conversations ORDER BY created_at DESC LIMIT ?)",
                             (self.max_entries,))

    def get_conversation(self, cid: str) -> ConversationRecord | None:
        with self._lock:
            return self._read_conversation(cid)

    def update_conversation(self, cid: str,
                            change: Callable[[ConversationRecord], ConversationRecord]
                            ) -> ConversationRecord | None:
        """Read, `change` and write back in one transaction (concurrent requests adding
        items to one conversation never lose each other's); None when it is absent. An
        exception from `change` leaves it untouched."""
        with self._lock, self._db:
            record = self._read_conversation(cid)
            if record is None:
                return None
            row = self._db.execute("SELECT created_at FROM conversations WHERE id = ?",
                                   (cid,)).fetchone()
            record = change(record)
            self._write_conversation(cid, row[0], record)
            return record

    def delete_conversation(self, cid: str) -> bool:
        with self._lock, self._db:
            return self._db.execute("DELETE FROM conversations WHERE id = ?",
                                    (cid,)).rowcount > 0

    def _read_conversation(self, cid: str) -> ConversationRecord | None:
        row = self._db.execute("SELECT conversation, items FROM conversations WHERE id = ? "
                               "AND created_at >= ?",
                               (cid, self._clock() - self.max_age_s)).fetchone()
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    def _write_conversation(self, cid: str, created_at: float,
                            record: ConversationRecord) -> None:
        self._db.execute("INSERT OR REPLACE INTO conversations VALUES (?, ?, ?, ?)",
                         (cid, created_at, json.dumps(record[0]), json.dumps(record[1])))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
