#!/usr/bin/env python3
"""The bench report: markdown tables with ratios and goals, results.json, and
gnuplot plots, from one bench/run results directory.

    report.py OUT          full report on stdout; OUT/results.json, OUT/plots/*.png
    report.py --brief DIR  one line per tenant of one lesson run (progress)
    report.py --matrix-shapes SEED N   the shape matrix's N shapes (bench/run --only matrix)

OUT layout (written by bench/run):
    rows.tsv                          single-tenant rows (see table.py)
    lessons/SCENARIO/VARIANT/T.json   fio JSON (or journalpair's) of tenant T
    lessons/SCENARIO/VARIANT/T_iops.N.log, small_clat.N.log   fio logs
    lessons/SCENARIO/VARIANT/FAILED   a tenant failed
    lessons/SCENARIO/VARIANT/rN/...   the same per round, for the lessons run in rounds
                                      (pods, beside-solo, beside-mmap, beside-writers)
    matrix-shapes.tsv                 the shape matrix's shapes (see matrix_shapes)
    lessons/matrix-SHAPE/VARIANT/T.json, lessons/matrix-probe-solo/VARIANT/mxp.json
"""
import glob
import json
import math
import os
import random
import statistics
import subprocess
import sys

import table

VARIANTS = ["raw", "passthrough_ll", "fusesched-fifo", "fusesched-bfq", "fusesched-base-bfq", "kernel-bfq"]
FIFO, BFQ = "fusesched-fifo", "fusesched-bfq"
SCENARIOS = {  # scenario -> tenants, in table order
    "dsync": ["dsync-w", "dsync-r"],
    "journal": ["jp-w", "dsync-r"],
    "ratelimit-solo": ["rl-free"],
    "ratelimit": ["rl-free", "rl-lim"],
    "stream-solo": ["st-writer"],
    "stream": ["st-writer", "st-small"],
    "weights-8-1": ["w81-a", "w81-b"],
    "weights-5-3-1": ["w531-a", "w531-b", "w531-c"],
    "weights-4-1-d16": ["w41-a", "w41-b"],
    "weights-3-3-1-d8": ["w331-a", "w331-b", "w331-c"],
    "weights-8-1-1m-writes": ["w81w-a", "w81w-b"],
    "mixed-solo-large": ["wm-large"],
    "mixed-solo-small": ["wm-small"],
    "weights-4-1-mixed-sizes": ["wm-large", "wm-small"],
    "depth1-solo": ["d1-shallow"],
    "depth1-vs-deep": ["d1-shallow", "d1-deep"],
    "depth1-mixed": ["d1m-a", "d1m-b", "d1m-c"],
    "pods": ["pod-a-c1", "pod-b-c1", "pod-b-c2", "pod-b-c3"],
    "beside-solo": ["bs-reader"],
    "beside-mmap": ["bs-mmap", "bs-reader"],
    "beside-writers": ["bs-writers", "bs-reader"],
}
WEIGHTS = {"w81-a": 800, "w81-b": 100, "w531-a": 500, "w531-b": 300, "w531-c": 100, "w41-a": 400, "w41-b": 100, "w331-a": 300, "w331-b": 300, "w331-c": 100, "w81w-a": 800, "w81w-b": 100,
           "wm-large": 400, "wm-small": 100,
           "d1-shallow": 800, "d1-deep": 100, "d1m-a": 189, "d1m-b": 71, "d1m-c": 17, "bs-reader": 800, "bs-mmap": 100, "bs-writers": 100}
# The pods lesson: pod -> (its rule's weight, its containers' tenants); the
# containers have no rule (default weight 100) and divide their pod's share.
PODS = {"pod-a": (200, ["pod-a-c1"]), "pod-b": (100, ["pod-b-c1", "pod-b-c2", "pod-b-c3"])}
POD_OF = {c: pod for pod, (_, cs) in PODS.items() for c in cs}
# run BENCH_ROUNDS times: lessons/SCENARIO/VARIANT/rN/
ROUNDS_SCENARIOS = ("pods", "beside-solo", "beside-mmap", "beside-writers")
BESIDE_GOAL = 0.5  # the reader beside a flood: at least this fraction of its solo IOPS


def tenant_label(tenant):
    """A tenant's name with its weight, for table heads and plot keys."""
    if tenant in POD_OF:
        return f"{tenant} (w100 in {POD_OF[tenant]} w{PODS[POD_OF[tenant]][0]})"
    return f"{tenant} (w{WEIGHTS[tenant]})"


def load_json(path):
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document.
    return json.loads(text[text.index("{"):])


def tenant_summary(path):
    """Throughput and latency of one tenant: fio JSON or journalpair's."""
    data = load_json(path)
    if "writer_kbps" in data:  # journalpair
        return {"kbps": data["writer_kbps"], "mbps": data["writer_kbps"] / 1e3,
                "iops": data["ops"] / data["seconds"], "p99_us": data["p99_us"],
                "max_us": data["max_us"], "dir": "write"}
    job = data["jobs"][0]
    direction = max(("read", "write"), key=lambda d: job[d]["io_bytes"])
    s = job[direction]
    clat = s.get("clat_ns", {})
    return {"dir": direction, "mbps": s["bw_bytes"] / 1e6, "kbps": s["bw_bytes"] / 1e3,
            "iops": s["iops"], "p99_us": clat.get("percentile", {}).get("99.000000", 0) / 1e3,
            "max_us": clat.get("max", 0) / 1e3, "error": job.get("error", 0)}


def load_run(vdir, tenants):
    """{tenant: summary} of one lesson run, or None if it failed."""
    got = {}
    for tenant in tenants:
        try:
            got[tenant] = tenant_summary(os.path.join(vdir, tenant + ".json"))
        except (OSError, ValueError, KeyError, IndexError):
            return None
    return None if os.path.exists(os.path.join(vdir, "FAILED")) else got


def round_dirs(vdir):
    """A variant's round directories (r1, r2, ...) in order."""
    dirs = [d for d in glob.glob(os.path.join(vdir, "r*")) if os.path.basename(d)[1:].isdigit()]
    return sorted(dirs, key=lambda d: int(os.path.basename(d)[1:]))


def load_lessons(out):
    """{scenario: {variant: {tenant: summary}}}; a failed run maps to None.
    A scenario run in rounds (ROUNDS_SCENARIOS) maps each variant to
    {"rounds": [{tenant: summary} or None, ...]} instead."""
    res = {}
    for scen in SCENARIOS:
        for vdir in sorted(glob.glob(os.path.join(out, "lessons", scen, "*"))):
            variant = os.path.basename(vdir)
            if scen in ROUNDS_SCENARIOS:
                got = {"rounds": [load_run(d, SCENARIOS[scen]) for d in round_dirs(vdir)]}
            else:
                got = load_run(vdir, SCENARIOS[scen])
            res.setdefault(scen, {})[variant] = got
    return res


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def get(res, scen, variant, tenant, key):
    try:
        return res[scen][variant][tenant][key]
    except (KeyError, TypeError):
        return None


def div(a, b):
    return None if a is None or not b else a / b


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def sched_view(out, scen, variant, tenants):
    """fusesched's own view of a run (stat.json, taken near its end): per tenant
    "target -> received" shares over the interval, and injected requests.
    A tenant is named by its cgroup below the run's (w81-a, pod-a/c1); a
    parent's (a pod's) shares are its subtree's."""
    try:
        data = load_json(os.path.join(out, "lessons", scen, variant, "stat.json"))
        by_cg = {t["cgroup"].split("/", 2)[-1]: t for t in data["mounts"][0]["tenants"]}
    except (OSError, ValueError, KeyError, IndexError):
        return None
    parts = []
    for tenant in tenants:
        t = by_cg.get(tenant)
        if t is None:
            parts.append(f"{tenant} not seen")
            continue
        inj = t.get("injected", {})
        parts.append(f"{tenant} w{t['weight']} target {t['target_share'] * 100:.0f}% "
                     f"received {t['share_interval'] * 100:.0f}% (injected "
                     f"{inj.get('waker', 0)}/{inj.get('fsync', 0)}/{inj.get('general', 0)})")
    return "; ".join(parts)


def md_table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def variants_of(res, *scens):
    seen = set()
    for s in scens:
        seen.update(res.get(s, {}))
    return [v for v in VARIANTS if v in seen]


def lesson_tables(res):
    """Markdown lines for the lessons, and the goals [(goal, value, target, met)]."""
    lines, goals = [], []

    def views(*scen_tenants):
        got = []
        for scen, tenants in scen_tenants:
            view = sched_view(res["_out"], scen, BFQ, tenants)
            if view:
                got.append(f"{scen}: {view}")
        if got:
            lines.extend(["", "fusesched-bfq's own view of these runs (`fusesched stat` near the end; "
                          "injected waker/fsync/general): " + " — ".join(got) + "."])

    def goal(name, value, target, met):
        goals.append({"goal": name, "value": value, "target": target, "met": met})

    if "dsync" in res or "journal" in res:
        lines += ["", "### Lesson 1: sync writes next to a depth-1 reader (writer KB/s)", ""]
        rows = []
        for v in variants_of(res, "dsync", "journal"):
            dd = get(res, "dsync", v, "dsync-w", "kbps")
            jp = get(res, "journal", v, "jp-w", "kbps")
            rows.append([v, fmt(dd), fmt(div(dd, get(res, "dsync", FIFO, "dsync-w", "kbps")), 2),
                         fmt(get(res, "dsync", v, "dsync-r", "iops"), 0),
                         fmt(jp), fmt(div(jp, get(res, "journal", FIFO, "jp-w", "kbps")), 2),
                         fmt(get(res, "journal", v, "jp-w", "p99_us"), 0),
                         fmt(get(res, "journal", v, "dsync-r", "iops"), 0)])
        lines += md_table(["variant", "dd 512B O_DSYNC KB/s", "vs fifo", "reader IOPS",
                           "journal-pair writer KB/s", "vs fifo", "round trip p99 us",
                           "reader IOPS"], rows)
        views(("dsync", ["dsync-w", "dsync-r"]), ("journal", ["jp-w", "jp-j", "dsync-r"]))
        for scen, t, label in (("dsync", "dsync-w", "dd O_DSYNC"), ("journal", "jp-w", "journal pair")):
            r = div(get(res, scen, BFQ, t, "kbps"), get(res, scen, FIFO, t, "kbps"))
            goal(f"1. {label} writer, bfq vs fifo", r, ">= 0.90", None if r is None else r >= 0.9)

    if "ratelimit" in res:
        lines += ["", "### Lesson 2: a rate-limited peer (4k direct random writes, depth 1, MB/s)", ""]
        rows = []
        for v in variants_of(res, "ratelimit", "ratelimit-solo"):
            solo = get(res, "ratelimit-solo", v, "rl-free", "mbps")
            free = get(res, "ratelimit", v, "rl-free", "mbps")
            rows.append([v, fmt(solo, 2), fmt(get(res, "ratelimit", v, "rl-lim", "mbps"), 2),
                         fmt(free, 2), fmt(div(free, solo), 2)])
        lines += md_table(["variant", "free tenant solo", "limited tenant (rate=4m)",
                           "free tenant", "free / what is left"], rows)
        lines += ["", "What is left for the free tenant is its own solo rate: a depth-1 writer "
                  "cannot use more, and the limited tenant takes 4 MB/s of a parallel store."]
        views(("ratelimit", ["rl-free", "rl-lim"]))
        r = div(get(res, "ratelimit", BFQ, "rl-free", "mbps"),
                get(res, "ratelimit-solo", BFQ, "rl-free", "mbps"))
        goal("2. free tenant, bfq, vs what is left", r, ">= 0.90", None if r is None else r >= 0.9)

    if "stream" in res:
        lines += ["", "### Lesson 3: 20 small readers behind a buffered 1 MiB streaming writer", ""]
        rows = []
        fifo_max = get(res, "stream", FIFO, "st-small", "max_us")
        for v in variants_of(res, "stream", "stream-solo"):
            solo = get(res, "stream-solo", v, "st-writer", "mbps")
            w = get(res, "stream", v, "st-writer", "mbps")
            mx = get(res, "stream", v, "st-small", "max_us")
            rows.append([v, fmt(solo, 0), fmt(w, 0), fmt(div(w, solo), 2),
                         fmt(div(get(res, "stream", v, "st-small", "p99_us"), 1e3), 2),
                         fmt(div(mx, 1e3), 2), fmt(div(mx, fifo_max), 3),
                         fmt(get(res, "stream", v, "st-small", "iops"), 0)])
        lines += md_table(["variant", "writer solo MB/s", "writer MB/s", "writer / solo",
                           "small p99 ms", "small max ms", "small max vs fifo", "small IOPS"], rows)
        views(("stream", ["st-writer", "st-small"]))
        mx = div(get(res, "stream", BFQ, "st-small", "max_us"), fifo_max)
        w = div(get(res, "stream", BFQ, "st-writer", "mbps"), get(res, "stream-solo", BFQ, "st-writer", "mbps"))
        goal("3. small readers' max latency, bfq vs fifo", mx, "<= 0.10", None if mx is None else mx <= 0.1)
        goal("3. streaming writer, bfq vs its solo rate", w, ">= 0.80", None if w is None else w >= 0.8)

    def weights_table(scen, tenants, title, what="4k direct random reads, IOPS"):
        nonlocal lines
        lines += ["", f"### Lesson 4: {title} ({what})", ""]
        low = tenants[-1]
        fifo_total = sum(get(res, scen, FIFO, t, "iops") or 0 for t in tenants) or None
        rows = []
        for v in variants_of(res, scen):
            iops = [get(res, scen, v, t, "iops") for t in tenants]
            total = None if None in iops else sum(iops)
            ratios = [div(i, iops[-1]) for i in iops[:-1]]
            rows.append([v] + [fmt(i, 0) for i in iops] + [fmt(r, 2) for r in ratios]
                        + [fmt(total, 0), fmt(div(total, fifo_total), 2)])
        head = ["variant"] + [tenant_label(t) for t in tenants] \
            + [f"{t}/{low} (want {WEIGHTS[t] / WEIGHTS[low]:g})" for t in tenants[:-1]] \
            + ["total", "total vs fifo"]
        lines += md_table(head, rows)
        views((scen, tenants))
        iops = [get(res, scen, BFQ, t, "iops") for t in tenants]
        if None in iops or not iops[-1]:
            return None, None, "-"
        errs = [abs(i / iops[-1] / (WEIGHTS[t] / WEIGHTS[low]) - 1) for i, t in zip(iops[:-1], tenants)]
        got = ":".join(f"{i / iops[-1]:.2f}" for i in iops[:-1]) + ":1"
        return max(errs), div(sum(iops), fifo_total), got

    if "weights-8-1" in res:
        err, tot, got = weights_table("weights-8-1", ["w81-a", "w81-b"],
                                      "8:1, saturating readers (4 jobs x iodepth 16 each)")
        goal(f"4. 8:1 received ratio (bfq got {got}), relative error", err, "<= 0.10", None if err is None else err <= 0.1)
        goal("4. 8:1 total, bfq vs fifo", tot, ">= 0.90", None if tot is None else tot >= 0.9)
    if "weights-5-3-1" in res:
        err, _, got = weights_table("weights-5-3-1", ["w531-a", "w531-b", "w531-c"], "5:3:1, saturating readers")
        goal(f"4. 5:3:1 received ratios (bfq got {got}), worst relative error", err, "<= 0.10",
             None if err is None else err <= 0.1)
    if "weights-4-1-d16" in res:
        err, tot, got = weights_table("weights-4-1-d16", ["w41-a", "w41-b"],
                                      "4:1, one job of iodepth 16 each (together within max_inflight)")
        goal(f"4. 4:1 at depth 16 received ratio (bfq got {got}), relative error", err, "<= 0.15",
             None if err is None else err <= 0.15)
        goal("4. 4:1 at depth 16 total, bfq vs fifo", tot, ">= 0.90", None if tot is None else tot >= 0.9)
    if "weights-3-3-1-d8" in res:
        err, tot, got = weights_table("weights-3-3-1-d8", ["w331-a", "w331-b", "w331-c"],
                                      "3:3:1, one job of iodepth 8 each (together within max_inflight)")
        goal(f"4. 3:3:1 at depth 8 received ratios (bfq got {got}), worst relative error", err, "<= 0.15",
             None if err is None else err <= 0.15)
        goal("4. 3:3:1 at depth 8 total, bfq vs fifo", tot, ">= 0.90", None if tot is None else tot >= 0.9)
    if "weights-8-1-1m-writes" in res:
        err, tot, got = weights_table("weights-8-1-1m-writes", ["w81w-a", "w81w-b"],
                                      "8:1, two deep writers (libaio, iodepth 64 each)",
                                      "1 MiB direct sequential writes, writes per second")
        goal(f"4. 8:1 of 1 MiB writers received ratio (bfq got {got}), relative error", err, "<= 0.10",
             None if err is None else err <= 0.1)
        goal("4. 8:1 of 1 MiB writers total, bfq vs fifo", tot, ">= 0.90", None if tot is None else tot >= 0.9)
    if "weights-4-1-mixed-sizes" in res:
        mixed_sizes_lesson(res, lines, goal)
    if "depth1-vs-deep" in res:
        weights_table("depth1-vs-deep", ["d1-shallow", "d1-deep"],
                      "8:1, a depth-1 reader (w800) against a deep one (w100)")
        lines += ["", "The depth-1 reader cannot use 8/9 of a parallel store; what its weight buys "
                  "is not being slowed by the other's queue:", ""]
        rows = []
        for v in variants_of(res, "depth1-vs-deep", "depth1-solo"):
            solo = get(res, "depth1-solo", v, "d1-shallow", "iops")
            got = get(res, "depth1-vs-deep", v, "d1-shallow", "iops")
            rows.append([v, fmt(solo, 0), fmt(got, 0), fmt(div(got, solo), 2)])
        lines += md_table(["variant", "depth-1 reader solo IOPS", "next to the deep reader",
                           "fraction of solo"], rows)
        r = div(get(res, "depth1-vs-deep", BFQ, "d1-shallow", "iops"),
                get(res, "depth1-solo", BFQ, "d1-shallow", "iops"))
        goal("4. depth-1 reader (w800) next to a deep one, bfq vs its solo run (sim S5)", r, ">= 0.90",
             None if r is None else r >= 0.9)

    if "depth1-mixed" in res:
        depth1_mixed_lesson(res, lines, goal)
    if "pods" in res:
        pods_lesson(res, lines, goal)
    if any(s in res for s in ("beside-solo", "beside-mmap", "beside-writers")):
        beside_lesson(res, lines, goal)
    return lines, goals


def mixed_sizes_lesson(res, lines, goal):
    """A w400 writer of 1 MiB direct sequential writes and a w100 writer of 4
    KiB direct random writes: requests of very different sizes, where a share
    of the store's time is a fraction of what each gets alone (its solo
    run): 0.8 and 0.2 of their solo rates, or, where the two fractions do
    not add up to one, each its weight's part of their sum."""
    scen, tenants = "weights-4-1-mixed-sizes", ["wm-large", "wm-small"]
    solo_scen = {"wm-large": "mixed-solo-large", "wm-small": "mixed-solo-small"}
    lines += ["", "### Lesson 4: 4:1, a 1 MiB writer (w400) beside a 4 KiB random writer (w100)",
              "", "MB/s, and in brackets the fraction of the tenant's solo rate.", ""]
    wsum = sum(WEIGHTS[t] for t in tenants)
    rows = []
    for v in variants_of(res, scen):
        row, fracs = [v], []
        for t in tenants:
            solo = get(res, solo_scen[t], v, t, "mbps")
            got = get(res, scen, v, t, "mbps")
            frac = div(got, solo)
            fracs.append(frac)
            row += [fmt(solo, 0), f"{fmt(got, 0)} ({fmt(frac, 2)})"]
        total = None if None in fracs else sum(fracs)
        row += [fmt(total, 2)]
        rows.append(row)
    head = ["variant"]
    for t in tenants:
        head += [f"{tenant_label(t)} solo", f"{tenant_label(t)} beside (want {WEIGHTS[t] / wsum:.2f})"]
    head += ["fractions' sum"]
    lines += md_table(head, rows)
    fracs = [div(get(res, scen, BFQ, t, "mbps"), get(res, solo_scen[t], BFQ, t, "mbps")) for t in tenants]
    if None in fracs or not sum(fracs):
        goal("4. 4:1 of mixed sizes, worst share error (fractions of solo)", None, "<= 0.15", None)
        return
    errs = [abs(f / sum(fracs) / (WEIGHTS[t] / wsum) - 1) for f, t in zip(fracs, tenants)]
    got = ", ".join(f"{f:.2f}" for f in fracs)
    goal(f"4. 4:1 of mixed sizes (bfq: {got} of solo), worst share error", max(errs), "<= 0.15",
         max(errs) <= 0.15)


def depth1_mixed_lesson(res, lines, goal):
    """Three depth-1 readers (32k w189, 128k w71, 256k w17): each can use one
    slot of a store with many, so each is owed about what it gets alone; the
    total shows what idling for the heaviest costs the others."""
    scen, tenants = "depth1-mixed", SCENARIOS["depth1-mixed"]
    lines += ["", "### Lesson 4: three depth-1 readers of 32k (w189), 128k (w71), 256k (w17) (MB/s)", ""]
    fifo = [get(res, scen, FIFO, t, "mbps") for t in tenants]
    fifo_total = None if None in fifo else sum(fifo)
    rows = []
    for v in variants_of(res, scen):
        mbps = [get(res, scen, v, t, "mbps") for t in tenants]
        total = None if None in mbps else sum(mbps)
        rows.append([v] + [fmt(m, 0) for m in mbps] + [fmt(div(m, f), 2) for m, f in zip(mbps, fifo)]
                    + [fmt(total, 0), fmt(div(total, fifo_total), 2)])
    lines += md_table(["variant"] + [tenant_label(t) for t in tenants]
                      + [f"{t} vs fifo" for t in tenants] + ["total", "total vs fifo"], rows)
    tot = div(sum(get(res, scen, BFQ, t, "mbps") or 0 for t in tenants), fifo_total)
    goal("4. three depth-1 readers of mixed sizes, total bfq vs fifo", tot, ">= 0.90",
         None if tot is None else tot >= 0.9)


def beside_lesson(res, lines, goal):
    """The beside lesson's table (issue 23: the depth-1 reader alone, beside an
    mmap writer, beside 64 buffered writers) and goals. A fraction of solo
    is taken within a round (the reader's solo run of the same round and
    variant); the table shows medians of the rounds and the lowest round."""
    flood = {"beside-mmap": "bs-mmap", "beside-writers": "bs-writers"}

    def rounds(scen, v):
        return ((res.get(scen) or {}).get(v) or {}).get("rounds", [])

    def reader(scen, v):
        return [r["bs-reader"]["iops"] if r else None for r in rounds(scen, v)]

    def fractions(scen, v):
        solo = reader("beside-solo", v)
        got = reader(scen, v)
        solo += [None] * (len(got) - len(solo))
        return [div(g, s) for g, s in zip(got, solo)]

    def flood_mbps(scen, v):
        return median(r[flood[scen]]["mbps"] if r else None for r in rounds(scen, v))

    def low(xs):
        """The lowest of the rounds; None if any round has no number."""
        return None if not xs or None in xs else min(xs)

    variants = variants_of(res, "beside-solo", "beside-mmap", "beside-writers")
    rows, n_rounds = [], 0
    for v in variants:
        runs = {s: rounds(s, v) for s in ("beside-solo", "beside-mmap", "beside-writers")}
        n = max(len(r) for r in runs.values())
        n_rounds = max(n_rounds, n)
        ok = sum(1 for i in range(n) if all(i < len(r) and r[i] for r in runs.values()))
        cells = [v, f"{ok}/{n}", fmt(median(reader("beside-solo", v)), 0)]
        for scen in ("beside-mmap", "beside-writers"):
            fr = fractions(scen, v)
            iops = median(reader(scen, v))
            cells += [fmt(iops, 0), f"{fmt(median(fr), 2)} / {fmt(low(fr), 2)}",
                      fmt(div(iops, median(reader(scen, FIFO))), 2), fmt(flood_mbps(scen, v), 1)]
        cells.append(" / ".join(fmt(f, 2) for f in fractions("beside-writers", v)))
        rows.append(cells)
    lines += ["", "### Reader beside floods: a depth-1 reader (w800, 4k direct random reads) "
              "beside an mmap writer and beside 64 buffered writers (w100 each; issue 23)", ""]
    lines += md_table(["variant", "rounds", "reader solo IOPS", "beside mmap: reader IOPS",
                       "/ solo (median / min)", "vs fifo", "mmap writer MB/s",
                       "beside writers: reader IOPS", "/ solo (median / min)", "vs fifo",
                       "64 writers MB/s", "writers: / solo by round"], rows)
    lines += ["", f"Medians of {n_rounds} round{'s' if n_rounds != 1 else ''} (in each round every "
              "variant ran the three runs back to back, the variant order rotating from round to "
              "round). A fraction of solo is each round's IOPS over the reader's solo IOPS in "
              "the same round and variant (median / lowest round); vs fifo is the median IOPS "
              "over fifo's. The mmap writer writes 1 MiB at a time into a shared mapping of a "
              "file (the stream lesson's): its MB/s is fio's memcpy rate, held back by dirty "
              "page throttling, and the writes reach the store through the kernel's writeback. "
              "The 64 writers: buffered sequential 4k-64k writes, each to a 4 MiB file of its "
              "own, fsync every 32 writes; their MB/s is all 64 together."]
    views = []
    out = res["_out"]
    for scen in ("beside-mmap", "beside-writers"):
        for d in round_dirs(os.path.join(out, "lessons", scen, BFQ)):
            view = sched_view(out, scen, os.path.join(BFQ, os.path.basename(d)),
                              ["bs-reader", flood[scen]])
            if view:
                views.append(f"{scen} {os.path.basename(d)}: {view}")
    if views:
        lines += ["", "fusesched-bfq's own view of these runs (`fusesched stat` near the end; "
                  "injected waker/fsync/general; a writer not seen had its writes attributed "
                  "elsewhere): " + " — ".join(views) + "."]
    if "beside-mmap" in res:
        bfq, fifo = median(reader("beside-mmap", BFQ)), median(reader("beside-mmap", FIFO))
        r = div(bfq, fifo)
        goal("beside. depth-1 reader (w800) beside an mmap writer (w100), bfq vs fifo "
             "(median IOPS)", r, ">= 1.00", None if r is None else r >= 1.0)
        r = median(fractions("beside-mmap", BFQ))
        goal("beside. depth-1 reader beside an mmap writer, bfq vs its solo (median of the rounds)",
             r, f">= {BESIDE_GOAL:.2f}", None if r is None else r >= BESIDE_GOAL)
    if "beside-writers" in res:
        fr = fractions("beside-writers", BFQ)
        r = low(fr)
        goal(f"beside. depth-1 reader beside 64 buffered writers with fsync (w100), bfq vs its "
             f"solo, lowest of {len(fr)} round{'s' if len(fr) != 1 else ''}", r,
             f">= {BESIDE_GOAL:.2f}", None if r is None else r >= BESIDE_GOAL)


def pods_lesson(res, lines, goal):
    """The pods lesson's table (medians of its rounds) and goals."""
    lines += ["", "### Pods: hierarchical weights, 2:1 by rule on the pods, 1 and 3 containers "
              "without rules (4k direct random reads, IOPS)", ""]
    pods = list(PODS)
    want = {p: PODS[p][0] / sum(w for w, _ in PODS.values()) for p in pods}
    b_cs = PODS["pod-b"][1]
    want_c = want["pod-b"] / len(b_cs)

    def round_stats(run):
        """One round's numbers: per pod IOPS and share, pod-b's containers' shares, total."""
        if not run:
            return None
        per_pod = {p: sum(run[c]["iops"] for c in PODS[p][1]) for p in pods}
        total = sum(per_pod.values())
        if not total:
            return None
        return {"iops": per_pod, "total": total, "share": {p: per_pod[p] / total for p in pods},
                "cs": [run[c]["iops"] / total for c in b_cs]}

    def rounds(v):
        return [round_stats(r) for r in (res["pods"].get(v) or {}).get("rounds", [])]

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    fifo_rounds = rounds(FIFO)

    def vs_fifo(v):
        """Each round's total over fifo's total in the same round (adjacent runs)."""
        fifo = fifo_rounds + [None] * len(rounds(v))
        return [div(r["total"], f["total"]) if r and f else None
                for r, f in zip(rounds(v), fifo)]

    rows = []
    n_rounds = 0
    for v in variants_of(res, "pods"):
        rs = rounds(v)
        ok = [r for r in rs if r]
        n_rounds = max(n_rounds, len(rs))
        share = {p: med(r["share"][p] for r in ok) for p in pods}
        err = {p: None if share[p] is None else share[p] / want[p] - 1 for p in pods}
        ratios = vs_fifo(v)
        rows.append([v, f"{len(ok)}/{len(rs)}"]
                    + [fmt(med(r["iops"][p] for r in ok), 0) for p in pods]
                    + [fmt(share[p], 3) for p in pods]
                    + ["-" if err[p] is None else f"{err[p]:+.2f}" for p in pods]
                    + [" / ".join(fmt(med(r["cs"][i] for r in ok), 3) for i in range(len(b_cs))),
                       fmt(med(r["total"] for r in ok), 0), fmt(med(ratios), 2),
                       " / ".join(fmt(r["share"]["pod-a"], 3) if r else "failed" for r in rs),
                       " / ".join(fmt(x, 2) for x in ratios)])
    head = ["variant", "rounds"] + [f"{p} IOPS ({len(PODS[p][1])} c.)" for p in pods] \
        + [f"{p} share (want {want[p]:.3f})" for p in pods] \
        + [f"{p} error" for p in pods] \
        + [f"pod-b c1 / c2 / c3 share (want {want_c:.3f} each)", "total", "total vs fifo",
           "pod-a share by round", "total vs fifo by round"]
    lines += md_table(head, rows)
    lines += ["", f"Medians of {n_rounds} round{'s' if n_rounds != 1 else ''} (in each round every "
              "variant ran back to back, the order rotating from round to round; the last two "
              "columns are each round's). A pod's IOPS are its containers' together; shares "
              "are of the total; the error is the share relative to its target (share / target "
              "- 1); total vs fifo is each round's total over fifo's in the same round. Under "
              "raw, passthrough_ll and fifo the weights do not apply (each container gets about "
              "a quarter): those rows are references for the total."]
    views = []
    out = res["_out"]
    for i, d in enumerate(round_dirs(os.path.join(out, "lessons", "pods", BFQ))):
        view = sched_view(out, "pods", os.path.join(BFQ, os.path.basename(d)),
                          ["pod-a", "pod-a/c1", "pod-b", "pod-b/c1", "pod-b/c2", "pod-b/c3"])
        if view:
            views.append(f"round {i + 1}: {view}")
    if views:
        lines += ["", "fusesched-bfq's own view of these runs (`fusesched stat` near the end; a "
                  "pod's shares are its containers' together; injected waker/fsync/general): "
                  + " — ".join(views) + "."]
    ok = [r for r in rounds(BFQ) if r]
    err = tot = None
    got = "-"
    if ok:
        share = {p: med(r["share"][p] for r in ok) for p in pods}
        err = max(abs(share[p] / want[p] - 1) for p in pods)
        got = ":".join(f"{share[p]:.3f}" for p in pods) + f", median of {len(ok)}"
        tot = med(vs_fifo(BFQ))
    goal(f"pods. 2:1 pod shares (bfq got {got}), worst relative error", err, "<= 0.10",
         None if err is None else err <= 0.1)
    goal("pods. total, bfq vs fifo (median of the rounds)", tot, ">= 0.90",
         None if tot is None else tot >= 0.9)


def goal_table(goals):
    rows = []
    for g in goals:
        v = g["value"]
        if g["met"] is None:
            verdict = "not measured"
        elif g["met"]:
            verdict = "met"
        else:
            # By how much: distance to the target as a fraction of the target.
            op, target = g["target"].split()
            target = float(target)
            if op == ">=":
                verdict = f"missed by {(1 - v / target) * 100:.0f}%"
            else:
                verdict = f"missed: {v / target:.1f}x the limit"
        rows.append([g["goal"], fmt(v, 3), g["target"], verdict])
    return md_table(["goal", "measured", "target", "met/missed"], rows)


# --- Plots ---

def iops_series(vdir, tenant, step_ms=500):
    """Per-tenant IOPS over time: fio's per-job averaged IOPS logs summed per step."""
    buckets = {}
    for path in glob.glob(os.path.join(vdir, f"{tenant}_iops.*.log")):
        with open(path) as f:
            for line in f:
                parts = line.split(",")
                if len(parts) < 2:
                    continue
                b = round(int(parts[0]) / step_ms)
                buckets[b] = buckets.get(b, 0) + int(parts[1])
    return buckets


def gnuplot(script):
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return True
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"report.py: gnuplot failed: {getattr(e, 'stderr', e)}", file=sys.stderr)
        return False


def plot_weights(out, res, plots):
    made = []
    for scen in ("weights-8-1", "weights-5-3-1", "weights-4-1-d16", "weights-3-3-1-d8", "weights-8-1-1m-writes", "depth1-vs-deep", "pods"):
        variants = variants_of(res, scen)
        if not variants:
            continue
        tenants = SCENARIOS[scen]
        # One panel per variant; per variant and round for a scenario run in rounds.
        panels = []
        for v in variants:
            vdir = os.path.join(out, "lessons", scen, v)
            if scen in ROUNDS_SCENARIOS:
                panels += [(f"{v} {os.path.basename(d)}", d) for d in round_dirs(vdir)]
            else:
                panels.append((v, vdir))
        parts = []
        for v, vdir in panels:
            series = {t: iops_series(vdir, t) for t in tenants}
            steps = sorted(set().union(*series.values()))
            dat = os.path.join(plots, f"{scen}-{v.replace(' ', '-')}.dat")
            with open(dat, "w") as f:
                f.write("# time_s " + " ".join(tenants) + "\n")
                for b in steps:
                    f.write(f"{b * 0.5:.1f} " + " ".join(str(series[t].get(b, 0)) for t in tenants) + "\n")
            cols = ", ".join(f"'{dat}' using 1:{i + 2} with lines lw 2 title '{tenant_label(t)}'"
                             for i, t in enumerate(tenants))
            parts.append(f"set title '{scen}: {v}'\nplot {cols}\n")
        png = os.path.join(plots, f"{scen}.png")
        script = (f"set terminal pngcairo noenhanced size 900,{260 * len(panels)}\nset output '{png}'\n"
                  f"set multiplot layout {len(panels)},1\nset xlabel 'time (s)'\n"
                  "set ylabel 'IOPS'\nset yrange [0:*]\nset key outside right\nset grid\n"
                  + "".join(parts) + "unset multiplot\n")
        if gnuplot(script):
            made.append(png)
    return made


def plot_stream_cdf(out, res, plots):
    variants = variants_of(res, "stream")
    curves = []
    for v in variants:
        lat_ms = []
        for path in glob.glob(os.path.join(out, "lessons", "stream", v, "small_clat.*.log")):
            with open(path) as f:
                for line in f:
                    parts = line.split(",")
                    if len(parts) >= 2:
                        lat_ms.append(int(parts[1]) / 1e6)
        if not lat_ms:
            continue
        lat_ms.sort()
        n = len(lat_ms)
        dat = os.path.join(plots, f"stream-cdf-{v}.dat")
        with open(dat, "w") as f:
            f.write("# latency_ms fraction\n")
            step = max(1, n // 2000)
            for i in list(range(0, n, step)) + [n - 1]:
                f.write(f"{lat_ms[i]:.4f} {(i + 1) / n:.5f}\n")
        curves.append(f"'{dat}' using 1:2 with lines lw 2 title '{v}'")
    if not curves:
        return []
    png = os.path.join(plots, "stream-latency-cdf.png")
    script = (f"set terminal pngcairo noenhanced size 900,500\nset output '{png}'\n"
              "set title 'small readers behind a streaming writer: read completion latency CDF'\n"
              "set logscale x\nset xlabel 'completion latency (ms)'\nset ylabel 'fraction of reads'\n"
              "set yrange [0:1]\nset key bottom right\nset grid\nplot " + ", ".join(curves) + "\n")
    return [png] if gnuplot(script) else []


# --- The shape matrix (bench/run --only matrix) ---

MATRIX_ERR_GOAL, MATRIX_PROBE_GOAL = 0.15, 0.5
MATRIX_KINDS = {"R": "randread, O_DIRECT", "W": "randwrite, O_DIRECT", "B": "sequential write, buffered"}


def matrix_shapes(seed, n):
    """N seeded shapes, one line each: NAME then one word per tenant,
    CGROUP:WEIGHT:KIND:BS_KIB:IODEPTH:NUMJOBS. Per shape 2-4 tenants (mx1..mx4):
    weight log-uniform 10-1000 (2 significant digits), KIND R/W/B (see
    MATRIX_KINDS), block size a power of two 4k-1M, libaio iodepth
    log-uniform 1-32, numjobs 1-2; then the shallow probe mxp (4k direct
    random reads, psync, depth 1) at the shape's largest weight."""
    rng = random.Random(seed)
    lines = []
    for i in range(1, n + 1):
        words, top = [], 0
        for t in range(1, rng.randint(2, 4) + 1):
            w = math.exp(rng.uniform(math.log(10), math.log(1000)))
            w = int(float(f"{w:.2g}"))
            kind = rng.choice("RWB")
            bs = 4 << rng.randint(0, 8)  # KiB, 4k-1M
            depth = max(1, min(32, round(math.exp(rng.uniform(0, math.log(32))))))
            words.append(f"mx{t}:{w}:{kind}:{bs}:{depth}:{rng.randint(1, 2)}")
            top = max(top, w)
        words.append(f"mxp:{top}:P:4:1:1")
        lines.append(f"s{i:02d} " + " ".join(words))
    return lines


def parse_shape(line):
    name, *words = line.split()
    tenants = []
    for word in words:
        cg, w, kind, bs, depth, nj = word.split(":")
        tenants.append({"t": cg, "w": int(w), "kind": kind, "bs": int(bs), "depth": int(depth),
                        "nj": int(nj)})
    return name, tenants


def shape_label(tenants):
    def bs(k):
        return f"{k // 1024}M" if k >= 1024 else f"{k}k"
    return " ".join(f"w{t['w']}:{t['kind']}{bs(t['bs'])}/d{t['depth']}" + (f"x{t['nj']}" if t["nj"] > 1 else "")
                    for t in tenants if t["kind"] != "P")


def water_fill(capacity, weights, demands):
    """Max-min fair by weight: {tenant: target rate}; a tenant whose demand is
    below its weighted share of what is left gets its demand (capped)."""
    left, active, target = capacity, set(weights), {}
    while active:
        wsum = sum(weights[t] for t in active)
        capped = {t for t in active if demands[t] < left * weights[t] / wsum}
        if not capped:
            for t in active:
                target[t] = left * weights[t] / wsum
            break
        for t in capped:
            target[t] = demands[t]
            left -= demands[t]
        active -= capped
    return target, set(weights) - active


def time_shares(vdir, tenants):
    """{tenant: share of the store's time since mount} from the daemon's
    stat.json (what the weights divide: fusesched stat's TIME), or None
    when the run has none (fifo charges no time; older daemons)."""
    try:
        with open(os.path.join(vdir, "stat.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    mount = doc["mounts"][0] if "mounts" in doc else doc
    got = {}
    for row in mount.get("tenants", []):
        name = os.path.basename(row.get("cgroup", ""))
        if name in tenants and row.get("time_share_total") is not None:
            got[name] = row["time_share_total"]
    return got if set(got) == set(tenants) and sum(got.values()) > 0 else None


def matrix_runs(out, scen, variant):
    """{round name: directory} of a matrix run: its rounds (rN, bench/run's
    BENCH_MATRIX_ROUNDS), or the one run of an older layout (named "")."""
    vdir = os.path.join(out, "lessons", scen, variant)
    rounds = {os.path.basename(d): d for d in round_dirs(vdir)}
    return rounds or ({"": vdir} if os.path.isdir(vdir) else {})


def matrix_shape_round(fifo_dir, bfq_dir, tenants, solo):
    """One round of one shape: its share errors, totals and the probe's
    fractions of solo, or None if either variant's run failed."""
    ts = [t["t"] for t in tenants]
    weights = {t["t"]: t["w"] for t in tenants}
    fifo_run, bfq_run = load_run(fifo_dir, ts), load_run(bfq_dir, ts)
    if fifo_run is None or bfq_run is None:
        return None
    fifo = {t: fifo_run[t]["mbps"] for t in ts}
    bfq = {t: bfq_run[t]["mbps"] for t in ts}
    # Demand: the fifo rate, or the bfq rate where higher (a tenant fifo
    # held back that got more under bfq has shown it can use more).
    demand = {t: max(fifo[t], bfq[t]) for t in ts}
    target, capped = water_fill(sum(bfq.values()), weights, demand)
    free = [t for t in ts if t not in capped]
    wfree = sum(weights[t] for t in free)
    worst = {}
    for v, r in ((BFQ, bfq), (FIFO, fifo)):
        tot = sum(r[t] for t in free)
        e = [abs(r[t] / tot / (weights[t] / wfree) - 1) for t in free] if len(free) > 1 and tot else []
        worst[v] = max(e) if e else None
    # The same tenants judged in the store's time, as the scheduler divides it.
    ts_time = time_shares(bfq_dir, ts)
    time_worst = None
    if ts_time and len(free) > 1:
        tot = sum(ts_time[t] for t in free)
        if tot > 0:
            time_worst = max(abs(ts_time[t] / tot / (weights[t] / wfree) - 1) for t in free)
    bt, ft = sum(bfq.values()), sum(fifo.values())
    kept = [bfq[t] / fifo[t] for t in capped if t != "mxp" and fifo[t]]
    return {"worst_bfq": worst[BFQ], "worst_fifo": worst[FIFO], "time_worst": time_worst,
            "bfq_total": bt, "fifo_total": ft, "total_ratio": div(bt, ft),
            "kept": min(kept) if kept else None,
            "probe_bfq": div(bfq_run["mxp"]["iops"], solo[BFQ]),
            "probe_fifo": div(fifo_run["mxp"]["iops"], solo[FIFO]),
            "share": {t: 100 * bfq[t] / bt for t in ts}, "target": {t: 100 * target[t] / bt for t in ts},
            "capped": capped}


def fmt_spread(values, digits=2):
    """The median of a shape's rounds, and their range where there are several."""
    xs = sorted(x for x in values if x is not None)
    if not xs:
        return "-"
    m = fmt(statistics.median(xs), digits)
    return m if len(xs) == 1 else f"{m} ({fmt(xs[0], digits)}-{fmt(xs[-1], digits)})"


def matrix_section(out):
    """Markdown lines and goals of the shape matrix, if this run has one.
    Each shape is judged on the median of its rounds: round r of a shape
    pairs its fifo and bfq runs of that round, and the probe's solo run of
    the same round."""
    path = os.path.join(out, "matrix-shapes.tsv")
    if not os.path.exists(path):
        return [], []
    with open(path) as f:
        shapes = [parse_shape(line) for line in f if line.strip()]

    solo_runs = {v: matrix_runs(out, "matrix-probe-solo", v) for v in (FIFO, BFQ)}

    def solo_of(rnd):
        got = {}
        for v in (FIFO, BFQ):
            d = solo_runs[v].get(rnd)
            run = load_run(d, ["mxp"]) if d else None
            got[v] = None if run is None else run["mxp"]["iops"]
        return got

    solos = {rnd: solo_of(rnd) for rnd in set(solo_runs[FIFO]) | set(solo_runs[BFQ])}
    rows, errs, probes, n_err, n_probe = [], {FIFO: [], BFQ: []}, [], 0, 0
    time_errs, n_time = [], 0
    for name, tenants in shapes:
        scen = "matrix-" + name
        weights = {t["t"]: t["w"] for t in tenants}
        cells = [name, shape_label(tenants) + f" + probe w{weights['mxp']}"]
        fifo_runs, bfq_runs = matrix_runs(out, scen, FIFO), matrix_runs(out, scen, BFQ)
        got = []
        for rnd in sorted(set(fifo_runs) & set(bfq_runs)):
            m = matrix_shape_round(fifo_runs[rnd], bfq_runs[rnd], tenants,
                                   solos.get(rnd, {FIFO: None, BFQ: None}))
            if m is not None:
                got.append(m)
        if not got:
            ran = fifo_runs and bfq_runs
            rows.append(cells + ["failed" if ran else "not run"] + ["-"] * 8)
            continue

        def med(key):
            return median(m[key] for m in got)

        worst_bfq, time_worst, probe_bfq = med("worst_bfq"), med("time_worst"), med("probe_bfq")
        if worst_bfq is not None:
            errs[BFQ].append(worst_bfq)
            n_err += worst_bfq <= MATRIX_ERR_GOAL
        if med("worst_fifo") is not None:
            errs[FIFO].append(med("worst_fifo"))
        if time_worst is not None:
            time_errs.append(time_worst)
            n_time += time_worst <= MATRIX_ERR_GOAL
        if probe_bfq is not None and probe_bfq >= MATRIX_PROBE_GOAL:
            n_probe += 1
        probes.append(probe_bfq)
        capped = set().union(*(m["capped"] for m in got))
        share_cells = [f"{median(m['share'][t] for m in got):.0f}/{median(m['target'][t] for m in got):.0f}"
                       + ("*" if t in capped else "") for t in weights if t != "mxp"]
        rows.append(cells + [str(len(got)), " ".join(share_cells),
                             fmt_spread(m["worst_bfq"] for m in got),
                             fmt_spread(m["time_worst"] for m in got),
                             fmt_spread(m["worst_fifo"] for m in got),
                             f"{med('bfq_total'):.0f} / {med('fifo_total'):.0f}, "
                             f"{fmt_spread(m['total_ratio'] for m in got)}",
                             fmt_spread(m["kept"] for m in got),
                             fmt_spread(m["probe_bfq"] for m in got),
                             fmt_spread(m["probe_fifo"] for m in got)])
    solo_cell = {v: fmt(median(s[v] for s in solos.values()), 0) for v in (FIFO, BFQ)}
    lines = ["", "### Shape matrix: 2-4 random tenants and a shallow probe per shape (bytes/s shares)", "",
             "Tenants: wWEIGHT:KIND BS/dIODEPTH (xNUMJOBS), KIND " + ", ".join(
                 f"{k} {d}" for k, d in MATRIX_KINDS.items())
             + " (libaio); the probe, 4k direct random reads at depth 1 (psync), has the shape's "
             "largest weight. Shares are of bytes/s (fio's bandwidth; IOPS x block size), not of "
             "the store's time: a 4k random read costs more time per byte than a 1 MiB one. "
             "Targets are max-min fair by weight over the bfq total, each tenant's demand its fifo "
             "rate or, where higher, its bfq rate (fifo held it back): a tenant whose demand is "
             "below its weighted share (*) is shallow and gets its demand, and the shallow column shows the lowest such tenant's bfq rate over its fifo rate (the probe aside); the error (relative, worst tenant) is over the others only, their "
             "shares of what they received against their weights' ratio (- : fewer than two). "
             "The store-time error is the same over the daemon's own account of each tenant's "
             "share of the store's time since mount (`fusesched stat` TIME, bfq only: fifo charges "
             "none), which is what the weights divide. "
             f"The probe's fraction is of its solo IOPS on the same variant in the same round "
             f"(solo IOPS, median of rounds: fifo {solo_cell[FIFO]}, bfq {solo_cell[BFQ]}). "
             "Each shape ran in rounds, fifo and bfq back to back in each, the order rotating; "
             "each cell is the median of the shape's rounds (their range in brackets), shares "
             "the medians of each tenant's, and the goals are judged on the medians.", ""]
    lines += md_table(["shape", "tenants", "rounds", "bfq share / target % per tenant", "worst err bfq",
                       "worst err bfq, store time", "worst err fifo", "total MB/s bfq / fifo",
                       "shallow (*): lowest bfq / fifo", "probe / solo bfq", "probe / solo fifo"], rows)
    nerr = len(errs[BFQ])
    lines += ["", f"{n_err} of {nerr} shapes with an error measured meet bfq share error <= "
              f"{MATRIX_ERR_GOAL:.2f} (fifo: {sum(1 for e in errs[FIFO] if e <= MATRIX_ERR_GOAL)} of "
              f"{len(errs[FIFO])}); {n_probe} of {len(probes)} shapes keep the probe at >= "
              f"{MATRIX_PROBE_GOAL} of its solo rate under bfq."
              + (f" In store time, {n_time} of {len(time_errs)} meet the error bound." if time_errs else "")]
    goals = []
    if nerr:
        goals.append({"goal": f"matrix: shapes with bfq share error <= {MATRIX_ERR_GOAL} "
                      f"({n_err} of {nerr}), worst", "value": max(errs[BFQ]),
                      "target": f"<= {MATRIX_ERR_GOAL}", "met": max(errs[BFQ]) <= MATRIX_ERR_GOAL})
    if time_errs:
        goals.append({"goal": f"matrix: shapes with bfq store-time share error <= {MATRIX_ERR_GOAL} "
                      f"({n_time} of {len(time_errs)}), worst", "value": max(time_errs),
                      "target": f"<= {MATRIX_ERR_GOAL}", "met": max(time_errs) <= MATRIX_ERR_GOAL})
    mp = [p for p in probes if p is not None]
    if mp:
        goals.append({"goal": f"matrix: shallow probe, bfq vs solo ({n_probe} of {len(probes)} "
                      f"shapes >= {MATRIX_PROBE_GOAL}), lowest", "value": min(mp),
                      "target": f">= {MATRIX_PROBE_GOAL}", "met": min(mp) >= MATRIX_PROBE_GOAL})
    return lines, goals


def brief(vdir):
    scen, variant = vdir.rstrip("/").split("/")[-2:]
    if not scen.startswith("matrix-") and scen not in SCENARIOS:  # lessons/SCENARIO/VARIANT/rN
        scen, variant, rnd = vdir.rstrip("/").split("/")[-3:]
        variant = f"{variant} {rnd}"
    if scen.startswith("matrix-"):  # the shape matrix: its tenants are its JSON files
        tenants = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(vdir, "mx*.json")))
        SCENARIOS[scen] = tenants
    parts = []
    for tenant in SCENARIOS.get(scen, []):
        try:
            s = tenant_summary(os.path.join(vdir, tenant + ".json"))
        except (OSError, ValueError, KeyError, IndexError):
            parts.append(f"{tenant} failed")
            continue
        parts.append(f"{tenant} {s['mbps']:.2f} MB/s {s['iops']:.0f} IOPS "
                     f"p99 {s['p99_us']:.0f} us max {s['max_us']:.0f} us")
    print(f"  {scen} {variant}: " + "; ".join(parts))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--brief":
        brief(sys.argv[2])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--matrix-shapes":
        print("\n".join(matrix_shapes(int(sys.argv[2]), int(sys.argv[3]))))
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    lines, single_json, goals, single_goals = [], [], [], {}
    rows_path = os.path.join(out, "rows.tsv")
    if os.path.exists(rows_path) and os.path.getsize(rows_path) > 0:
        single_lines, single_json, single_goals = table.single_table(rows_path)
        ls_lines, ls_goals = table.ls_table(rows_path)
        rounds = table.rounds_of(rows_path)
        lines += ["### Single tenant", ""]
        if rounds > 1:
            lines += [f"Median of {rounds} rounds; in each round every row ran every variant back "
                      "to back, the variant order rotating from row to row (each run's numbers "
                      "are in rows.tsv).", ""]
        lines += single_lines
        if ls_lines:
            if single_lines:
                lines.append("")
            lines += ["`ls -l` of one directory (milliseconds per run, lower is better; the ratios "
                      "are time ratios, above 1 is slower than the base): a cell is the median over "
                      "the rounds of the median of the runs on one mount; cold runs after `sync; "
                      "echo 3 > /proc/sys/vm/drop_caches`, warm is `ls -l` again right after it.",
                      ""] + ls_lines
        for key, base, limit in (("passthrough_ll", "passthrough_ll", 1.0),
                                 ("fifo", "fusesched-fifo", table.FIFO_GOAL)):
            results = single_goals.get(key, [])
            if not results:
                continue
            measured = [(r, name) for name, r in results if r is not None]
            unmeasured = [name for name, r in results if r is None]
            worst = min(measured) if measured else (None, None)
            missed = sum(1 for r, _ in measured if r < limit)
            label = (f"single tenant: bfq vs {base}, worst goal row ({worst[1]}; "
                     f"{missed} of {len(measured)} rows below {limit:.2f})")
            if unmeasured:
                label += f"; not comparable: {', '.join(unmeasured)}"
            goals.append({"goal": label, "value": worst[0], "target": f">= {limit:.2f}",
                          "met": None if worst[0] is None else worst[0] >= limit})
        for name, r in ls_goals:
            goals.append({"goal": f"ls -l ({name}): bfq's time vs passthrough_ll's (issue 19)",
                          "value": r, "target": f"<= {table.LS_GOAL:.2f}",
                          "met": None if r is None else r <= table.LS_GOAL})
    if any(r is None for _, r in single_goals.get("passthrough_ll", [])):
        lines += ["", "A row marked failed could not run on that variant (fio's error is in "
                  "single/ROW-VARIANT.json.err): libfuse's passthrough_ll opens the backing file "
                  "O_DIRECT for an O_DIRECT caller and writes from an unaligned buffer, so its "
                  "direct writes fail with EINVAL; seq-write-1m-buffered is the write row it "
                  "can be compared on."]
    res = load_lessons(out)
    res["_out"] = out
    lesson_lines, lesson_goals = lesson_tables(res)
    lines += lesson_lines
    goals += lesson_goals
    matrix_lines, matrix_goals = matrix_section(out)
    lines += matrix_lines
    goals += matrix_goals
    plots = os.path.join(out, "plots")
    os.makedirs(plots, exist_ok=True)
    pngs = plot_weights(out, res, plots) + plot_stream_cdf(out, res, plots)
    loads = []
    for path in sorted(glob.glob(os.path.join(out, "lessons", "*", "*", "loadavg"))
                       + glob.glob(os.path.join(out, "lessons", "*", "*", "r*", "loadavg"))):
        with open(path) as f:
            loads.append((float(f.read().split()[0]), os.path.relpath(os.path.dirname(path), out)))
    if loads:
        top = max(loads)
        lines += ["", f"Load average before the lesson runs: median {sorted(loads)[len(loads) // 2][0]:.1f}, "
                  f"highest {top[0]:.1f} (before {top[1]}); on 2 cores, other work on the machine "
                  "skews a run (the per-run values are in lessons/*/*/loadavg"
                  + (", lessons/*/*/r*/loadavg" if any(s in res for s in ROUNDS_SCENARIOS)
                     else "") + ")."]
    print("\n".join(["### Goals", ""] + goal_table(goals) + [""] + lines))
    if pngs:
        print("\nPlots: " + ", ".join(os.path.relpath(p, out) for p in pngs)
              + " (in the results directory)")
    with open(os.path.join(out, "results.json"), "w") as f:
        del res["_out"]
        json.dump({"single": single_json, "lessons": res, "goals": goals,
                   "plots": [os.path.relpath(p, out) for p in pngs]}, f, indent=1)


if __name__ == "__main__":
    main()
