"""A compiled matcher for spaCy's attribute ruler: the same matches, found by table lookups.

en_core_web_sm's ``attribute_ruler`` maps the tagger's fine-grained tags to coarse parts of speech
(``token.pos_``, which the text filters read) and fixes a few words' morphology and lemmas: 179 rules,
nearly all of one token, each a conjunction of equalities such as ``{"TAG": "NN"}`` or
``{"LOWER": "'s", "TAG": "POS"}``. spaCy runs them through its general-purpose ``Matcher``, which tries
every rule on every token: about 18 µs a token here, some 40% of the time ``nlp.pipe`` spends on a
caption with the components the conceptual-captions text filters need (tok2vec, tagger, attribute_ruler).

:func:`install` leaves the component, its rules and spaCy's own code that applies them
(``AttributeRuler.set_annotations``) in place, and swaps only how the matches are found. What a token
starts (the one-token rules it matches, and the longer rules whose first token it matches) depends only
on the values the rules test (here TAG, LOWER, DEP, IS_SPACE), which repeat from token to token: it is
found once per distinct combination of values, by looking each rule's first token up in a dictionary
keyed by the values it tests for equality, and memoised. A token then costs one dictionary lookup,
about 0.7 µs, whatever the number of rules. The matches returned are those ``AttributeRuler.match``
returns, in the same order: the same ``(rule, match id, start, end)`` tuples, deduplicated per rule and
span as the ``Matcher`` does, sorted the same way. Values are hashed with the functions the ``Matcher``
uses (``StringStore.add`` for equalities, ``get_string_id`` for ``IN``/``NOT_IN``; ``REGEX`` searches
the value's string with ``re``), and read from the tokens with ``Doc.to_array``.

Only what it reproduces exactly is compiled: equality, ``IN``, ``NOT_IN`` and ``REGEX`` on the
attributes in :data:`SUPPORTED`, no operators (``OP``), no fuzzy matching, no extension attributes. A
ruler with any other rule keeps spaCy's matcher (:func:`install` returns ``False``). Rules added after
installation (the number of rules changed) are compiled before the next document, or hand the ruler
back to spaCy's matcher. ``tests/curation/test_ruler.py`` compares the matches and the token attributes
with spaCy's on real captions, comments and edge cases, with and without the parser.
"""
from __future__ import annotations

import logging
import re
from collections import defaultdict

log = logging.getLogger(__name__)

# Attributes whose value for the Matcher is the stored field Doc.to_array reads (those en_core_web_sm's
# rules test, and ORTH; the tests compare each with spaCy's matcher).
SUPPORTED = ("ORTH", "LOWER", "TAG", "DEP", "IS_SPACE")
_ALIASES = {"TEXT": "ORTH"}


_REGEX = "REGEX"


class Unsupported(ValueError):
    """A rule the compiled matcher does not reproduce exactly."""


def _token_spec(spec: dict, strings, columns: dict) -> tuple[tuple, tuple]:
    """(equalities as ((column, value), ...) sorted, other tests as ((column, kind, values or regex), ...):
    kind True for IN, False for NOT_IN, _REGEX for a regular expression searched in the value's string,
    as the Matcher's predicates do)."""
    from spacy.strings import get_string_id

    equal, tests = [], []
    for raw_attr, value in spec.items():
        attr = _ALIASES.get(str(raw_attr).upper(), str(raw_attr).upper())
        if attr not in SUPPORTED:
            raise Unsupported(f"attribute {raw_attr!r}")
        column = columns.setdefault(attr, len(columns))
        if isinstance(value, dict):
            if not value or set(value) - {"IN", "NOT_IN", "REGEX"}:
                raise Unsupported(f"predicate {sorted(value)!r}")
            for op, values in value.items():
                if op == "REGEX":
                    if not isinstance(values, str):
                        raise Unsupported(f"REGEX {values!r}")
                    tests.append((column, _REGEX, re.compile(values)))
                    continue
                if not isinstance(values, (list, tuple)) or not all(isinstance(v, (str, int)) for v in values):
                    raise Unsupported(f"{op} values {values!r}")
                tests.append((column, op == "IN", frozenset(get_string_id(v) for v in values)))
        elif isinstance(value, bool):
            equal.append((column, int(value)))
        elif isinstance(value, str):
            equal.append((column, strings.add(value)))
        elif isinstance(value, int):
            equal.append((column, value))
        else:
            raise Unsupported(f"value {value!r}")
    return tuple(sorted(equal)), tuple(tests)


class CompiledMatcher:
    """The matches of an ``AttributeRuler``'s rules on a Doc, as ``AttributeRuler.match`` lists them."""

    def __init__(self, ruler):
        from spacy.attrs import IDS

        self.size = len(ruler.attrs)
        strings = self.strings = ruler.vocab.strings
        columns: dict[str, int] = {}
        # {equality columns: {their values: [(rule, other tests of token 0, specs of the next tokens)]}}
        tables: dict[tuple, dict] = defaultdict(lambda: defaultdict(list))
        self.match_ids = []
        for rule, entry in enumerate(ruler.patterns):
            self.match_ids.append(strings[str(rule)])
            for pattern in entry["patterns"]:
                if not pattern or not all(isinstance(spec, dict) for spec in pattern):
                    raise Unsupported(f"pattern {pattern!r}")
                specs = [_token_spec(spec, strings, columns) for spec in pattern]
                first_equal, first_tests = specs[0]
                key_columns = tuple(c for c, _ in first_equal)
                key = tuple(v for _, v in first_equal)
                tables[key_columns][key].append((rule, first_tests, tuple(specs[1:])))
        self.attr_ids = [IDS[name] for name in sorted(columns, key=columns.get)]
        # The empty key (a first token with no equality test) matches every token.
        self.tables = [(cols, dict(table)) for cols, table in tables.items()]
        self.memo: dict[tuple, tuple] = {}
        self.answers: dict[tuple, tuple] = {}  # one object per distinct answer, shared by the rows that give it

    # Distinct (TAG, LOWER, DEP, IS_SPACE) rows remembered: some 250 bytes each, as most rows share their answer.
    MEMO_SIZE = 50_000

    def first_token(self, row) -> tuple[tuple, tuple]:
        """What a token with these attribute values starts: (the one-token rules it matches, as
        (rule, match id)), ((rule, specs of the next tokens) of the longer rules whose first token it
        matches)). The same values always give the same answer, so it is memoised per distinct row."""
        singles, longer = {}, []
        strings = self.strings
        for cols, table in self.tables:
            candidates = table.get(tuple(row[c] for c in cols))
            for rule, first_tests, rest in candidates or ():
                if first_tests and not _tests_hold(row, first_tests, strings):
                    continue
                if rest:
                    longer.append((rule, rest))
                else:
                    singles[rule] = (rule, self.match_ids[rule])  # two patterns of a rule: one match
        return tuple(singles.values()), tuple(longer)

    def __call__(self, doc) -> list[tuple[int, int, int, int]]:
        n = len(doc)
        if n == 0 or not self.attr_ids:
            return []
        rows = doc.to_array(self.attr_ids).reshape(n, -1).tolist()
        memo = self.memo
        out = []
        spans = None  # matches of rules longer than a token, deduplicated per rule and span
        for start, row in enumerate(rows):
            key = tuple(row)
            hit = memo.get(key)
            if hit is None:
                if len(memo) >= self.MEMO_SIZE:
                    memo.clear()
                hit = self.first_token(row)
                hit = memo[key] = self.answers.setdefault(hit, hit)
            singles, longer = hit
            end = start + 1
            for rule, match_id in singles:
                out.append((rule, match_id, start, end))
            for rule, rest in longer:
                stop = end + len(rest)
                if stop <= n and all(_holds(rows[end + k], spec, self.strings) for k, spec in enumerate(rest)):
                    if spans is None:
                        spans = set()
                    spans.add((rule, self.match_ids[rule], start, stop))
        if spans:
            out.extend(spans)
        out.sort()
        return out


def _tests_hold(row, tests, strings) -> bool:
    for column, kind, values in tests:
        if kind is _REGEX:
            if not values.search(strings[row[column]]):
                return False
        elif (row[column] in values) != kind:
            return False
    return True


def _holds(row, spec, strings) -> bool:
    equal, tests = spec
    for column, value in equal:
        if row[column] != value:
            return False
    return _tests_hold(row, tests, strings)


def install(nlp) -> bool:
    """Give the pipeline's attribute ruler the compiled matcher. False (spaCy's matcher kept) where the
    pipeline has no attribute ruler or one of its rules is outside what the compiled matcher reproduces."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    try:
        compiled = CompiledMatcher(ruler)
    except Unsupported as exc:
        log.info("attribute ruler: spaCy's matcher kept (%s)", exc)
        return False
    state = {"matcher": compiled}

    def match(doc):
        if len(ruler.attrs) != state["matcher"].size:  # rules added since: compile them too
            try:
                state["matcher"] = CompiledMatcher(ruler)
            except Unsupported as exc:
                log.info("attribute ruler: back to spaCy's matcher (%s)", exc)
                del ruler.match
                return ruler.match(doc)
        return state["matcher"](doc)

    ruler.match = match  # AttributeRuler.__call__ calls self.match(doc), then its own set_annotations
    return True
