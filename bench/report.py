"""The report: a table on stdout, a JSON file, and a PNG of latency distributions and scaling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def table(results: dict[str, Any]) -> str:
    lines = [f"mnote-mcp benchmarks ({results['mode']}, {results['machine']})", ""]
    lines.append(
        f"{'stdio, raw client':28} {'cold ms':>8} {'read p50':>9} {'p90':>7} {'p99':>7} "
        f"{'write p50':>10} {'p90':>7} {'p99':>7} {'32-wide r/w per s':>18} {'cpu r/w us':>12}"
    )
    for name, t in results["stdio"].items():
        r, w = t["read"], t["write"]
        lines.append(
            f"{name:28} {t['cold_start_ms']:8.0f} {r['p50']:9.0f} {r['p90']:7.0f} {r['p99']:7.0f} "
            f"{w['p50']:10.0f} {w['p90']:7.0f} {w['p99']:7.0f} "
            f"{t['throughput']:8.0f}/{t.get('throughput_write', 0):<9.0f} "
            f"{t['cpu_read_us']:5.0f}/{t['cpu_write_us']:<5.0f}"
        )
    if results.get("sdk"):
        lines += ["", f"{'stdio, SDK client':28} {'read p50':>9} {'write p50':>10}"]
        for name, t in results["sdk"].items():
            lines.append(f"{name:28} {t['read']['p50']:9.0f} {t['write']['p50']:10.0f}")
    if results.get("http"):
        lines += ["", f"{'streamable HTTP, raw':28} {'read p50':>9} {'write p50':>10} {'32-wide/s':>10}"]
        for name, t in results["http"].items():
            lines.append(
                f"{name:28} {t['read']['p50']:9.0f} {t['write']['p50']:10.0f} {t['throughput']:10.0f}"
            )
    scaling = results.get("scaling") or {"sizes": (), "ms": {}}
    if scaling["ms"]:
        lines += [
            "",
            f"{'kernel scaling (ms/call)':28} "
            + " ".join(f"{n:>9}" for n in scaling["sizes"])
            + f" {'t10k/t1k':>9}",
        ]
    for op, row in scaling["ms"].items():
        ratio = scaling["ratio"].get(op)
        precise = scaling.get("precise_ratio", {}).get(op)
        tail = f" {ratio:9.2f}" if ratio else (f" {'':9} t10k/t100 {precise:.2f}" if precise else "")
        lines.append(f"{op:28} " + " ".join(f"{v:9.2f}" for v in row) + tail)
    if scaling.get("baseline_ms"):
        lines += ["", f"{'baseline release (ms/call)':28} " + " ".join(f"{n:>9}" for n in scaling["sizes"])]
        for op, row in scaling["baseline_ms"].items():
            lines.append(f"{op:28} " + " ".join(f"{v:9.2f}" for v in row))
    if results.get("history"):
        h = results["history"]
        lines += [
            "",
            f"in process: history first page on {h['revisions']} revisions {h['history_first_page_ms']:.2f} ms"
            f" (filtered by run {h['history_by_run_ms']:.2f} ms); revert of a 50-write run on 1,000 blocks"
            f" {h['revert_run_of_50_ms']:.2f} ms",
        ]
    if results.get("block_ops"):
        ops = results["block_ops"]
        lines += ["", f"{'in process, precise (ms/call)':28} " + " ".join(f"{n:>9}" for n in ops["sizes"])]
        for op, row in ops["ms"].items():
            lines.append(
                f"{op:28} " + " ".join(f"{x:9.2f}" for x in row) + f" t10k/t100 {row[-1] / row[0]:.2f}"
            )
    if results.get("search"):
        lines += ["", *search_lines(results["search"])]
    v = results.get("validation")
    if v:
        lines += [
            "",
            f"outputSchema validation by the SDK client: {v['us']:.0f} us per read "
            f"= {v['share']:.1%} of an SDK-client read",
        ]
    quick = results["mode"] == "quick"
    lines += [
        "",
        "targets (ratios measured in this run; information only: a quick run has too few samples to judge)"
        if quick
        else "targets (ratios measured in this run):",
    ]
    for check in results["targets"]:
        mark = "info" if quick else ("ok  " if check["met"] else "MISS")
        lines.append(f"  {mark} {check['name']}: {check['value']:.2f} (target {check['target']})")
    return "\n".join(lines)


def search_lines(s: dict[str, Any]) -> list[str]:
    """The search suite: latency per query (raw client, stdio), writes with and without the index, size."""
    lines = [f"search, {s['pages']:,} pages x 50 blocks ({s['blocks']:,} blocks), raw client over stdio:"]
    for name, query in s["queries"].items():
        figures, rows = s["search"][name], s["matching_rows"].get(name)
        lines.append(
            f"  {name:26} {query or '(no query)':16} p50 {figures['p50'] / 1e3:7.2f} ms"
            f"  p99 {figures['p99'] / 1e3:7.2f} ms  server CPU {s['cpu_ms'][name]:6.2f} ms"
            + (f"  ({rows:,} matching blocks)" if rows is not None else "")
        )
        earlier = s["search"].get(f"baseline {name}")
        if earlier is not None:  # `--baseline`: the same query on the earlier code, side by side
            cpu = s["cpu_ms"][f"baseline {name}"]
            lines.append(
                f"    {'baseline':42} p50 {earlier['p50'] / 1e3:7.2f} ms  p99 {earlier['p99'] / 1e3:7.2f} ms"
                f"  server CPU {cpu:6.2f} ms  (now/then p50 {figures['p50'] / earlier['p50']:.2f}x,"
                f" CPU {s['cpu_ms'][name] / cpu if cpu else float('nan'):.2f}x)"
            )
    w = s["write"]
    lines.append(
        f"  one-block write p50: {w['with index']['p50'] / 1e3:.2f} ms with the index,"
        f" {w['without index']['p50'] / 1e3:.2f} ms without ({s['write_ratio']:.2f}x); server CPU"
        f" {s['write_cpu_ms']['with index']:.2f} / {s['write_cpu_ms']['without index']:.2f} ms"
        f" ({s['write_cpu_ratio']:.2f}x)"
    )
    lines.append(
        f"  index {s['index_bytes'] / 1e6:.1f} MB for {s['text_bytes'] / 1e6:.1f} MB of text"
        f" ({s['index_to_text']:.2f}x); dataset made in {s['generate_s'] + s['build_s']:.0f} s"
    )
    return lines


def save(results: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "latest.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return path


def plot(results: dict[str, Any], samples: dict[str, dict[str, list[float]]], out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (dist, scale) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels, data = [], []
    for name, kinds in samples.items():
        for kind, values in kinds.items():
            labels.append(f"{name}\n{kind}")
            data.append([v * 1e6 for v in values])
    dist.boxplot(data, showfliers=False)
    dist.set_xticks(range(1, len(labels) + 1), labels, fontsize=7, rotation=35)
    dist.set_ylabel("latency per call (us), raw client over stdio")
    dist.set_title("Sequential call latency")
    scaling = results.get("scaling") or {"sizes": (), "ms": {}}
    sizes = scaling["sizes"]
    for op, row in scaling["ms"].items():
        scale.plot(sizes, row, marker="o", label=op)
    scale.set_xscale("log")
    scale.set_yscale("log")
    scale.set_xlabel("blocks on the page")
    scale.set_ylabel("ms per call")
    scale.set_title("Kernel scaling")
    if scaling["ms"]:
        scale.legend(fontsize=8)
    fig.tight_layout()
    path = out / "latest.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
