"""Regular expressions and EBNF grammars: membership against Python's `re` on random strings,
random walks over the real vocabulary, and clear errors for what cannot be compiled."""

from __future__ import annotations

import random
import re

import pytest

from atlas.grammar import GrammarError, GrammarSyntaxError
from tests.unit.grammar_support import accepts, random_walk, smollm2_compiler

PATTERNS = [
    r"[a-z]+@[a-z]+\.(com|org)",
    r"\d{3}-\d{2,4}",
    r"(ab|cd)*e?",
    r"[^abc\n]{2}x",
    r"^\w+\s\W$",
    r"colou?r|gr[ae]y",
    r"(\+|-)?[0-9]+(\.[0-9]*)?",
    r"a{0}b{1,}c{2,3}",
    r"[\x41-\x43\u00e9]+",
    r"(?:x|(?P<n>y)z)+",
    r"[-.a]+\.",
    r"é+|ñ?ü",
]
ALPHABET = "abcdexyzABC0123456789-.+@ \né\u00f1\u00fc\x07_orgcm!"


def _random_strings(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
            for _ in range(count)]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regex_membership_agrees_with_python_re(pattern: str) -> None:
    grammar = smollm2_compiler().compile_regex(pattern)
    compiled = re.compile(pattern, re.ASCII)     # \w \d \s are ASCII, as in ECMA-262
    rng = random.Random(pattern)
    samples = _random_strings(rng, 1500)
    for seed in range(4):
        samples.append(random_walk(grammar, seed).decode("utf-8"))
    for text in samples:
        assert accepts(grammar, text) == bool(compiled.fullmatch(text)), repr(text)


@pytest.mark.parametrize("pattern,message", [
    (r"(a)\1", "unsupported escape"),
    (r"(?=a)b", "lookahead"),
    (r"(?<=a)b", "lookbehind"),
    (r"a\bc", "unsupported escape"),
    (r"a^b", "start/end"),
    (r"a$b", "only supported at the end"),
    (r"*a", "nothing to repeat"),
    (r"(ab", "expected ')'"),
    (r"ab)", "unbalanced"),
    (r"[z-a]", "out of order"),
    (r"[ab", "unterminated"),
    (r"a{3,2}", "bad repetition"),
    (r"a++", "possessive"),
])
def test_regex_errors_name_the_problem(pattern: str, message: str) -> None:
    with pytest.raises(GrammarSyntaxError, match=re.escape(message)):
        smollm2_compiler().compile_regex(pattern)


ARITHMETIC = r'''
# integer arithmetic with parentheses: every sentence is a Python expression
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor ("*" factor)*
factor ::= [1-9] [0-9]{0,3} | "(" expr ")"
'''


def test_ebnf_recursive_grammar_walks_are_valid_python_expressions() -> None:
    grammar = smollm2_compiler().compile_ebnf(ARITHMETIC)
    for seed in range(5):
        text = random_walk(grammar, seed).decode()
        assert isinstance(eval(compile(text, "<walk>", "eval"), {}), int), text
    assert accepts(grammar, "(1+2)*30-(4)")
    for bad in ("1+", "(1", "01", "1**2", "12345", "()"):
        assert not accepts(grammar, bad), bad


@pytest.mark.parametrize("text,good,bad", [
    ('root ::= "a" | "b" "c"', ["a", "bc"], ["b", "ac", ""]),
    ("root ::= [^\\n\"]* \"!\"", ["!", "x y!"], ["x\n!", "\"!"]),
    ('root ::= ("ab" | "c")+ "."  # comment\n', ["ab.", "cabc."], [".", "a."]),
    ('root ::= x{2} y?\nx ::= "x"\ny ::= "\\x79" | "\\u00e9"', ["xx", "xxy", "xxé"],
     ["x", "xxx"]),
    ("root ::= 'single' [\\d]", ["single7"], ["single"]),
    ('root ::= item ("," item){1,2}\nitem ::= [a-z]', ["a,b", "a,b,c"], ["a", "a,b,c,d"]),
    ('root ::= .{3}', ["abc", "日本語"], ["ab", "abcd"]),
])
def test_ebnf_membership(text: str, good: list[str], bad: list[str]) -> None:
    grammar = smollm2_compiler().compile_ebnf(text)
    for sample in good:
        assert accepts(grammar, sample), sample
    for sample in bad:
        assert not accepts(grammar, sample), sample


@pytest.mark.parametrize("text,error,message", [
    ("root ::= root \"a\" | \"b\"", GrammarError, "left recursion"),
    ("root ::= (\"a\"?)* \"b\"", GrammarError, "left recursion"),
    ("root ::= \"a\" root", GrammarError, "matches no string"),
    ("root ::= missing", GrammarError, "undefined rule 'missing'"),
    ("start ::= \"a\"", GrammarError, "no root rule"),
    ("root ::= \"a\"\nroot ::= \"b\"", GrammarError, "defined twice"),
    ("root ::= \"a", GrammarSyntaxError, "unterminated literal"),
    ("root := \"a\"", GrammarSyntaxError, "expected '::='"),
    ("root ::= (\"a\"", GrammarSyntaxError, "expected ')'"),
    ("root ::= \"a\"{2,1}", GrammarSyntaxError, "bad repetition"),
    ("root ::= \"\\q\"", GrammarSyntaxError, "unknown escape"),
])
def test_ebnf_errors(text: str, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        smollm2_compiler().compile_ebnf(text)


def test_syntax_errors_carry_the_offset() -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        smollm2_compiler().compile_ebnf('root ::= "a" )')
    assert info.value.offset == 13 and "offset 13" in str(info.value)
