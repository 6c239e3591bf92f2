"""The hand-written fluency dev set (tests/modeling/data/fluency_dev.tsv) and the curator's fluent corpus
(fluent_captions_dev.txt) keep their format and balance: a classifier judged on them must not be able to win
with the label shares, a length rule or a copied sentence."""
import csv
from collections import Counter
from pathlib import Path
from statistics import mean

import pytest

DATA = Path(__file__).parent / "data"
HEADER = ["label", "error", "source", "text"]
ERRORS = {"article", "preposition", "agreement", "tense", "word_order", "missing_verb", "dropped_word",
          "literal", "lexical", "repetition", "pronoun", "plural", "mixed"}
SOURCES = {"news", "stock", "museum", "product", "sports", "social", "travel", "food", "archive",
           "realestate", "science", "fashion"}


def read_rows(path):
    with path.open(encoding="utf-8", newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    return list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def rows():
    header, *body = read_rows(DATA / "fluency_dev.tsv")
    assert header == HEADER
    return body


def test_every_row_has_four_fields_a_binary_label_and_a_known_source(rows):
    for number, row in enumerate(rows, start=2):
        assert len(row) == 4, f"row {number}: {row}"
        label, error, source, text = row
        assert label in {"0", "1"}, f"row {number}: label {label!r}"
        assert source in SOURCES, f"row {number}: source {source!r}"
        assert text == text.strip() and text, f"row {number}: empty or padded text"


def test_error_is_none_exactly_when_the_caption_is_fluent(rows):
    for label, error, _, text in rows:
        if label == "1":
            assert error == "none", text
        else:
            assert error in ERRORS, f"{error!r}: {text}"


def test_the_set_is_large_and_balanced(rows):
    assert len(rows) >= 340
    share = sum(row[0] == "0" for row in rows) / len(rows)
    assert 0.40 <= share <= 0.60
    errors = Counter(row[1] for row in rows if row[0] == "0")
    assert {name: errors[name] for name in ERRORS if errors[name] < 12} == {}
    sources = Counter(row[2] for row in rows)
    assert {name: sources[name] for name in SOURCES if sources[name] < 15} == {}


def test_no_caption_appears_twice(rows):
    texts = Counter(row[3].casefold() for row in rows)
    assert [text for text, n in texts.items() if n > 1] == []


def test_length_does_not_separate_the_classes(rows):
    words = {label: [len(row[3].split()) for row in rows if row[0] == label] for label in "01"}
    assert abs(mean(words["1"]) - mean(words["0"])) < 3
    # both classes reach short and long captions
    for label in "01":
        assert min(words[label]) <= 6 and max(words[label]) >= 35


def test_the_fluent_corpus_is_separate_from_the_dev_set(rows):
    corpus = [line.rstrip("\n") for line in (DATA / "fluent_captions_dev.txt").open(encoding="utf-8")]
    assert len(corpus) >= 200 and all(line.strip() and "\t" not in line for line in corpus)
    assert len(set(corpus)) == len(corpus)
    assert set(corpus).isdisjoint(row[3] for row in rows)
