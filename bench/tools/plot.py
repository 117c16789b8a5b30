#!/usr/bin/env python3
"""plot.py — PNG plots of the benchmarks' JSON output (ovstage_bench_stage / ovstage_bench_jobs --json).

    python3 bench/tools/plot.py RESULT.json [MORE.json ...] [--out DIR] [--venv DIR]

For every input file it writes, into DIR (default: the current directory):
  <bench>-<date>-ratios.png   each row's ratio against its peer (log scale; green = target met,
                              red = not met, grey = information), the peer's 1x line marked;
  <bench>-<date>-figures.png  ours beside the peer, one panel per unit (M/s, µs, ms, GB/s, ...);
  <bench>-<date>-series.png   rows that differ only in a size (KiB/MiB/GiB) or a worker/thread
                              count, as ours and the peer against that number (if there are any).
With several inputs of the same benchmark run at different worker counts (OVSTAGE_WORKERS, or
bench/jobs --workers), also <bench>-workers.png: each row's figure against the workers.
Every plot names the machine and the date of its run.

matplotlib is not a dependency of the project: when it cannot be imported, the script creates a
virtual environment (DIR from --venv, default ~/.cache/ovstage-plot-venv), installs matplotlib
there with pip and re-runs itself with that interpreter. Nothing in CI runs this script.
"""
import json
import os
import re
import subprocess
import sys


def ensure_matplotlib(venv):
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("OVSTAGE_PLOT_REEXEC"):
        sys.exit("plot.py: matplotlib still missing after installing it into %s" % venv)
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print("plot.py: installing matplotlib into %s (once)" % venv, file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    subprocess.check_call([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "matplotlib"])
    env = dict(os.environ, OVSTAGE_PLOT_REEXEC="1")
    os.execve(py, [py] + sys.argv, env)


def short(s, n=70):
    return s if len(s) <= n else s[: n - 1] + "…"


def value(fig):
    return fig.get("value") if isinstance(fig, dict) else None


def caption(doc):
    m = doc.get("machine", {})
    w = doc.get("workers", -1)
    return "%s — %s, %s CPUs, %s; workers %s; %s" % (
        doc.get("benchmark", "?"), m.get("cpu", "?"), m.get("online_cpus", "?"), m.get("compiler", "?"),
        "one per core" if w is None or w < 0 else w, doc.get("date", "?"))


SERIES = re.compile(r"(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB|workers?|threads?)\b")
SCALE = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}


def series_key(measurement):
    """('row with the number replaced', number, axis label) or None."""
    m = SERIES.search(measurement)
    if not m:
        return None
    num, unit = float(m.group(1)), m.group(2)
    if unit in SCALE:
        return measurement[: m.start()] + "<size>" + measurement[m.end():], num * SCALE[unit], "size (MiB)"
    return measurement[: m.start()] + "<n>" + measurement[m.end():], num, "workers / threads"


def plot_file(plt, doc, out):
    rows = doc.get("rows", [])
    stem = "%s-%s" % (doc.get("benchmark", "bench"), doc.get("date", "").replace(":", "").replace("-", ""))
    written = []
    # ratios
    rr = [r for r in rows if value(r.get("ratio")) and value(r.get("ratio")) > 0]
    if rr:
        fig, ax = plt.subplots(figsize=(11, 0.35 * len(rr) + 1.5))
        colors = ["tab:green" if r.get("met") == "yes" else "tab:red" if r.get("met") == "no" else "tab:gray" for r in rr]
        ax.barh(range(len(rr)), [value(r["ratio"]) for r in rr], color=colors)
        ax.set_yticks(range(len(rr)))
        ax.set_yticklabels([short(r["measurement"]) for r in rr], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("ratio as printed (the row says which way: × peer, × LMDB, % of full, ...)")
        ax.set_title(caption(doc), fontsize=8)
        fig.tight_layout()
        p = os.path.join(out, stem + "-ratios.png")
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)
    # ours vs peer, per unit
    by_unit = {}
    for r in rows:
        o, q = r.get("ours", {}), r.get("peer_figure", {})
        if value(o) is not None and value(q) is not None and o.get("unit") == q.get("unit") and o.get("unit"):
            by_unit.setdefault(o["unit"], []).append(r)
    if by_unit:
        units = sorted(by_unit)
        height = sum(0.3 * len(by_unit[u]) + 1 for u in units) + 1
        fig, axes = plt.subplots(len(units), 1, figsize=(11, height), squeeze=False)
        for ax, u in zip(axes[:, 0], units):
            rs = by_unit[u]
            ys = range(len(rs))
            ax.barh([y - 0.2 for y in ys], [value(r["ours"]) for r in rs], height=0.4, label="ours")
            ax.barh([y + 0.2 for y in ys], [value(r["peer_figure"]) for r in rs], height=0.4, label="peer (same run)")
            ax.set_yticks(list(ys))
            ax.set_yticklabels([short(r["measurement"]) for r in rs], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(u)
            ax.legend(fontsize=7)
        axes[0, 0].set_title(caption(doc), fontsize=8)
        fig.tight_layout()
        p = os.path.join(out, stem + "-figures.png")
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)
    # series against a size or a count
    groups = {}
    for r in rows:
        k = series_key(r.get("measurement", ""))
        if k and value(r.get("ours")) is not None:
            groups.setdefault(k[0], []).append((k[1], k[2], r))
    groups = {k: sorted(v, key=lambda t: t[0]) for k, v in groups.items() if len(v) >= 2}
    if groups:
        fig, axes = plt.subplots(len(groups), 1, figsize=(9, 3 * len(groups)), squeeze=False)
        for ax, (k, pts) in zip(axes[:, 0], sorted(groups.items())):
            xs = [t[0] for t in pts]
            ax.plot(xs, [value(t[2]["ours"]) for t in pts], "o-", label="ours")
            peer = [value(t[2].get("peer_figure")) for t in pts]
            if all(v is not None for v in peer):
                ax.plot(xs, peer, "s--", label="peer (same run)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel(pts[0][1])
            ax.set_ylabel(pts[0][2]["ours"].get("unit", ""))
            ax.set_title(short(k, 100), fontsize=8)
            ax.legend(fontsize=7)
        fig.suptitle(caption(doc), fontsize=8)
        fig.tight_layout()
        p = os.path.join(out, stem + "-series.png")
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)
    return written


def plot_workers(plt, docs, out):
    """Rows present in runs of one benchmark at several worker counts: figure against workers."""
    written = []
    by_bench = {}
    for d in docs:
        by_bench.setdefault(d.get("benchmark"), []).append(d)
    for bench, ds in by_bench.items():
        ws = sorted({d.get("workers", -1) for d in ds if d.get("workers", -1) > 0})
        if len(ws) < 2:
            continue
        rows = {}
        for d in ds:
            for r in d.get("rows", []):
                if value(r.get("ours")) is not None:
                    rows.setdefault(r["measurement"], []).append((d["workers"], r))
        rows = {k: sorted(v, key=lambda t: t[0]) for k, v in rows.items() if len(v) >= 2}
        if not rows:
            continue
        fig, axes = plt.subplots(len(rows), 1, figsize=(9, 2.8 * len(rows)), squeeze=False)
        for ax, (k, pts) in zip(axes[:, 0], sorted(rows.items())):
            xs = [t[0] for t in pts]
            ax.plot(xs, [value(t[1]["ours"]) for t in pts], "o-", label="ours")
            peer = [value(t[1].get("peer_figure")) for t in pts]
            if all(v is not None for v in peer):
                ax.plot(xs, peer, "s--", label="peer (same run)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("workers")
            ax.set_ylabel(pts[0][1]["ours"].get("unit", ""))
            ax.set_title(short(k, 100), fontsize=8)
            ax.legend(fontsize=7)
        fig.suptitle("%s against workers — %s" % (bench, caption(ds[0])), fontsize=8)
        fig.tight_layout()
        p = os.path.join(out, "%s-workers.png" % bench)
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)
    return written


def main(argv):
    out, venv, files = ".", os.path.join(os.path.expanduser("~"), ".cache", "ovstage-plot-venv"), []
    i = 0
    while i < len(argv):
        if argv[i] == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
            i += 2
        elif argv[i] == "--venv" and i + 1 < len(argv):
            venv = argv[i + 1]
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            files.append(argv[i])
            i += 1
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    docs = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            docs.append(json.load(fh))
    ensure_matplotlib(venv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out, exist_ok=True)
    written = []
    for d in docs:
        written += plot_file(plt, d, out)
    written += plot_workers(plt, docs, out)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
