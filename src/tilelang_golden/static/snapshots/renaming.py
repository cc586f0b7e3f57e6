"""Is a CUDA difference only the compiler renaming its own variables? Alpha-equivalence on tokens.

TileLang names locals and loop variables itself (`i`, `i_1`, `__1`, `v_`, ...), and an upgrade
often renumbers them, burying the lines that really changed. A function's *local* names are its
parameters and the variables it declares. The two token sequences are aligned with every local
replaced by one placeholder; where they line up, each old local votes for the new name beside it,
and the winner (one old name per new name, per function) is its renaming. The old text with its
locals renamed that way either equals the new one token for token, whitespace aside ("identifiers
renamed only", with the map), or its diff against the new text shows only what really changed,
in the new text's names. A text whose only other difference is where a local array is declared
(`half_t C_local_cast[4];` hoisted out of a loop, as TileLang releases do) is "declarations moved
only", with the declarations named.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field

# Comments, strings, identifiers, numbers, operators, then any other single character: every
# character of the text lands in exactly one token (tests/static/snapshots/test_renaming.py checks the round trip).
_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
      | (?P<name>[A-Za-z_]\w*)
      | (?P<number>\d[\w.]*(?:[eE][+-]?\d+)?\w*)
      | (?P<space>\s+)
      | (?P<other>::|->|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|.)""",
    re.VERBOSE | re.MULTILINE | re.DOTALL,
)
# A name after one of these (or `*`, `&`) and before one of DECLARATION_END is declared there.
TYPE_WORDS = {
    "int", "unsigned", "signed", "char", "short", "long", "float", "double", "bool", "auto", "void", "const",
    "half_t", "bfloat16_t", "uchar", "half", "__half", "__nv_bfloat16", "__restrict__",
    "uint", "uint1", "uint2", "uint4",
    "int1", "int2", "int4", "float2", "float4", "uint64_t", "int64_t", "uint32_t", "int32_t", "size_t",
    "half2", "__half2", "__nv_bfloat162", "fp8_e4_t", "fp8_e5_t", "dim3", "CUtensorMap",
}  # fmt: skip
DECLARATION_END = {"=", ";", "[", ",", ")"}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def all_tokens(text: str) -> list[Token]:
    """Every token, whitespace and comments included, so the text can be put back together."""
    return [Token(match.lastgroup or "other", match.group()) for match in _TOKEN.finditer(text)]


def comments(text: str) -> list[str]:
    """The text's comments, in order."""
    return [t.text for t in all_tokens(text) if t.kind == "comment"]


def tokens(text: str) -> list[Token]:
    """The significant tokens: no whitespace, no comments."""
    return [t for t in all_tokens(text) if t.kind not in ("space", "comment")]


def _significant(toks: list[Token]) -> list[int]:
    return [i for i, t in enumerate(toks) if t.kind not in ("space", "comment")]


def _functions(toks: list[Token]) -> list[tuple[int, int]]:
    """[start, end) ranges of significant-token positions: a top-level brace body with the signature before it."""
    ranges, depth, start = [], 0, 0
    for index, token in enumerate(toks):
        if token.text == "{":
            depth += 1
        elif token.text == "}":
            depth -= 1
            if depth == 0:
                ranges.append((start, index + 1))
                start = index + 1
        elif depth == 0 and token.text == ";":
            start = index + 1  # a declaration at file scope ends what came before
    return ranges


def _declares(toks: list[Token], index: int) -> bool:
    """Whether the name at `index` is being declared: after a type word or `*`/`&`, before `=`, `;`, ..."""
    if not 0 < index < len(toks) - 1:
        return False
    token, before, after = toks[index], toks[index - 1], toks[index + 1]
    return (
        token.kind == "name"
        and token.text not in TYPE_WORDS
        and after.text in DECLARATION_END
        and (before.text in TYPE_WORDS or before.text in ("*", "&"))
    )


def _locals(toks: list[Token], start: int, end: int) -> set[str]:
    return {toks[index].text for index in range(start, end) if _declares(toks, index)}


@dataclass(frozen=True)
class Text:
    """A text's tokens (whitespace included), its significant tokens' positions, and which are locals."""

    tokens: list[Token]
    significant: list[int]
    local: list[tuple[int, str] | None]  # per significant token: (function, name@declaration) if a local


def analyse(text: str) -> Text:
    everything = all_tokens(text)
    positions = _significant(everything)
    toks = [everything[i] for i in positions]
    local: list[tuple[int, str] | None] = [None] * len(toks)
    for function, (start, end) in enumerate(_functions(toks)):
        names = _locals(toks, start, end)
        # A declaration starts a new variable; a use is the latest declaration of its name (sibling
        # loops that both declare `i` are two variables, and generated code does not shadow).
        latest: dict[str, int] = {}
        for index in range(start, end):
            token = toks[index]
            if token.kind != "name" or token.text not in names:
                continue
            if _declares(toks, index) or token.text not in latest:
                latest[token.text] = index
            local[index] = (function, f"{token.text}@{latest[token.text]}")
    return Text(everything, positions, local)


def _shape(text: Text) -> list[str]:
    """Significant tokens with every local name replaced by one placeholder: what alignment sees."""
    return ["\0local" if text.local[i] else text.tokens[p].text for i, p in enumerate(text.significant)]


def renaming_between(old: Text, new: Text) -> dict[tuple[int, str], str]:
    """(function, old local) -> new name: for each old local, the new name it lines up with most
    often where the two texts' shapes agree, each new name given to one old local at most."""
    votes: dict[tuple[tuple[int, str], tuple[int, str]], int] = {}
    matcher = difflib.SequenceMatcher(a=_shape(old), b=_shape(new), autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            before, after = old.local[a + k], new.local[b + k]
            if before and after:
                votes[before, after] = votes.get((before, after), 0) + 1
    mapping: dict[tuple[int, str], str] = {}
    taken: set[tuple[int, str]] = set()
    for (before, after), _count in sorted(votes.items(), key=lambda item: -item[1]):
        if before not in mapping and after not in taken:
            mapping[before] = after[1].split("@")[0]
            taken.add(after)
    return mapping


def renamed(old: Text, mapping: dict[tuple[int, str], str]) -> str:
    """The old text with its locals given their new names."""
    out = [t.text for t in old.tokens]
    for index, position in enumerate(old.significant):
        key = old.local[index]
        if key in mapping:
            out[position] = mapping[key]
    return "".join(out)


def array_declarations(texts: list[str]) -> tuple[list[str], Counter[str]]:
    """The significant tokens without their local array declarations (`half_t C_local_cast[4];`: a
    statement of a type word, a name and constant extents, no initializer), and those declarations."""
    kept: list[str] = []
    found: Counter[str] = Counter()
    index = 0
    while index < len(texts):
        end = _array_declaration_end(texts, index)
        if end and (not kept or kept[-1] in ("{", "}", ";")):
            found[" ".join(texts[index:end]).replace(" [ ", "[").replace(" ]", "]").replace(" ;", ";")] += 1
            index = end
            continue
        kept.append(texts[index])
        index += 1
    return kept, found


def _array_declaration_end(texts: list[str], start: int) -> int:
    """The index after `type name[N]...;` starting at `start`, or 0 when none starts there."""
    if texts[start] not in TYPE_WORDS or start + 2 >= len(texts) or texts[start + 2] != "[":
        return 0
    index = start + 2
    while index + 2 < len(texts) and texts[index] == "[" and texts[index + 1].isdigit() and texts[index + 2] == "]":
        index += 3
    return index + 1 if index > start + 2 and index < len(texts) and texts[index] == ";" else 0


@dataclass(frozen=True)
class Classification:
    renamed_only: bool  # same text up to a consistent renaming of locals (and whitespace)
    renaming: dict[str, str]  # old name -> new name, for the names that differ
    canonical_diff: list[str]  # the diff after renaming the old text's locals: only the real changes
    # Not renamed only, but the same once local array declarations are set aside, which are the same ones
    # in both texts (`half_t C_local_cast[4]`): declarations moved between scopes, and nothing else.
    moved: tuple[str, ...] = field(default=())


def classify(old: str, new: str, labels: tuple[str, str] = ("old", "new"), context: int = 3) -> Classification:
    """Renamed only (with the map), or the diff of the two texts after the renaming is undone, its two
    sides named by `labels`, with the declarations it only moves (`moved`) when that is all it does."""
    before, after = analyse(old), analyse(new)
    mapping = renaming_between(before, after)
    aligned = renamed(before, mapping)
    differing = dict(sorted((name, mapping[key]) for key in mapping if (name := key[1].split("@")[0]) != mapping[key]))
    old_tokens, new_tokens = [t.text for t in tokens(aligned)], [t.text for t in tokens(new)]
    if old_tokens == new_tokens:
        return Classification(True, differing, [])
    diff = list(difflib.unified_diff(aligned.splitlines(), new.splitlines(), *labels, n=context, lineterm=""))
    (old_rest, old_arrays), (new_rest, new_arrays) = array_declarations(old_tokens), array_declarations(new_tokens)
    if old_arrays and old_rest == new_rest and old_arrays == new_arrays:
        removed = [line[1:].strip() for line in diff if line.startswith("-") and not line.startswith("---")]
        moved = tuple(line for line in removed if line in old_arrays) or tuple(sorted(old_arrays))
        return Classification(False, differing, diff, moved)
    return Classification(False, {}, diff)
