#!/usr/bin/env python3
"""Turns bench rows (TSV: row, unit, variant, value, p99_us, and the FUSE
daemon's CPU microseconds per operation or -1; older results have five
columns) into markdown tables with each fusesched variant's ratio to
passthrough_ll and to raw.

Rows in a throughput unit (MB/s, IOPS, ops/s: higher is better) go into the
single-tenant table, with goal columns for the rows issue 5 sets goals on
(GOAL_ROWS): fusesched-bfq at least as fast as passthrough_ll and at least 90%
of fusesched-fifo (the other rows are for information). Rows in a time unit
(TIME_UNITS, lower is better: the `ls -l` rows) go into a table of their own
(ls_table), whose ratios are time ratios (above 1: slower than the base), with
issue 19's goal: fusesched-bfq within LS_GOAL times passthrough_ll. A row run
several times (rounds) shows the median value and the median p99 of its runs.
As a program it also writes a JSON copy."""
import collections
import json
import statistics
import sys

GOAL_VARIANT = "fusesched-bfq"
FIFO_VARIANT = "fusesched-fifo"
GOAL_ROWS = ("seq-read-1m", "seq-write-1m", "seq-write-1m-buffered", "rand-read-4k-qd1",
             "rand-read-4k-qd16")
FIFO_GOAL = 0.90
TIME_UNITS = ("ms",)  # lower is better
LS_GOAL = 1.50  # issue 19: ls -l through fusesched-bfq at most 1.5x passthrough_ll's time


def read_rows(path):
    runs = collections.OrderedDict()
    variants = []
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            name, unit, variant, value, p99 = fields[:5]
            cpu = float(fields[5]) if len(fields) > 5 else -1.0
            runs.setdefault((name, unit), {}).setdefault(variant, []).append(
                (float(value), float(p99), cpu))
            if variant not in variants:
                variants.append(variant)
    rows = collections.OrderedDict()
    for key, by_variant in runs.items():
        rows[key] = {}
        for v, results in by_variant.items():
            cpus = [r[2] for r in results if r[2] >= 0]
            cpu = statistics.median(cpus) if cpus else -1.0
            # A row that failed in any round is failed: its other numbers would flatter it.
            if any(r[0] < 0 for r in results):
                rows[key][v] = (-1.0, 0.0, -1.0)
            else:
                rows[key][v] = (statistics.median(r[0] for r in results),
                                statistics.median(r[1] for r in results), cpu)
    return rows, variants


def rounds_of(path):
    """How many times the most-run row was run by one variant."""
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            name, _, variant = line.rstrip("\n").split("\t")[:3]
            counts[(name, variant)] += 1
    return max(counts.values(), default=0)


def ratio(by_variant, v, base):
    if v in by_variant and base in by_variant and by_variant[base][0] > 0 and by_variant[v][0] >= 0:
        return by_variant[v][0] / by_variant[base][0]
    return None


def single_table(path):
    """Returns (markdown lines, JSON rows, goal results): goal results are
    {"passthrough_ll": [(row, ratio or None)], "fifo": [(row, ratio or None)]}
    for the GOAL_ROWS present."""
    all_rows, variants = read_rows(path)
    rows = collections.OrderedDict((k, v) for k, v in all_rows.items() if k[1] not in TIME_UNITS)
    head = ["row", "unit"] + variants + [f"{v} p99 us" for v in variants]
    # The daemon's CPU per operation, for the variants that have a daemon and
    # rows that measured it.
    cpu_variants = [v for v in variants
                    if any(v in bv and bv[v][2] >= 0 for bv in rows.values())]
    head += [f"{v} daemon CPU us/op" for v in cpu_variants]
    ratio_variants = [v for v in variants if v.startswith("fusesched")]
    head += [f"{v}/passthrough_ll" for v in ratio_variants] + [f"{v}/raw" for v in ratio_variants]
    with_goal = GOAL_VARIANT in variants and "passthrough_ll" in variants
    with_fifo_goal = GOAL_VARIANT in variants and FIFO_VARIANT in variants
    if with_goal:
        head.append("goal: bfq >= passthrough_ll")
    if with_fifo_goal:
        head.append(f"goal: bfq >= {FIFO_GOAL:.2f} fifo")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out, goals = [], {"passthrough_ll": [], "fifo": []}
    for (name, unit), by_variant in rows.items():
        cells = [name, unit]
        # A negative value marks a row the variant could not run.
        cells += [("failed" if by_variant[v][0] < 0 else f"{by_variant[v][0]:.1f}")
                  if v in by_variant else "-" for v in variants]
        cells += [f"{by_variant[v][1]:.0f}" if v in by_variant else "-" for v in variants]
        cells += [f"{by_variant[v][2]:.1f}" if v in by_variant and by_variant[v][2] >= 0 else "-"
                  for v in cpu_variants]
        for base in ("passthrough_ll", "raw"):
            for v in ratio_variants:
                r = ratio(by_variant, v, base)
                cells.append("-" if r is None else f"{r:.2f}")
        for enabled, base, key, limit in ((with_goal, "passthrough_ll", "passthrough_ll", 1.0),
                                          (with_fifo_goal, FIFO_VARIANT, "fifo", FIFO_GOAL)):
            if not enabled:
                continue
            if name not in GOAL_ROWS:
                cells.append("info")
                continue
            r = ratio(by_variant, GOAL_VARIANT, base)
            goals[key].append((name, r))
            cells.append("?" if r is None else
                         ("met" if r >= limit else f"missed by {(1 - r / limit) * 100:.0f}%"))
        lines.append("| " + " | ".join(cells) + " |")
        out.append({"row": name, "unit": unit,
                    "results": {v: {"value": by_variant[v][0], "p99_us": by_variant[v][1],
                                    **({"daemon_cpu_us_per_op": by_variant[v][2]}
                                       if by_variant[v][2] >= 0 else {})}
                                for v in by_variant}})
    if not rows:
        lines = []
    for (name, unit), by_variant in all_rows.items():
        if unit in TIME_UNITS:
            out.append({"row": name, "unit": unit, "lower_is_better": True,
                        "results": {v: {"value": by_variant[v][0]} for v in by_variant}})
    return lines, out, goals


def ls_table(path):
    """The rows in a time unit (the `ls -l` rows): returns (markdown lines, goal
    results [(row, bfq/passthrough_ll time ratio or None)]); no lines if there
    are none."""
    all_rows, variants = read_rows(path)
    rows = [(k, v) for k, v in all_rows.items() if k[1] in TIME_UNITS]
    if not rows:
        return [], []
    ratio_variants = [v for v in variants if v.startswith("fusesched")]
    head = ["row", "unit"] + variants
    head += [f"{v}/passthrough_ll" for v in ratio_variants] + [f"{v}/raw" for v in ratio_variants]
    with_goal = GOAL_VARIANT in variants and "passthrough_ll" in variants
    if with_goal:
        head.append(f"goal: bfq <= {LS_GOAL:.1f}x passthrough_ll")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    goals = []
    for (name, unit), by_variant in rows:
        cells = [name, unit]
        cells += [("failed" if by_variant[v][0] < 0 else f"{by_variant[v][0]:.1f}")
                  if v in by_variant else "-" for v in variants]
        for base in ("passthrough_ll", "raw"):
            for v in ratio_variants:
                r = ratio(by_variant, v, base)
                cells.append("-" if r is None else f"{r:.2f}")
        if with_goal:
            r = ratio(by_variant, GOAL_VARIANT, "passthrough_ll")
            goals.append((name, r))
            cells.append("?" if r is None else
                         ("met" if r <= LS_GOAL else f"missed: {r / LS_GOAL:.2f}x the limit"))
        lines.append("| " + " | ".join(cells) + " |")
    return lines, goals


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: table.py ROWS.tsv OUT.json")
    lines, out, _ = single_table(sys.argv[1])
    ls_lines, _ = ls_table(sys.argv[1])
    print("\n".join(lines + ([""] if lines and ls_lines else []) + ls_lines))
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
