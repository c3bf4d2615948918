"""Where a kernel's warps wait, from Nsight Compute's source page (warp-stall samples per SASS line).

    ncu -i report.ncu-rep --page source --csv --print-source sass > source.csv
    python benchmarks/ncu_stalls.py source.csv            # or source.csv.gz
    python benchmarks/ncu_stalls.py source.csv --top 25   # also the 25 lines most sampled

Per profiled kernel: the share of stall samples by reason (``long_sb``: waiting on a global or
local load's result; ``short_sb``: on shared memory or a slow ALU op; ``barrier``: at a
``bar.sync``; ``selected``: issuing, i.e. not a stall), the share of samples and of executed
warp instructions by opcode, and with ``--top`` the lines that collect most samples with their
two main reasons. A load's latency shows up at the first instruction that reads its result (for
bf16 tiles, the ``PRMT`` that unpacks two values from a loaded word), not at the load. Not run
in CI.
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import io
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def kernels(text: str):
    """(kernel name, header, rows) per block of ``--page source --csv`` output."""
    for block in text.split('"Kernel Name",')[1:]:
        name, rest = block.split("\n", 1)
        rows = list(csv.reader(io.StringIO(rest)))
        header = rows[0]
        yield name.strip('",'), header, [r for r in rows[1:] if len(r) == len(header)]


def opcode(source: str) -> str:
    words = source.split()
    if words and words[0].startswith("@"):         # a predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summarize(name: str, header: list[str], rows: list[list[str]], top: int) -> None:
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def num(row, key):
        return int(row[col[key]] or 0)

    samples = sum(num(r, SAMPLES) for r in rows) or 1
    executed = sum(num(r, EXECUTED) for r in rows) or 1
    by_reason = collections.Counter({h[6:]: sum(num(r, h) for r in rows) for h in reasons})
    by_op, op_exec = collections.Counter(), collections.Counter()
    for r in rows:
        by_op[opcode(r[col["Source"]])] += num(r, SAMPLES)
        op_exec[opcode(r[col["Source"]])] += num(r, EXECUTED)
    print(f"== {name}: {samples} samples, {executed} warp instructions executed")
    print("   stalls: " + ", ".join(f"{k} {v / samples:.1%}" for k, v in by_reason.most_common(8)))
    print("   opcodes (samples / executed): " + ", ".join(
        f"{k} {v / samples:.0%}/{op_exec[k] / executed:.0%}" for k, v in by_op.most_common(12)))
    for r in sorted(rows, key=lambda r: -num(r, SAMPLES))[:top]:
        main = sorted(((num(r, h), h[6:]) for h in reasons), reverse=True)[:2]
        print(f"   {num(r, SAMPLES) / samples:6.1%}  {r[col['Source']].strip()[:56]:56s} "
              + ", ".join(f"{k} {v}" for v, k in main))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", help="ncu --page source --csv output (.gz read as gzip)")
    ap.add_argument("--top", type=int, default=0, help="also list the N most sampled lines")
    args = ap.parse_args(argv)
    opener = gzip.open if args.path.endswith(".gz") else open
    with opener(args.path, "rt") as f:
        text = f.read()
    for name, header, rows in kernels(text):
        summarize(name, header, rows, args.top)


if __name__ == "__main__":
    sys.exit(main())
