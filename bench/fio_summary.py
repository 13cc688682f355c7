#!/usr/bin/env python3
"""Prints "<value> <p99_us> <ios>" from a fio JSON result: MB/s or IOPS of
reads or writes, the p99 completion latency, and the reads and writes the
job issued."""
import json
import sys


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("read", "write") or sys.argv[3] not in ("mbps", "iops"):
        sys.exit("usage: fio_summary.py RESULT.json read|write mbps|iops")
    path, direction, metric = sys.argv[1:]
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document.
    data = json.loads(text[text.index("{"):])
    job = data["jobs"][0][direction]
    value = job["bw_bytes"] / 1e6 if metric == "mbps" else job["iops"]
    pct = job.get("clat_ns", {}).get("percentile", {})
    p99_us = pct.get("99.000000", 0) / 1000.0
    ios = sum(data["jobs"][0][d].get("total_ios", 0) for d in ("read", "write"))
    print(f"{value:.1f} {p99_us:.0f} {ios}")


main()
