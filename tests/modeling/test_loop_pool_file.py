"""A labelled pool file for the loop's simulation (benchmarks/loop.py --pool): the development set's format
reads, and a file in another format, with one class, or with a bad label is a clear error naming the line,
with exit code 2 from the benchmark (checked before any database work)."""
import subprocess
import sys
from pathlib import Path

import pytest

from modeling.loop.pool_file import PoolFileError, parse_pool, read_pool

ROOT = Path(__file__).resolve().parents[2]
GOOD = "# a comment\nlabel\terror\tsource\ttext\n" + "".join(
    f"{n % 2}\t{'none' if n % 2 else 'article'}\tnews\tCaption number {n} of the pool.\n" for n in range(20))


def test_the_development_sets_format_reads_with_comments_skipped(tmp_path):
    path = tmp_path / "pool.tsv"
    path.write_text(GOOD, encoding="utf-8")
    rows = read_pool(path)
    assert len(rows) == 20 and {r["label"] for r in rows} == {0, 1}
    assert rows[0] == {"label": 0, "error": "article", "source": "news", "text": "Caption number 0 of the pool.",
                       "line": 3}


@pytest.mark.parametrize("content, code, words", [
    ("label,error,source,text\n1,none,news,A dog.\n", "bad_header", "is it comma-separated"),
    ("text\tlabel\n", "bad_header", "label / error / source / text"),
    ("label\terror\tsource\ttext\n1\tnone\tnews\n", "bad_row", "line 2: 3 tab-separated field(s)"),
    ("label\terror\tsource\ttext\nfluent\tnone\tnews\tA dog.\n", "bad_label", "line 2: the label is 'fluent'"),
    ("label\terror\tsource\ttext\n" + "1\tnone\tnews\tA dog runs.\n" * 30, "one_class", "one class only: 30 rows"),
    ("label\terror\tsource\ttext\n" + "1\tnone\tnews\tA dog runs.\n" * 30 + "0\tarticle\tnews\tA dog run.\n",
     "too_few", "each needs at least 5"),
    ("# only comments\n", "empty", "no header"),
])
def test_a_pool_in_the_wrong_format_or_with_one_class_is_a_clear_error(content, code, words):
    with pytest.raises(PoolFileError) as info:
        parse_pool(content, "pool.tsv")
    assert info.value.code == code and words in str(info.value)


def test_a_file_that_is_not_utf8_or_missing_is_a_clear_error(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("label\terror\tsource\ttext\n1\tnone\tnews\tcaf\xe9\n".encode("latin-1"))
    with pytest.raises(PoolFileError, match="not UTF-8"):
        read_pool(path)
    with pytest.raises(PoolFileError, match="No pool file"):
        read_pool(tmp_path / "absent.tsv")


def test_the_benchmark_exits_2_with_the_message_on_a_bad_pool(tmp_path):
    path = tmp_path / "one_class.tsv"
    path.write_text("label\terror\tsource\ttext\n" + "0\tarticle\tnews\tA dog run.\n" * 12, encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "loop.py"), "--pool", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "one class only: 12 rows, all not fluent (0)" in done.stderr
