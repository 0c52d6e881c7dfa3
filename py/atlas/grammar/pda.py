"""The pushdown automaton over bytes, and its lowering from the IR.

Lowering (continuation passing): every rule becomes alternatives of flat element
sequences, each element a byte class or a call of another rule, ended by END. A branching
construct inside a sequence (an alternative, a repetition, a multi-byte character class)
becomes its own rule whose alternatives end with a *tail call* of a rule holding the rest
of the sequence. Tail calls replace the caller's frame instead of pushing a return
position, so a loop like ``[a-z]*`` keeps the stack flat, and walking a token through it
never leaves the frame it started in — which is what makes most tokens' acceptance
independent of the stack below (see `compiled.py`). Only references to *named* rules
(recursion, shared sub-schemas) push a return position.

Runtime: a parse state ("configuration") is the set of possible stacks; a stack is a tuple
of element positions, the last one a byte-class element waiting for input; the empty tuple
means the root rule has ended (the output may stop). Grammars are checked at compile time:
no left recursion (expansion would not terminate), no rule that can never finish.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import GrammarError
from .ir import Alt, Cls, Expr, Grammar, Lit, Ref, Rep, Seq
from .utf8 import utf8_sequences

CHAR, REF, END = 0, 1, 2

Element = tuple[int, int]          # (CHAR, 256-bit byte mask) or (REF, rule id)
Stack = tuple[int, ...]
Config = frozenset

_ALL_BYTES = (1 << 256) - 1


def _byte_mask(lo: int, hi: int) -> int:
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)


@dataclass(frozen=True, slots=True)
class Automaton:
    """Flat element arrays indexed by position; `rule_starts[r]` are the positions where
    rule r's alternatives begin."""
    kind: tuple[int, ...]
    arg: tuple[int, ...]            # CHAR: byte mask; REF: rule id; END: 0
    rule_starts: tuple[tuple[int, ...], ...]
    rule_names: tuple[str, ...]
    root: int

    @property
    def char_positions(self) -> list[int]:
        return [p for p, k in enumerate(self.kind) if k == CHAR]

    def initial(self) -> Config:
        out: set[Stack] = set()
        seen: set[Stack] = set()
        for start in self.rule_starts[self.root]:
            self._expand((start,), out, seen)
        return frozenset(out)

    def successors(self, config: Config) -> list[tuple[int, Config]]:
        """Every byte's successor at once: (byte mask, configuration) pairs for the bytes
        some stack accepts; bytes in no mask lead to the dead (empty) configuration.

        A stack's successor does not depend on which byte of its class was read, so each
        stack is expanded once and the byte space is split by which stacks accept it."""
        parts: list[tuple[int, frozenset[Stack]]] = [(_ALL_BYTES, frozenset())]
        arg = self.arg
        for stack in config:
            if not stack:
                continue
            mask = arg[stack[-1]]
            out: set[Stack] = set()
            self._expand(stack[:-1] + (stack[-1] + 1,), out, set())
            refined = []
            for part, succ in parts:
                if part & mask:
                    refined.append((part & mask, succ | out))
                if part & ~mask:
                    refined.append((part & ~mask, succ))
            parts = refined
        return [(part, succ) for part, succ in parts if succ]

    def _expand(self, stack: Stack, out: set[Stack], seen: set[Stack]) -> None:
        """Follow calls and returns until every stack waits on a byte class (or is empty)."""
        kind, arg, starts = self.kind, self.arg, self.rule_starts
        work = [stack]
        while work:
            st = work.pop()
            if st in seen:
                continue
            seen.add(st)
            if not st:
                out.add(st)
                continue
            pos = st[-1]
            k = kind[pos]
            if k == CHAR:
                out.add(st)
            elif k == END:
                work.append(st[:-1])
            else:
                base = st[:-1] if kind[pos + 1] == END else st[:-1] + (pos + 1,)
                for start in starts[arg[pos]]:
                    work.append(base + (start,))


class _Lowerer:
    """IR -> flat rules, by continuation passing (module docstring)."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.rules: list[list[list[Element]]] = []
        self.names: list[str] = []
        self.named: dict[str, int] = {}
        self._class_cache: dict[Cls, tuple[int, list[tuple[int, ...]]]] = {}
        self._never: int | None = None

    def new_rule(self, name: str) -> int:
        self.rules.append([])
        self.names.append(name)
        return len(self.rules) - 1

    def named_rule(self, name: str) -> int:
        if name not in self.named:
            rid = self.named[name] = self.new_rule(name)
            self.rules[rid] = [self.seq([self.grammar.rules[name]], None)]
        return self.named[name]

    def never(self) -> int:
        """A rule with no alternatives: what an empty character class lowers to."""
        if self._never is None:
            self._never = self.new_rule("<no character>")
        return self._never

    # -- classes --------------------------------------------------------------------

    def class_parts(self, cls: Cls) -> tuple[int, list[tuple[int, ...]]]:
        """(mask of the one-byte characters, multi-byte sequences as tuples of masks)."""
        if cls not in self._class_cache:
            single, multi = 0, []
            for lo, hi in cls.ranges:
                for sequence in utf8_sequences(lo, hi):
                    masks = tuple(_byte_mask(a, b) for a, b in sequence)
                    if len(masks) == 1:
                        single |= masks[0]
                    else:
                        multi.append(masks)
            self._class_cache[cls] = (single, multi)
        return self._class_cache[cls]

    def class_alternatives(self, cls: Cls) -> list[list[Element]]:
        single, multi = self.class_parts(cls)
        alts = [[(CHAR, single)]] if single else []
        return alts + [[(CHAR, m) for m in masks] for masks in multi]

    # -- sequences ------------------------------------------------------------------

    @staticmethod
    def flatten(items: list[Expr]) -> list[Expr]:
        """Sequences spliced in, literals split off empties, repetitions with a minimum
        unrolled into that many copies followed by an optional/unbounded tail."""
        out: list[Expr] = []
        work = list(reversed(items))
        while work:
            item = work.pop()
            if isinstance(item, Seq):
                work.extend(reversed(item.items))
            elif isinstance(item, Lit):
                if item.text:
                    out.append(item)
            elif isinstance(item, Rep):
                if item.max == 0:
                    continue
                if item.min:
                    rest_max = None if item.max is None else item.max - item.min
                    tail = [Rep(item.item, 0, rest_max)] if rest_max != 0 else []
                    work.extend(reversed([item.item] * item.min + tail))
                else:
                    out.append(item)
            else:
                out.append(item)
        return out

    def continuation(self, pending: list[Element]) -> int | None:
        if not pending:
            return None
        if len(pending) == 1 and pending[0][0] == REF:
            return pending[0][1]
        rid = self.new_rule("<continuation>")
        self.rules[rid] = [pending]
        return rid

    def seq(self, items: list[Expr], cont: int | None) -> list[Element]:
        """Elements matching `items` then the rule `cont` (as a tail call)."""
        pending: list[Element] = [(REF, cont)] if cont is not None else []
        for item in reversed(self.flatten(items)):
            if isinstance(item, Lit):
                pending = [(CHAR, 1 << b) for b in item.text.encode("utf-8")] + pending
            elif isinstance(item, Ref):
                pending = [(REF, self.named_rule(item.name))] + pending
            elif isinstance(item, Cls) and self._is_simple_class(item):
                alternatives = self.class_alternatives(item)
                pending = (alternatives[0] if alternatives else [(REF, self.never())]) + pending
            else:
                pending = [(REF, self.branch(item, self.continuation(pending)))]
        return pending

    def _is_simple_class(self, cls: Cls) -> bool:
        return len(self.class_alternatives(cls)) <= 1

    def branch(self, item: Expr, cont: int | None) -> int:
        """A rule for an alternative / repetition / multi-byte class followed by `cont`."""
        tail: list[Element] = [(REF, cont)] if cont is not None else []
        if isinstance(item, Alt):
            rid = self.new_rule("<alternative>")
            self.rules[rid] = [self.seq([option], cont) for option in item.options]
            return rid
        if isinstance(item, Cls):
            rid = self.new_rule("<character>")
            self.rules[rid] = [alt + tail for alt in self.class_alternatives(item)]
            return rid
        if isinstance(item, Rep) and item.max is None:
            rid = self.new_rule("<repeat>")
            self.rules[rid] = [self.seq([item.item], rid), tail]
            return rid
        if isinstance(item, Rep):
            following = cont
            for _ in range(item.max):
                rid = self.new_rule("<optional>")
                self.rules[rid] = [self.seq([item.item], following), tail]
                following = rid
            return following
        raise GrammarError(f"cannot lower {item!r}")


def _fixpoint(rules: list[list[list[Element]]],
              holds: Callable[[list[Element], set[int]], bool]) -> set[int]:
    """The least set of rules having an alternative for which `holds(alt, set)` is true."""
    found: set[int] = set()
    changed = True
    while changed:
        changed = False
        for rid, alts in enumerate(rules):
            if rid not in found and any(holds(alt, found) for alt in alts):
                found.add(rid)
                changed = True
    return found


def _productive_rules(rules: list[list[list[Element]]]) -> set[int]:
    """Rules that can finish: some alternative calls only rules that can."""
    return _fixpoint(rules, lambda alt, done: all(k != REF or a in done for k, a in alt))


def _nullable_rules(rules: list[list[list[Element]]]) -> set[int]:
    """Rules that can finish without reading a byte."""
    return _fixpoint(rules, lambda alt, done: all(k == REF and a in done for k, a in alt))


def _check_left_recursion(rules: list[list[list[Element]]], names: list[str]) -> None:
    """Rules that can call themselves before consuming a byte would expand forever."""
    nullable = _nullable_rules(rules)
    calls: list[set[int]] = []
    for alts in rules:
        first: set[int] = set()
        for alt in alts:
            for k, a in alt:
                if k != REF:
                    break
                first.add(a)
                if a not in nullable:
                    break
        calls.append(first)
    state = [0] * len(rules)            # 0 new, 1 on the path, 2 done
    for root in range(len(rules)):
        if state[root]:
            continue
        path = [(root, iter(calls[root]))]
        state[root] = 1
        while path:
            rid, children = path[-1]
            child = next(children, None)
            if child is None:
                state[rid] = 2
                path.pop()
            elif state[child] == 1:
                cycle = [names[r] for r, _ in path[[r for r, _ in path].index(child):]]
                raise GrammarError("left recursion (a rule can reach itself without "
                                   f"consuming input, e.g. an empty item repeated): "
                                   f"{' -> '.join(cycle + [names[child]])}")
            elif state[child] == 0:
                state[child] = 1
                path.append((child, iter(calls[child])))


def compile_automaton(grammar: Grammar) -> Automaton:
    """Lower, prune alternatives that can never finish, check, and flatten."""
    grammar.check_references()
    low = _Lowerer(grammar)
    root = low.named_rule(grammar.root)
    productive = _productive_rules(low.rules)
    if root not in productive:
        raise GrammarError(f"the grammar matches no string (rule {grammar.root!r} can "
                           "never finish)")
    rules = [[alt for alt in alts if all(k != REF or a in productive for k, a in alt)]
             for alts in low.rules]
    for alts in rules:
        for alt in alts:
            for k, a in alt:
                if k == CHAR and a & _ALL_BYTES == 0:
                    raise GrammarError("empty byte class")
    _check_left_recursion(rules, low.names)
    kind: list[int] = []
    arg: list[int] = []
    starts: list[tuple[int, ...]] = []
    for alts in rules:
        rule_starts = []
        for alt in alts:
            rule_starts.append(len(kind))
            for k, a in alt:
                kind.append(k)
                arg.append(a)
            kind.append(END)
            arg.append(0)
        starts.append(tuple(rule_starts))
    return Automaton(tuple(kind), tuple(arg), tuple(starts), tuple(low.names), root)
