"""The README's performance tables are generated from benchmarks/results/, never typed by hand."""

from pathlib import Path

from moelab import report

ROOT = Path(__file__).resolve().parents[1]


def test_readme_tables_match_the_saved_results():
    text = (ROOT / "README.md").read_text()
    block = text.split(report.README_BEGIN, 1)[1].split(report.README_END, 1)[0].strip()
    assert block == report.results_markdown(str(ROOT / "benchmarks" / "results")).strip(), \
        "README tables are stale: run `moelab report --readme README.md`"


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "pip install -e . && " in text and "moelab roofline qwen3-30b-a3b" in text
    assert "python -m pytest -q" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q\n" in ci  # CI runs exactly the README's test command
