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
    command = text.split("pip install -e '.[test]' && ", 1)[1].split("\n", 1)[0]
    assert command.startswith("python -m pytest -q")
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"\n{command}\n" in ci  # CI runs exactly the README's test command


def test_tables_leave_out_experiments_and_superseded_runs(tmp_path):
    """A record run under a MOELAB_* switch, or marked superseded, stays in the folder but not in the README."""
    import json

    from moelab import report

    def rec(name, date, **extra):
        env = {"device": "GPU", "date": date, "commit": "c", **extra.pop("env", {})}
        body = {"kind": "bench-decode", "env": env, "model": "m", "prompt_len": 1, "new_tokens": 2,
                "rows": [{"batch": 1, "row": "moelab", "tokens_per_s": extra.pop("tps")}], **extra}
        (tmp_path / name).write_text(json.dumps(body))

    rec("a.json", "2026-01-01", tps=111)
    rec("b.json", "2026-01-02", tps=222, env={"moelab_env": {"MOELAB_X": "1"}})
    rec("c.json", "2026-01-03", tps=333, superseded="reverted")
    md = report.results_markdown(str(tmp_path))
    assert "`a.json`" in md and "111" in md
    assert "222" not in md and "333" not in md
    assert report.shipped({"env": {"moelab_env": {}}}) and not report.shipped({"env": {}, "superseded": "x"})


def test_a_decode_run_covered_by_a_newer_one_is_hidden(tmp_path):
    """Batch 32 alone, then batches 8 and 32: only the newer table shows; a run with other rows stays."""
    import json

    from moelab import report

    def rec(name, date, rows):
        body = {"kind": "bench-decode", "env": {"device": "GPU", "date": date, "commit": "c"}, "model": "m",
                "prompt_len": 1, "new_tokens": 2, "rows": [{"batch": b, "row": r, "tokens_per_s": t} for b, r, t in rows]}
        (tmp_path / name).write_text(json.dumps(body))

    rec("old32.json", "2026-01-01", [(32, "moelab", 1111)])
    rec("side.json", "2026-01-01", [(1, "moelab", 4444), (1, "hf-eager", 55)])
    rec("new.json", "2026-01-02", [(8, "moelab", 2222), (32, "moelab", 3333)])
    md = report.results_markdown(str(tmp_path))
    assert "`new.json`" in md and "`side.json`" in md
    assert "`old32.json`" not in md and "1,111" not in md


def test_a_bench_moe_table_takes_each_size_from_the_newest_run_that_measured_it(tmp_path):
    """A newer run of T=1,256,4096 gives those rows; T=2 and 4 stay from the older sweep, each row naming its run; a run
    under a switch changes nothing."""
    import json

    from moelab import report

    def rec(name, date, Ts, us, **env):
        rows = [{"T": T, "distinct_experts": 8, "floor_us": 10.0, "moelab_graph_us": us, "pct_of_floor": 50.0}
                for T in Ts]
        body = {"kind": "bench-moe", "env": {"device": "GPU", "date": date, "commit": "c", **env}, "model": "m",
                "tp": 1, "shape": {"E": 8, "H": 16, "I": 8, "k": 2, "shared_I": 0}, "ceilings": {"read_gbps": 1000.0},
                "rows": rows}
        (tmp_path / name).write_text(json.dumps(body))

    rec("full-old.json", "2026-01-01", [1, 2, 4, 256, 4096], 111.0)
    rec("part-new.json", "2026-01-02", [1, 256, 4096], 222.0)
    rec("switch.json", "2026-01-03", [1, 2], 444.0, moelab_env={"MOELAB_X": "1"})
    md = report.results_markdown(str(tmp_path))
    assert "[1] `full-old.json`" in md and "[2] `part-new.json`" in md and "switch.json" not in md
    assert md.count("| 111 |") == 2 and md.count("| 222 |") == 3 and "444" not in md
    assert "| 1 | 8 | 10 |" in md and md.split("| 1 | 8 | 10 |", 1)[1].split("\n", 1)[0].endswith("[2] |")
    rec("full-new.json", "2026-01-04", [1, 2, 4, 256, 4096], 333.0)
    md = report.results_markdown(str(tmp_path))
    assert "`full-new.json`" in md and "`full-old.json`" not in md and "`part-new.json`" not in md


def test_one_attention_table_takes_each_shape_from_the_newest_run_that_measured_it(tmp_path):
    """Two runs, one table: a shape both measured comes from the newer run, every implementation of it together;
    a shape only the older run measured stays, with its run named under the table."""
    import json

    from moelab import report

    def rec(name, date, cells):
        rows = [{"B": b, "ctx": c, "impl": impl, "median_us": us, "iqr_us": 0.1, "floor_us": 1.0, "pct_floor": 50.0}
                for b, c, impl, us in cells]
        body = {"kind": "bench-attention", "env": {"device": "GPU", "date": date, "commit": "c"}, "heads": [32, 4],
                "head_dim": 128, "dtype": "bfloat16", "read_gbps": 1000.0, "rows": rows}
        (tmp_path / name).write_text(json.dumps(body))

    rec("old.json", "2026-01-01", [(1, 1024, "moelab", 111.0), (1, 1024, "cudnn", 112.0), (8, 4096, "moelab", 113.0)])
    rec("new.json", "2026-01-02", [(1, 1024, "moelab", 221.0), (1, 1024, "cudnn", 222.0)])
    md = report.results_markdown(str(tmp_path))
    assert md.count("### Decode attention") == 1
    assert "111" not in md and "112" not in md  # the shape both ran: the newer run's rows, both implementations
    assert "| 1 | 1024 | moelab | 221 | 0.1 | 1 | 50 | [2] |" in md and "| 1 | 1024 | cudnn | 222 |" in md
    assert "| 8 | 4096 | moelab | 113 | 0.1 | 1 | 50 | [1] |" in md
    assert "[1] `old.json`" in md and "[2] `new.json`" in md


def test_each_merged_table_numbers_its_own_runs(tmp_path):
    """Two decode models, two tables: each table's `run` numbers point at the runs listed under that table."""
    import json

    from moelab import report

    def rec(name, date, model, tps):
        body = {"kind": "bench-decode", "env": {"device": "GPU", "date": date, "commit": "c"}, "model": model,
                "prompt_len": 1, "new_tokens": 2, "rows": [{"batch": 1, "row": "moelab", "tokens_per_s": tps}]}
        (tmp_path / name).write_text(json.dumps(body))

    rec("a.json", "2026-01-01", "m1", 111)
    rec("b.json", "2026-01-02", "m2", 222)
    md = report.results_markdown(str(tmp_path))
    first, second = md.split("### End-to-end decode")[1:]
    assert "| 111 |" in first and "[1]" in first and "[1] `a.json`" in first and "b.json" not in first
    assert "| 222 |" in second and "[1] `b.json`" in second and "a.json" not in second and "[2]" not in second


def test_the_gdn_table_shows_the_shipped_kernels_graph_replayed(tmp_path):
    """bench_gdn's record: the eager and moelab rows of graph replay; its block-width variants and host rows stay out."""
    import json

    from moelab import report

    rows = [{"tp": 1, "B": 1, "op": "gdn.recurrence", "impl": impl, "mode": mode, "median_us": us, "iqr_us": 0.1,
             "floor_us": 1.0, "pct_floor": 100.0 / us}
            for impl, mode, us in (("eager", "graph", 75.0), ("moelab", "graph", 4.5), ("moelab bv16w2", "graph", 4.0),
                                   ("moelab", "host", 70.0))]
    body = {"kind": "bench-gdn", "env": {"device": "GPU", "date": "2026-01-01", "commit": "c"}, "model": "m",
            "read_gbps": 1000.0, "rows": rows}
    (tmp_path / "g.json").write_text(json.dumps(body))
    md = report.results_markdown(str(tmp_path))
    assert md.count("### Gated DeltaNet decode kernels") == 1
    assert "| 1 | 1 | gdn.recurrence | eager | 75 |" in md and "| 1 | 1 | gdn.recurrence | moelab | 4.5 |" in md
    assert "bv16w2" not in md and "| 70 |" not in md


def test_h100_decode_records_get_their_own_tables(tmp_path):
    """A decode record in results/h100/ shows under its own H100 heading, never in the main (H200) table; without one
    there is no H100 section. A commit marked dirty keeps its mark."""
    import json

    from moelab import report

    def rec(folder, name, tps, commit="c"):
        folder.mkdir(exist_ok=True)
        body = {"kind": "bench-decode", "env": {"device": "GPU", "date": "2026-01-01", "commit": commit}, "model": "m",
                "prompt_len": 1, "new_tokens": 2, "rows": [{"batch": 1, "row": "moelab", "tokens_per_s": tps}]}
        (folder / name).write_text(json.dumps(body))

    rec(tmp_path, "main.json", 111)
    assert "On an H100" not in report.results_markdown(str(tmp_path))
    rec(tmp_path / "h100", "h.json", 222, commit="0123456789abcdef-dirty")
    md = report.results_markdown(str(tmp_path))
    main, h100 = md.split("### On an H100")
    assert "| 111 |" in main and "222" not in main and "h.json" not in main
    assert "| 222 |" in h100 and "[1] `h.json`" in h100 and "111" not in h100
    assert "commit 0123456789ab-dirty" in h100
