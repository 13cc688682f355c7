#!/usr/bin/env python3
"""Turns bench rows (TSV: row, unit, variant, value, p99_us) into one markdown
table with each variant's ratio to passthrough_ll and to raw, and a JSON copy."""
import collections
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: table.py ROWS.tsv OUT.json")
    rows = collections.OrderedDict()
    variants = []
    with open(sys.argv[1]) as f:
        for line in f:
            name, unit, variant, value, p99 = line.rstrip("\n").split("\t")
            rows.setdefault((name, unit), {})[variant] = (float(value), float(p99))
            if variant not in variants:
                variants.append(variant)
    head = ["row", "unit"] + [f"{v}" for v in variants] + [f"{v} p99 us" for v in variants]
    ratio_variants = [v for v in variants if v.startswith("fusesched")]
    head += [f"{v}/passthrough_ll" for v in ratio_variants] + [f"{v}/raw" for v in ratio_variants]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    out = []
    for (name, unit), by_variant in rows.items():
        cells = [name, unit]
        # A negative value marks a row the variant could not run.
        cells += [("failed" if by_variant[v][0] < 0 else f"{by_variant[v][0]:.1f}")
                  if v in by_variant else "-" for v in variants]
        cells += [f"{by_variant[v][1]:.0f}" if v in by_variant else "-" for v in variants]
        for base in ("passthrough_ll", "raw"):
            for v in ratio_variants:
                if v in by_variant and base in by_variant and by_variant[base][0] > 0 \
                        and by_variant[v][0] >= 0:
                    cells.append(f"{by_variant[v][0] / by_variant[base][0]:.2f}")
                else:
                    cells.append("-")
        print("| " + " | ".join(cells) + " |")
        out.append({"row": name, "unit": unit,
                    "results": {v: {"value": by_variant[v][0], "p99_us": by_variant[v][1]}
                                for v in by_variant}})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)


main()
