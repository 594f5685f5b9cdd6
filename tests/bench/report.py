#!/usr/bin/env python3
"""Report of the file-system benchmark (tests/bench/fs_bench.sh).

  report.py OUT                      read OUT/raw, write OUT/report.md,
                                     OUT/report.json and OUT/plots/*.svg
  report.py --machine OUT            print the machine description as JSON
  report.py --subset-tar SRC N DST   copy the first N members of the tar SRC
                                     into DST (N = 0: DST is SRC, left as is)
                                     and write DST.info: "top entries bytes"

Exit status: 0 done, 1 failed, 64 usage.
"""
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile

FSTITCH = ["fstitch-su", "fstitch-none", "fstitch-journal", "fstitch-jdata"]
OTHERS = ["fuse2fs", "passthrough_ll", "kernel-ext2", "fuse2fs-ext3",
          "kernel-ext3", "kernel-ext3-dj"]
ORDER = FSTITCH + OTHERS
LABEL = {
    "fstitch-su": "fstitch (softupdates)",
    "fstitch-none": "fstitch (none)",
    "fstitch-journal": "fstitch (journal, ext3 image)",
    "fstitch-jdata": "fstitch (journal-data, ext3 image)",
    "fuse2fs": "fuse2fs",
    "passthrough_ll": "passthrough_ll",
    "kernel-ext2": "kernel ext2",
    "fuse2fs-ext3": "fuse2fs (ext3 image)",
    "kernel-ext3": "kernel ext3 (data=ordered)",
    "kernel-ext3-dj": "kernel ext3 (data=journal)",
}

# What each workload measures, stated once for the tables and the plots.
WHAT = {
    ("untar", "extract"): "tar -xf of the linux-source tree into a fresh "
    "file system, then the durable unmount",
    ("untar", "rm"): "rm -rf of that tree on a fresh mount, then the "
    "durable unmount",
    ("postmark", "default"): "PostMark (create, transactions, delete), then "
    "the durable unmount",
    ("replace", "fsync"): "atomic replace, one process: write temp, fsync, "
    "rename",
    ("replace", "fsync-proc"): "atomic replace, one process per update: "
    "write temp, fsync, rename",
    ("replace", "nosync"): "atomic replace without fsync (not crash-safe; "
    "upper bound)",
    ("replace", "nosync-proc"): "fsync-proc without its fsync (not "
    "crash-safe): the processes a pgrun chain starts too",
    ("replace", "pg-chain"): "atomic replace, one pgrun --after chain link "
    "per update, no fsync",
    ("replace", "pg-order"): "the fsync program under pgrun --fsync=order",
    ("replace", "pg-api"): "atomic replace with the C API in one process "
    "(pg_replace pg): temp file in group A, rename in group B after A",
    ("replace", "pg-switch"): "pg-api's groups in two requests per update "
    "(pg_replace switch: pg_switch before the write and before the rename)",
    ("replace", "fsync-api"): "the same program with write, fsync, rename "
    "(pg_replace fsync), for pg-api to compare against",
    ("mail", "fsync"): "move messages mbox to mbox, fsync after each step, "
    "then expunge",
    ("mail", "nosync"): "the same without fsync (not crash-safe)",
    ("mail", "pg-order"): "the fsync mail program under pgrun --fsync=order",
    ("mail", "pg-api"): "the mail program with the C API (fsops mail-move "
    "-p): each message's mark in a group after its copy's, no fsync, "
    "order policy PG_ORDER_GROUPS",
    ("sqlite", "fsync"): "sqlite3 insert loop, one transaction per row "
    "(rollback journal, synchronous=FULL)",
    ("sqlite", "nosync"): "the same with synchronous=off (not crash-safe)",
    ("sqlite", "pg-order"): "the fsync sqlite3 loop under pgrun "
    "--fsync=order",
}

# The comparisons made on every disk (section "Disks with a slow cache
# flush"): (workload, A variant, A contender, B variant, B contender,
# target rate ratio A/B or None).  The targets are design.md §7's and
# issue 13's, met on the 8 ms disk (10x, 5x) or on every disk (0.7x, 1x).
DISK_PAIRS = [
    ("replace", "pg-api", "fstitch-su", "fsync-api", "fstitch-su", 10.0),
    ("replace", "pg-switch", "fstitch-su", "fsync-api", "fstitch-su", 10.0),
    ("replace", "pg-switch", "fstitch-su", "nosync", "fstitch-su", 0.7),
    ("replace", "pg-switch", "fstitch-su", "fsync-api", "kernel-ext2", 1.0),
    ("replace", "pg-order", "fstitch-su", "fsync", "fstitch-su", 10.0),
    ("replace", "pg-chain", "fstitch-su", "fsync-proc", "fstitch-su", 5.0),
    ("replace", "pg-api", "fstitch-su", "nosync", "fstitch-su", 0.7),
    ("replace", "pg-api", "fstitch-su", "fsync-api", "kernel-ext2", 1.0),
    ("replace", "pg-order", "fstitch-su", "fsync", "kernel-ext2", 1.0),
    ("replace", "fsync", "fstitch-su", "fsync", "kernel-ext2", None),
    ("replace", "fsync", "fstitch-su", "fsync", "fuse2fs", None),
    ("replace", "nosync", "kernel-ext2", "fsync", "kernel-ext2", None),
    ("mail", "pg-order", "fstitch-su", "fsync", "fstitch-su", 5.0),
    ("mail", "pg-order", "fstitch-su", "fsync", "kernel-ext2", None),
    ("mail", "pg-api", "fstitch-su", "fsync", "fstitch-su", 5.0),
    ("mail", "pg-api", "fstitch-su", "fsync", "kernel-ext2", 1.0),
    ("sqlite", "pg-order", "fstitch-su", "fsync", "fstitch-su", None),
    ("sqlite", "pg-order", "fstitch-su", "fsync", "kernel-ext2", None),
    ("sqlite", "fsync", "fstitch-su", "fsync", "kernel-ext2", None),
    ("postmark", "default", "fstitch-su", "default", "fstitch-none", None),
    ("postmark", "default", "fstitch-su", "default", "fuse2fs", None),
    # the journal modes (issue 12)
    ("replace", "pg-api", "fstitch-journal", "fsync-api", "fstitch-journal",
     10.0),
    ("replace", "pg-order", "fstitch-journal", "fsync", "fstitch-journal",
     10.0),
    ("replace", "pg-chain", "fstitch-journal", "fsync-proc",
     "fstitch-journal", 5.0),
    ("replace", "pg-api", "fstitch-journal", "fsync-api", "kernel-ext3", 1.0),
    ("replace", "fsync", "fstitch-journal", "fsync", "fuse2fs-ext3", 1.0),
    ("replace", "fsync", "fstitch-journal", "fsync", "kernel-ext3", None),
    ("replace", "fsync", "fstitch-journal", "fsync", "fstitch-su", None),
    ("replace", "fsync", "fstitch-jdata", "fsync", "kernel-ext3-dj", None),
    ("mail", "pg-order", "fstitch-journal", "fsync", "fstitch-journal", 5.0),
    ("mail", "pg-api", "fstitch-journal", "fsync", "fstitch-journal", 5.0),
    ("mail", "pg-order", "fstitch-journal", "fsync", "kernel-ext3", 1.0),
    ("mail", "fsync", "fstitch-journal", "fsync", "fuse2fs-ext3", None),
    ("sqlite", "fsync", "fstitch-journal", "fsync", "kernel-ext3", None),
    ("postmark", "default", "fstitch-journal", "default", "fstitch-su",
     None),
]

# The targets of issues 12 (journaling) and 13 (ordering cheaper than
# fsync), each a rate ratio A/B taken within each run and summarised by its
# median over runs: (issue, what, disks, workload, A variant, A contender,
# B variant, B contender, op, bound).  disks: "bare" (the bare disk only),
# "ge2" (each emulated disk of 2 ms or more), "8" (the 8 ms disk), "all"
# (every disk).  op ">=": ratio >= bound; ">": ratio > bound; "<=": time
# ratio (B's rate over A's, i.e. A's time / B's time) <= bound.
JT, SU = "fstitch-journal", "fstitch-su"
ISSUE_TARGETS = [
    ("12", "untar extract in journal mode within 1.2× of softupdates "
     "(journal time / softupdates time)", "bare",
     "untar", "extract", JT, "extract", SU, "<=", 1.2),
    ("12", "untar rm in journal mode within 1.2× of softupdates "
     "(journal time / softupdates time)", "bare",
     "untar", "rm", JT, "rm", SU, "<=", 1.2),
]
# A variant named WORK + v in ISSUE_TARGETS: v's time before its final
# flush (work_s), not its time until durable.
WORK = "work:"
for _v, _b in [("pg-api", "fsync-api"), ("pg-order", "fsync"),
               ("pg-chain", "fsync-proc")]:
    ISSUE_TARGETS.append(
        ("12", f"replace {_v} in journal mode ≥10× its fsync version "
         f"({_b}), same mount", "ge2",
         "replace", _v, JT, _b, JT, ">=", 10.0))
ISSUE_TARGETS.append(
    ("12", "ceiling of the chain's ratio here: nosync-proc's processes "
     "alone (fsync-proc's, no fsync; time before the final flush) ≥10× "
     "fsync-proc, journal mode", "ge2",
     "replace", WORK + "nosync-proc", JT, "fsync-proc", JT, ">=", 10.0))
ISSUE_TARGETS.append(
    ("12", "mail pg-order in journal mode ≥10× mail fsync, same mount",
     "ge2", "mail", "pg-order", JT, "fsync", JT, ">=", 10.0))
for _v, _b in [("pg-api", "fsync-api"), ("pg-order", "fsync"),
               ("pg-chain", "fsync-proc")]:
    ISSUE_TARGETS.append(
        ("12", f"replace {_v} in journal mode ahead of kernel ext3 "
         f"({_b})", "ge2", "replace", _v, JT, _b, "kernel-ext3", ">", 1.0))
ISSUE_TARGETS += [
    ("12", "mail pg-order in journal mode ahead of kernel ext3 with fsync",
     "ge2", "mail", "pg-order", JT, "fsync", "kernel-ext3", ">", 1.0),
    ("12", "replace fsync in journal mode ≥ fuse2fs's fsync rate (ext3 "
     "image)", "all", "replace", "fsync", JT, "fsync", "fuse2fs-ext3", ">=",
     1.0),
    ("12", "mail fsync in journal mode ≥ fuse2fs's fsync rate (ext3 image)",
     "all", "mail", "fsync", JT, "fsync", "fuse2fs-ext3", ">=", 1.0),
]
for _c, _m in [(SU, "softupdates"), (JT, "journal")]:
    ISSUE_TARGETS += [
        ("13", f"{_m}: replace pg-api ≥10× fsync-api", "8",
         "replace", "pg-api", _c, "fsync-api", _c, ">=", 10.0),
        ("13", f"{_m}: replace pgrun --fsync=order ≥10× fsync", "8",
         "replace", "pg-order", _c, "fsync", _c, ">=", 10.0),
        ("13", f"{_m}: replace pgrun chain ≥5× fsync-proc", "8",
         "replace", "pg-chain", _c, "fsync-proc", _c, ">=", 5.0),
        # Not a target but the chain's ceiling here: a chain that cost
        # nothing but its processes would reach this ratio; below 5× the
        # target above cannot be met on this machine (design.md §7).
        # The processes' time is nosync-proc's before its final flush:
        # under soft updates that flush pays rename_order's chain of
        # renames, which a chain of groups does not.
        ("13", f"{_m}: ceiling of the chain's ratio here: nosync-proc's "
         "processes alone (fsync-proc's, no fsync; time before the final "
         "flush) ≥5× fsync-proc", "8",
         "replace", WORK + "nosync-proc", _c, "fsync-proc", _c, ">=", 5.0),
        ("13", f"{_m}: mail pg-order ≥5× mail fsync", "8",
         "mail", "pg-order", _c, "fsync", _c, ">=", 5.0),
        ("13", f"{_m}: mail pg-api (C API) ≥5× mail fsync", "8",
         "mail", "pg-api", _c, "fsync", _c, ">=", 5.0),
    ]
    for _v in ["pg-api", "pg-order"]:
        ISSUE_TARGETS.append(
            ("13", f"{_m}: replace {_v} ≥0.7× the no-fsync loop (nosync)",
             "all", "replace", _v, _c, "nosync", _c, ">=", 0.7))
    ISSUE_TARGETS += [
        ("13", f"{_m}: replace pg-api ahead of kernel ext2 with fsync "
         "(fsync-api)", "all",
         "replace", "pg-api", _c, "fsync-api", "kernel-ext2", ">", 1.0),
        ("13", f"{_m}: replace pg-order ahead of kernel ext2 with fsync",
         "all", "replace", "pg-order", _c, "fsync", "kernel-ext2", ">", 1.0),
    ]


def disk_key(r):
    return (0 if r.get("disk", "bare") == "bare" else 1, r.get("flush_ms", 0))


def disk_name(d):
    return "bare disk" if d[0] == 0 else f"{d[1]} ms disk"


def label_var(v):
    return f"{v[len(WORK):]} (before its final flush)" if v.startswith(WORK) else v


def issue_targets(recs):
    """ISSUE_TARGETS checked on every record (all disks): one row per
    target and disk where both sides were measured, or one 'not measured'
    row per target that never had both."""
    disks = sorted({disk_key(r) for r in recs})

    def times(d, wl, var, c):
        key = "total_s"
        if var.startswith(WORK):
            key, var = "work_s", var[len(WORK):]
        return {r["run"]: r[key] for r in recs
                if disk_key(r) == d and r["workload"] == wl
                and r["variant"] == var and r["contender"] == c
                and r["status"] == "ok" and r[key] > 0}

    rows = []
    for iss, name, sel, wl, va, ca, vb, cb, op, bound in ISSUE_TARGETS:
        want = [d for d in disks if
                (sel == "bare" and d[0] == 0) or
                (sel == "ge2" and d[0] == 1 and d[1] >= 2) or
                (sel == "8" and d[0] == 1 and d[1] == 8) or sel == "all"]
        got = 0
        for d in want:
            a, b = times(d, wl, va, ca), times(d, wl, vb, cb)
            runs = [i for i in sorted(a) if i in b]
            if not runs:
                continue
            got += 1
            if op == "<=":
                xs = [a[i] / b[i] for i in runs]
            else:
                xs = [b[i] / a[i] for i in runs]
            v = med(xs)
            ok = v <= bound if op == "<=" else \
                v >= bound if op == ">=" else v > bound
            rows.append({"issue": iss, "target": name, "disk": disk_name(d),
                         "a": f"{label_var(va)} on {ca}",
                         "b": f"{label_var(vb)} on {cb}",
                         "op": op, "bound": bound, "measured": v,
                         "min": min(xs), "max": max(xs), "runs": len(xs),
                         "a_median_s": med([a[i] for i in runs]),
                         "b_median_s": med([b[i] for i in runs]),
                         "met": ok})
        if not got:
            rows.append({"issue": iss, "target": name, "disk": {
                "bare": "bare disk", "ge2": "≥2 ms disks", "8": "8 ms disk",
                "all": "every disk"}[sel], "a": f"{label_var(va)} on {ca}",
                "b": f"{label_var(vb)} on {cb}", "op": op, "bound": bound,
                "measured": None, "met": None})
    return rows


def issue_targets_markdown(rows):
    L = []
    w = L.append
    w("## Targets of issues 12 and 13\n")
    w("Each a ratio taken within each run (same machine state, contenders "
      "interleaved), its median over runs, then min–max. Rate ratio = "
      "operations per second of A / of B (time of B / time of A); for the "
      "`≤` rows, time of A / time of B. A is measured against B on the same"
      " disk (emulated flush latency, see below).\n")
    w("| issue | target | disk | A | B | want | measured | min–max | runs "
      "| median s (A / B) | met |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in rows:
        want = f"{t['op']} {t['bound']:g}×"
        if t["measured"] is None:
            w(f"| #{t['issue']} | {t['target']} | {t['disk']} | {t['a']} | "
              f"{t['b']} | {want} | not measured | | | | – |")
            continue
        met = "yes" if t["met"] else "**no**"
        w(f"| #{t['issue']} | {t['target']} | {t['disk']} | {t['a']} | "
          f"{t['b']} | {want} | {t['measured']:.2f}× | {t['min']:.2f}–"
          f"{t['max']:.2f} | {t['runs']} | {fmt_s(t['a_median_s'])} / "
          f"{fmt_s(t['b_median_s'])} | {met} |")
    w("")
    return "\n".join(L) + "\n"


def disk_label(r):
    if r.get("disk", "bare") == "bare":
        return "bare disk"
    return f"{r.get('flush_ms', 0)} ms flush (emulated)"


def disk_report(recs):
    """The fsync-sensitive workloads per disk: medians, flush counts, the
    check that the emulated delay took effect, and the rate ratios of
    DISK_PAIRS.  recs: every record, bare disk and emulated."""
    disks = []
    for r in recs:
        d = (0 if r.get("disk", "bare") == "bare" else 1,
             r.get("flush_ms", 0))
        if d not in disks:
            disks.append(d)
    disks.sort()
    if not any(d[0] for d in disks):
        return None
    wls = ["replace", "mail", "sqlite", "postmark"]

    def label(d):
        return "bare disk" if d[0] == 0 else \
            f"{d[1]} ms flush (emulated)"

    def sel(d, wl, var, c):
        return [r for r in recs if (0 if r.get("disk", "bare") == "bare"
                                    else 1, r.get("flush_ms", 0)) == d
                and r["workload"] == wl and r["variant"] == var
                and r["contender"] == c]

    rows = []
    checks_failed = []
    for wl in wls:
        keys = sorted({(r["variant"], r["contender"]) for r in recs
                       if r["workload"] == wl},
                      key=lambda k: (variant_key(k[0]),
                                     ORDER.index(k[1]) if k[1] in ORDER
                                     else 99))
        for var, c in keys:
            row = {"workload": wl, "variant": var, "contender": c,
                   "disks": {}}
            for d in disks:
                rs = [r for r in sel(d, wl, var, c) if r["status"] == "ok"]
                if not rs:
                    continue
                tot = [r["total_s"] for r in rs]
                cell = {"median_s": med(tot), "runs": len(rs),
                        "ops": rs[0]["ops"]}
                if rs[0]["ops"] and cell["median_s"]:
                    cell["ops_per_s"] = rs[0]["ops"] / cell["median_s"]
                fl = [r["flushes"] for r in rs if "flushes" in r]
                if fl:
                    cell["flushes_median"] = med(fl)
                    if rs[0]["ops"]:
                        cell["flushes_per_op"] = med(fl) / rs[0]["ops"]
                    # The delay took effect: every flush slept flush_ms,
                    # one at a time, so their sum fits in the elapsed time.
                    bad = [r for r in rs if "flushes" in r and
                           r["flushes"] * r["flush_ms"] / 1000.0
                           > r["total_s"] + 1e-6]
                    cell["delay_check"] = "ok" if not bad else "FAILED"
                    if bad:
                        checks_failed.append(f"{wl} {var} {c} {label(d)}")
                row["disks"][label(d)] = cell
            rows.append(row)

    pairs = []
    for wl, va, ca, vb, cb, tgt in DISK_PAIRS:
        p = {"workload": wl, "a": f"{va} on {ca}", "b": f"{vb} on {cb}",
             "target": tgt, "disks": {}}
        for d in disks:
            ta = med([r["total_s"] for r in sel(d, wl, va, ca)
                      if r["status"] == "ok"])
            tb = med([r["total_s"] for r in sel(d, wl, vb, cb)
                      if r["status"] == "ok"])
            if ta and tb:
                p["disks"][label(d)] = tb / ta
        if p["disks"]:
            pairs.append(p)
    # The host disk's own flush, timed by slowflush around its real
    # fdatasync: what the bare disk costs per flush, under this load.
    real = [1000.0 * r["real_flush_s"] / r["flushes"] for r in recs
            if r.get("flushes") and "real_flush_s" in r
            and r["status"] == "ok"]
    return {"disks": [label(d) for d in disks], "rows": rows,
            "pairs": pairs, "delay_checks_failed": checks_failed,
            "host_flush_ms_median": med(real),
            "host_flush_ms_max": max(real) if real else None}


def disk_markdown(dr, params):
    L = []
    w = L.append
    w("## Disks with a slow cache flush (emulated)\n")
    hf = dr.get("host_flush_ms_median")
    w("The bare disk here is a virtual disk on a shared host"
      + (f" (slowflush timed its real fdatasync calls under the emulated "
         f"columns: median {hf:.2f} ms per flush)" if hf is not None else "")
      + "; how fast it flushes depends on the host and its load, not on "
      "what a user's disk would do. Real disks differ: a SATA SSD without power-loss protection "
      "takes about 1 to 5 ms per cache flush, a rotating disk 8 to 15 ms, a "
      "cloud block volume 1 to 2 ms. **The flush latency below is "
      "emulated**, for every contender alike: their images live under "
      "tests/tools/slowflush, a FUSE passthrough of a directory on the same "
      "disk that sleeps the set time before each fsync or fdatasync of a "
      "file (one flush at a time, as on one disk), then does the real one. "
      "fstitch and fuse2fs use the image file; passthrough_ll and the "
      "kernel's ext2 a loop device over it, and the loop driver turns each "
      "block-layer cache flush into an fsync of that file, so the kernel "
      "pays the same delay. The passthrough's page cache stands for the "
      "disk's write cache: writes are cheap, flushes pay. The bare-disk "
      "column has no passthrough at all, so the emulated columns also carry "
      "the passthrough's data-path cost.\n")
    w("Check that the delay took effect: slowflush counts the flushes of "
      "each measurement, and flushes × delay must not exceed its elapsed "
      "time (the column `check`). "
      + ("Every measurement passed." if not dr["delay_checks_failed"] else
         "**Failed for: " + "; ".join(dr["delay_checks_failed"]) + "**")
      + "\n")
    w("### Rate ratios per disk\n")
    w("Rate ratio = operations per second of A / of B, medians over runs "
      "(time of B / time of A), each until durable. Targets: issue 13 and "
      "design.md §7 (10× and 5× on the 8 ms disk; 0.7× and 1× on every "
      "disk).\n")
    w("| workload | A | B | target | " + " | ".join(dr["disks"]) + " |")
    w("|---|---|---|---|" + "---|" * len(dr["disks"]))
    for p in dr["pairs"]:
        t = "–" if p["target"] is None else f"≥ {p['target']:g}×"
        w(f"| {p['workload']} | {p['a']} | {p['b']} | {t} | "
          + " | ".join(fmt_r(p["disks"].get(d)) for d in dr["disks"]) + " |")
    w("")
    w("### Times and flushes per disk\n")
    w("Median seconds until durable; flushes counted by slowflush (median; "
      "per operation in brackets).\n")
    w("| workload | variant | contender | " + " | ".join(dr["disks"])
      + " | check |")
    w("|---|---|---|" + "---|" * len(dr["disks"]) + "---|")
    for r in dr["rows"]:
        cells = []
        checks = set()
        for d in dr["disks"]:
            c = r["disks"].get(d)
            if not c:
                cells.append("–")
                continue
            t = f"{fmt_s(c['median_s'])} s"
            if "flushes_median" in c:
                t += f", {c['flushes_median']:g} fl"
                if "flushes_per_op" in c:
                    t += f" ({c['flushes_per_op']:.1f}/op)"
                checks.add(c["delay_check"])
            cells.append(t)
        chk = "–" if not checks else ("ok" if checks == {"ok"} else
                                      "**FAILED**")
        w(f"| {r['workload']} | {r['variant']} | "
          f"{LABEL.get(r['contender'], r['contender'])} | "
          + " | ".join(cells) + f" | {chk} |")
    w("")
    return "\n".join(L) + "\n"


def what(wl, var):
    if (wl, var) in WHAT:
        return WHAT[(wl, var)]
    if wl == "meta":
        op, n = var.rsplit("-", 1)
        return f"{op} of {n} names in one directory" + (
            " (after a remount)" if op != "create" else "") + \
            ", then the durable unmount"
    return f"{wl} {var}"


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(out):
    info = {}
    info["kernel"] = platform.release()
    info["cores"] = os.cpu_count()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
                break
        info["loadavg_at_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                info["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    src = run(["df", "--output=source,fstype,size", out]).splitlines()
    if len(src) > 1:
        dev, fstype, size = src[1].split()
        info["disk"] = {"device": dev, "host_fs": fstype, "size": size}
        base = os.path.basename(dev)
        lsblk = run(["lsblk", "-dno", "MODEL,ROTA,SIZE,TYPE", dev])
        if lsblk:
            info["disk"]["lsblk"] = " ".join(lsblk.split())
        sched = f"/sys/block/{base}/queue/scheduler"
        if os.path.exists(sched):
            info["disk"]["scheduler"] = open(sched).read().strip()
        if base.startswith("vd"):
            info["disk"]["kind"] = "virtio block device (a virtual machine)"
    pk = {}
    for p in ["fuse3", "libfuse3-3", "fuse2fs", "libfuse2", "e2fsprogs",
              "postmark", "linux-source"]:
        v = run(["dpkg-query", "-W", "-f=${Version}", p])
        if v:
            pk[p] = v
    info["packages"] = pk
    return info


def subset_tar(src, n, dst):
    """Copy the first n members of src to dst; describe dst in dst.info."""
    names = set()
    top = None
    size = 0
    if n > 0:
        tmp = dst + ".part"
        with tarfile.open(src, "r|") as tin, \
                tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tout:
            for k, m in enumerate(tin):
                if k >= n:
                    break
                f = tin.extractfile(m) if m.isreg() else None
                tout.addfile(m, f)
        os.replace(tmp, dst)
    with tarfile.open(dst, "r|") as t:
        for m in t:
            name = m.name.rstrip("/")
            if name.startswith("./"):
                name = name[2:]
            parts = name.split("/")
            if top is None:
                top = parts[0]
            if parts[0] != top:
                raise SystemExit(f"report.py: {dst}: more than one top "
                                 f"directory ({top}, {parts[0]})")
            for i in range(1, len(parts) + 1):
                names.add("/".join(parts[:i]))
            if m.isreg():
                size += m.size
    with open(dst + ".info", "w") as f:
        f.write(f"{top} {len(names)} {size}\n")


def load_jsonl(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_s(x):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_r(x):
    return "–" if x is None else f"{x:.2f}×"


def variant_key(var):
    """Sort meta variants by operation then size, others by name."""
    if "-" in var and var.rsplit("-", 1)[1].isdigit():
        op, n = var.rsplit("-", 1)
        return ({"create": 0, "stat": 1, "unlink": 2}.get(op, 3), int(n), op)
    return (0, 0, var)


def report(out):
    raw = os.path.join(out, "raw")
    recs = load_jsonl(os.path.join(raw, "results.jsonl"))
    skipped = load_jsonl(os.path.join(raw, "skipped.jsonl"))
    try:
        params = json.load(open(os.path.join(raw, "params.json")))
    except (OSError, ValueError):
        params = {}
    try:
        mach = json.load(open(os.path.join(raw, "machine.json")))
    except (OSError, ValueError):
        mach = {}
    if not recs:
        print("report.py: no results in " + raw, file=sys.stderr)
        return 1
    # Everything but the section on slow-flush disks and the issue targets
    # is about the bare disk.
    dr = disk_report(recs)
    itargets = issue_targets(recs)
    finals_by_disk = engine_by_disk(raw)
    recs = [r for r in recs if r.get("disk", "bare") == "bare"]
    if not recs:
        with open(os.path.join(out, "report.json"), "w") as f:
            json.dump({"machine": mach, "params": params, "disks": dr,
                       "issue_targets": itargets,
                       "engine_by_disk": finals_by_disk}, f, indent=1)
        with open(os.path.join(out, "report.md"), "w") as f:
            f.write("# fstitch file-system benchmark\n\n"
                    + issue_targets_markdown(itargets)
                    + engine_by_disk_markdown(finals_by_disk)
                    + disk_markdown(dr, params))
        return 0

    # groups[(wl, var)][contender] = list of records
    groups = {}
    for r in recs:
        groups.setdefault((r["workload"], r["variant"]), {}) \
            .setdefault(r["contender"], []).append(r)
    wl_order = []
    for r in recs:
        if r["workload"] not in wl_order:
            wl_order.append(r["workload"])
    keys = sorted(groups, key=lambda k: (wl_order.index(k[0]),
                                         variant_key(k[1])))
    present = [c for c in ORDER if any(c in g for g in groups.values())]
    present += sorted({c for g in groups.values() for c in g} - set(ORDER))

    summary = []
    for k in keys:
        for c in present:
            rs = groups[k].get(c)
            if not rs:
                continue
            ok = [r for r in rs if r["status"] == "ok"]
            tot = [r["total_s"] for r in ok]
            row = {
                "workload": k[0], "variant": k[1], "contender": c,
                "what": what(*k), "runs": len(rs), "ok_runs": len(ok),
                "median_s": med(tot),
                "min_s": min(tot) if tot else None,
                "max_s": max(tot) if tot else None,
                "median_work_s": med([r["work_s"] for r in ok]),
                "median_flush_s": med([r["flush_s"] for r in ok]),
                "ops": rs[0]["ops"],
                "failures": [f'run {r["run"]}: {r["status"]}'
                             + (f' ({r["note"]})' if r["note"] else "")
                             for r in rs if r["status"] != "ok"],
                "fsck": sorted({r["fsck"] for r in rs if r.get("fsck")}),
            }
            if tot and rs[0]["ops"]:
                rates = [rs[0]["ops"] / t for t in tot if t > 0]
                row["median_ops_per_s"] = med(rates)
            if len(tot) > 1 and row["median_s"]:
                row["spread_pct"] = round(100 * (row["max_s"] - row["min_s"])
                                          / row["median_s"], 1)
            summary.append(row)

    def by_run(wl, var, c):
        return {r["run"]: r["total_s"] for r in groups.get((wl, var), {})
                .get(c, []) if r["status"] == "ok" and r["total_s"] > 0}

    # Ratios pair by pair within the same run: other time / fstitch time,
    # so that > 1 means fstitch finished sooner.
    ratios = []
    for k in keys:
        for f in FSTITCH:
            fr = by_run(k[0], k[1], f)
            if not fr:
                continue
            for o in present:
                if o == f or o in FSTITCH:
                    continue
                orr = by_run(k[0], k[1], o)
                xs = [orr[i] / fr[i] for i in sorted(fr) if i in orr]
                if xs:
                    ratios.append({"workload": k[0], "variant": k[1],
                                   "fstitch": f, "other": o,
                                   "speedup_median": med(xs),
                                   "speedup_min": min(xs),
                                   "speedup_max": max(xs), "runs": len(xs)})

    # Cross-variant comparisons: updates per second of one (variant,
    # contender) over another, run by run.  Same op counts, so a rate ratio
    # is the inverse time ratio.
    cmp_specs = [
        ("replace", "pg-chain", "fstitch-su", "fsync-proc", "fstitch-su"),
        ("replace", "pg-order", "fstitch-su", "fsync", "fstitch-su"),
        ("replace", "pg-api", "fstitch-su", "fsync-api", "fstitch-su"),
        ("replace", "pg-api", "fstitch-su", "fsync-api", "fuse2fs"),
        ("replace", "pg-api", "fstitch-su", "fsync-api", "passthrough_ll"),
        ("replace", "pg-api", "fstitch-su", "fsync-api", "kernel-ext2"),
        ("replace", "pg-chain", "fstitch-su", "fsync-proc", "fuse2fs"),
        ("replace", "pg-chain", "fstitch-su", "fsync-proc", "kernel-ext2"),
        ("replace", "pg-order", "fstitch-su", "fsync", "fuse2fs"),
        ("replace", "pg-order", "fstitch-su", "fsync", "kernel-ext2"),
        ("replace", "fsync", "fstitch-su", "fsync", "kernel-ext2"),
        ("replace", "nosync", "kernel-ext2", "fsync", "kernel-ext2"),
        ("mail", "pg-order", "fstitch-su", "fsync", "fstitch-su"),
        ("mail", "pg-api", "fstitch-su", "fsync", "fstitch-su"),
        ("mail", "pg-order", "fstitch-su", "fsync", "fuse2fs"),
        ("mail", "pg-order", "fstitch-su", "fsync", "kernel-ext2"),
        ("mail", "nosync", "kernel-ext2", "fsync", "kernel-ext2"),
    ]
    comparisons = []
    for wl, va, ca, vb, cb in cmp_specs:
        a = by_run(wl, va, ca)
        b = by_run(wl, vb, cb)
        xs = [b[i] / a[i] for i in sorted(a) if i in b]
        if xs:
            comparisons.append({"workload": wl, "a": f"{va} on {ca}",
                                "b": f"{vb} on {cb}",
                                "rate_ratio_median": med(xs),
                                "rate_ratio_min": min(xs),
                                "rate_ratio_max": max(xs), "runs": len(xs)})

    def ratio(wl, var, o):
        for r in ratios:
            if (r["workload"], r["variant"], r["fstitch"], r["other"]) == \
                    (wl, var, "fstitch-su", o):
                return r
        return None

    def comp(wl, a, b):
        for c in comparisons:
            if (c["workload"], c["a"], c["b"]) == (wl, a, b):
                return c
        return None

    # design.md §7 targets, each checked on the median of per-run ratios.
    targets = []

    def target(name, value, ok, detail):
        targets.append({"target": name,
                        "measured": value, "met": ok, "detail": detail})

    for var in ["extract", "rm"]:
        r = ratio("untar", var, "fuse2fs")
        target(f"untar {var}: fstitch (softupdates) at least 1.5× faster "
               "than fuse2fs", r and r["speedup_median"],
               None if not r else r["speedup_median"] >= 1.5,
               "fuse2fs time / fstitch time")
        r = ratio("untar", var, "passthrough_ll")
        v = r and 1 / r["speedup_median"]
        target(f"untar {var}: fstitch (softupdates) within 1.3× of "
               "passthrough_ll", v, None if not r else v <= 1.3,
               "fstitch time / passthrough_ll time")
    c = comp("replace", "pg-api on fstitch-su", "fsync-api on fstitch-su")
    target("atomic replace (C API): patchgroups at least 10× the updates/s "
           "of the fsync version on the same mount",
           c and c["rate_ratio_median"],
           None if not c else c["rate_ratio_median"] >= 10,
           "both one process, pg_replace")
    c = comp("replace", "pg-chain on fstitch-su", "fsync-proc on fstitch-su")
    target("atomic replace: patchgroup chain at least 10× the updates/s of "
           "the fsync version on the same mount",
           c and c["rate_ratio_median"],
           None if not c else c["rate_ratio_median"] >= 10,
           "both one process per update")
    for o in ["fuse2fs", "kernel-ext2"]:
        c = comp("replace", "pg-api on fstitch-su", f"fsync-api on {o}")
        target(f"atomic replace (C API): patchgroups more updates/s than {o}"
               " with fsync", c and c["rate_ratio_median"],
               None if not c else c["rate_ratio_median"] > 1,
               "both one process, pg_replace")
    for o in ["fuse2fs", "kernel-ext2"]:
        c = comp("replace", "pg-chain on fstitch-su", f"fsync-proc on {o}")
        target(f"atomic replace: patchgroup chain more updates/s than {o} "
               "with fsync", c and c["rate_ratio_median"],
               None if not c else c["rate_ratio_median"] > 1,
               "both one process per update")

    # Engine counters, by measurement name ("untar-extract-fstitch-su-1"):
    # raw/stats from fstitch-stat --json at the end of the workload, before
    # the final flush; raw/final from the daemon's -o statsfile, written
    # after the final flush, so totals there cover the whole workload.
    def load_dir(d):
        got = {}
        d = os.path.join(raw, d)
        if os.path.isdir(d):
            for fn in sorted(os.listdir(d)):
                if not fn.endswith(".json"):
                    continue
                try:
                    got[fn[:-5]] = json.load(open(os.path.join(d, fn)))
                except (OSError, ValueError):
                    got[fn[:-5]] = {"unreadable": True}
        return got
    stats = load_dir("stats")
    final = load_dir("final")
    optim = optimisation_table(final, stats)

    def opt_row(wl, var, ct):
        for r in optim:
            if (r["workload"], r["variant"], r["contender"]) == (wl, var, ct):
                return r
        return None

    # design.md §7: engine memory (patches + undo) at most 4% of the dirty
    # block data on untar and PostMark; rollback double-writes under 2% of
    # block writes.  Medians over runs of the counters after the flush.
    for wl, var in [("untar", "extract"), ("postmark", "default")]:
        r = opt_row(wl, var, "fstitch-su")
        v = r and r.get("mem_pct")
        target(f"{wl} {var}: engine memory (patches + undo) at most 4% of "
               "dirty block data", v, None if v is None else v <= 4,
               "percent, peak engine bytes / peak dirty bytes over the mount,"
               " median over runs (" + (r["source"] if r else "–") + ")")
    for wl, var in OPT_ROWS:
        r = opt_row(wl, var, "fstitch-su")
        v = r and r.get("rollback_pct")
        target(f"{wl} {var}: rollback rewrites under 2% of block writes", v,
               None if v is None else v < 2,
               "percent, rollback writes / block writes, median over runs ("
               + (r["source"] if r else "–") + ")")

    # Library-level directory scaling (tests/bench/e2_dir_bench.c), one
    # file per run: "OP at N entries: X us/op" lines.
    libmeta = {}
    for fn in sorted(os.listdir(raw)):
        if not (fn.startswith("e2dir-") and fn.endswith(".txt")):
            continue
        for line in open(os.path.join(raw, fn)):
            line = line.strip()
            if " entries: " not in line or not line.endswith(" us/op"):
                if line.startswith("fsck: "):
                    libmeta.setdefault("_fsck", []).append(line[6:])
                continue
            head, val = line.rsplit(": ", 1)
            op, n = head.rsplit(" at ", 1)
            try:
                us = float(val.split()[0])
                n = int(n.split()[0])
            except (ValueError, IndexError):
                continue
            libmeta.setdefault(f"{op}|{n}", []).append(us)
    libmeta_rows = [{"op": k.split("|")[0], "entries": int(k.split("|")[1]),
                     "us_per_op_median": med(v), "us_min": min(v),
                     "us_max": max(v), "runs": len(v)}
                    for k, v in libmeta.items() if not k.startswith("_")]
    libmeta_fsck = sorted(set(libmeta.get("_fsck", [])))

    loads = [r["load"] for r in recs if isinstance(r.get("load"), (int, float))]
    noise = {"load_min": min(loads) if loads else None,
             "load_max": max(loads) if loads else None,
             "cores": mach.get("cores")}

    drops = {}
    for r in recs:
        if r.get("cache_drops"):
            k = f'{r["workload"]} {r["variant"]}'
            drops[k] = drops.get(k, 0) + r["cache_drops"]
    noise["passthrough_ll_cache_drops"] = drops

    tag = (f"mode {params.get('mode', '?')}, {params.get('runs', '?')} runs, "
           f"{mach.get('cores', '?')} cores, load {noise['load_min']}-"
           f"{noise['load_max']}, {params.get('started', '?')[:10]}")
    plots = make_plots(out, summary, present, libmeta_rows, tag)

    # The headline table (summary.md, for the README): fstitch with soft
    # updates against each other contender, per-run ratios as above.
    sizes = sorted({int(k[1].rsplit("-", 1)[1]) for k in keys
                    if k[0] == "meta"})
    # (workload, fstitch's variant, the others' variant): the crash-safe
    # patchgroup versions of replace and mail against everyone's fsync one
    head_rows = [("untar", "extract", "extract"), ("untar", "rm", "rm"),
                 ("postmark", "default", "default"),
                 ("replace", "fsync", "fsync"),
                 ("replace", "pg-api", "fsync-api"),
                 ("replace", "pg-chain", "fsync-proc"),
                 ("mail", "fsync", "fsync"), ("mail", "pg-order", "fsync"),
                 ("mail", "pg-api", "fsync")]
    if sizes:
        head_rows += [("meta", f"{op}-{sizes[-1]}", f"{op}-{sizes[-1]}")
                      for op in ["create", "stat", "unlink"]]
    headline = []
    for wl, var, ovar in head_rows:
        fr = by_run(wl, var, "fstitch-su")
        if not fr:
            continue
        row = {"workload": wl, "variant": var, "others_variant": ovar,
               "fstitch_su_s": med(list(fr.values())), "vs": {}}
        for o in ["fstitch-none"] + OTHERS:
            orr = by_run(wl, ovar, o)
            xs = [orr[i] / fr[i] for i in sorted(fr) if i in orr]
            row["vs"][o] = med(xs) if xs else None
            if not xs and any(r["status"] == "timeout" for r in
                              groups.get((wl, ovar), {}).get(o, [])):
                row.setdefault("timeouts", []).append(o)
        headline.append(row)

    result = {"machine": mach, "params": params, "skipped": skipped,
              "summary": summary, "ratios": ratios,
              "comparisons": comparisons, "targets": targets,
              "optimisation": optim, "library_meta": libmeta_rows,
              "library_meta_fsck": libmeta_fsck,
              "engine_stats": stats, "engine_final": final,
              "noise": noise, "plots": plots, "headline": headline,
              "disks": dr, "issue_targets": itargets,
              "engine_by_disk": finals_by_disk,
              "engine_report": os.path.exists(os.path.join(out,
                                                           "engine.md"))}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(result, keys, present))
        f.write("\n" + issue_targets_markdown(itargets))
        f.write(engine_by_disk_markdown(finals_by_disk))
        if dr:
            f.write("\n" + disk_markdown(dr, params))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary_md(result))
    return 0


def summary_md(res):
    """A short table for README.md: when, where, how, and the ratios."""
    m, p, n = res["machine"], res["params"], res["noise"]
    L = []
    w = L.append
    mode = p.get("mode", "?")
    cmd = "make bench" + (f" BENCH_ARGS=--{mode}" if mode != "quick" else "")
    w(f"Run {p.get('started', '?')[:10]} ({p.get('started', '?')} to "
      f"{p.get('finished', '?')}), `{cmd}`, mode `{mode}`, "
      f"{p.get('runs', '?')} runs"
      + (f" ({p['note']})" if p.get("note") else "")
      + f"; machine: {m.get('cores', '?')} cores "
      f"({m.get('cpu', '?')}), {m.get('memory_gib', '?')} GiB, kernel "
      f"{m.get('kernel', '?')}, images on {m.get('disk', {}).get('device', '?')}"
      f" ({m.get('disk', {}).get('host_fs', '?')}); load average "
      f"{n.get('load_min')}–{n.get('load_max')} (shared machine: other "
      "builds and tests ran meanwhile).\n")
    w("Speed-up of fstitch with soft updates = other's time / fstitch's "
      "time, each until durable, median of per-run ratios (> 1: fstitch "
      "faster).\n")
    w("| workload | fstitch (softupdates) | vs fstitch (none) | vs fuse2fs "
      "| vs passthrough_ll | vs kernel ext2 |")
    w("|---|---|---|---|---|---|")
    tmo = res["params"].get("meta_timeout_s")
    for r in res.get("headline", []):
        v = {k: fmt_r(x) for k, x in r["vs"].items()}
        for o in r.get("timeouts", []):
            v[o] = "not finished" + (f" in {tmo} s" if tmo and
                                     r["workload"] == "meta" else "")
        lab = f"{r['workload']} {r['variant']}"
        if r["others_variant"] != r["variant"]:
            lab += f" (others: {r['others_variant']})"
        w(f"| {lab} | {fmt_s(r['fstitch_su_s'])} s"
          f" | {v.get('fstitch-none', '–')} | {v.get('fuse2fs', '–')} | "
          f"{v.get('passthrough_ll', '–')} | {v.get('kernel-ext2', '–')}"
          " |")
    w("")
    t = [x for x in res["targets"] if x["measured"] is not None]
    if t:
        w("| target (design.md §7) | measured | met |")
        w("|---|---|---|")
        for x in t:
            pct = x["detail"].startswith("percent")
            w(f"| {x['target']} | {x['measured']:.2f}"
              f"{'%' if pct else '× (' + x['detail'] + ')'} | "
              f"{'yes' if x['met'] else 'no'} |")
        w("")
    return "\n".join(L)


# The rows of the optimisation table (the paper's figure 9 shape).
OPT_ROWS = [("untar", "extract"), ("untar", "rm"), ("postmark", "default"),
            ("mail", "fsync"), ("mail", "pg-order"), ("mail", "pg-api")]

# Engine counters per disk for the fsync-sensitive measurements: what a
# missed ratio costs in barriers, rounds, commits and rollback rewrites.
DISK_ENGINE_ROWS = [("replace", "fsync"), ("replace", "fsync-api"),
                    ("replace", "fsync-proc"), ("replace", "nosync-proc"),
                    ("replace", "pg-api"),
                    ("replace", "pg-order"), ("replace", "pg-chain"),
                    ("replace", "nosync"), ("mail", "fsync"),
                    ("mail", "pg-order"), ("mail", "pg-api"), ("sqlite", "fsync"),
                    ("sqlite", "pg-order")]


def engine_by_disk(raw):
    """Medians over runs of the counters fstitch wrote after its final
    flush (raw/final for the bare disk, raw/final/disk-Nms for the emulated
    ones), per disk, workload, variant and fstitch contender."""
    base = os.path.join(raw, "final")
    if not os.path.isdir(base):
        return []
    dirs = [("bare disk", base)] + sorted(
        ((f"{int(x[5:-2])} ms disk", os.path.join(base, x))
         for x in os.listdir(base) if x.startswith("disk-")
         and x.endswith("ms") and x[5:-2].isdigit()
         and os.path.isdir(os.path.join(base, x))),
        key=lambda t: int(t[0].split()[0]))
    try:
        ops = {}
        for r in load_jsonl(os.path.join(raw, "results.jsonl")):
            ops[(r["workload"], r["variant"])] = r.get("ops") or 0
    except (OSError, ValueError):
        ops = {}
    rows = []
    for dname, d in dirs:
        files = {}
        for fn in os.listdir(d):
            if fn.endswith(".json"):
                try:
                    files[fn[:-5]] = flatten(json.load(open(
                        os.path.join(d, fn))))
                except (OSError, ValueError):
                    pass
        for wl, var in DISK_ENGINE_ROWS:
            for ct in FSTITCH:
                pre = f"{wl}-{var}-{ct}-"
                got = [v for k, v in files.items() if k.startswith(pre)
                       and k[len(pre):].isdigit()]
                if not got:
                    continue
                n = ops.get((wl, var)) or 0

                def m(key, xs=got):
                    vals = [f[key] for f in xs
                            if isinstance(f.get(key), (int, float))]
                    return med(vals)
                row = {"disk": dname, "workload": wl, "variant": var,
                       "contender": ct, "runs": len(got), "ops": n,
                       "barriers": m("io.barriers"), "rounds": m("io.rounds"),
                       "block_writes": m("io.block_writes"),
                       "rollback_writes": m("io.rollback_writes"),
                       "commits": m("journal.commits")}
                if n and row["barriers"] is not None:
                    row["barriers_per_op"] = row["barriers"] / n
                if row["block_writes"]:
                    row["rollback_pct"] = 100.0 * (row["rollback_writes"]
                                                   or 0) / row["block_writes"]
                rows.append(row)
    return rows


def engine_by_disk_markdown(rows):
    if not rows:
        return ""
    L = []
    w = L.append
    w("## fstitch's barriers, rounds and rollbacks per disk\n")
    w("Counters the daemon wrote after its final flush (-o statsfile), "
      "median over runs, for the whole mount: the setup's files are made on"
      " an earlier mount, so these are the workload and its unmount. "
      "Barriers per op = barriers / operations (updates, messages, rows); "
      "commits: journal transactions committed (journal modes). In the "
      "journal modes the counters are taken after the unmount's last "
      "checkpoint, so they include its writes and barriers.\n")
    w("| disk | workload | variant | contender | barriers | per op | rounds "
      "| commits | block writes | rollback rewrites |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        w(f"| {r['disk']} | {r['workload']} | {r['variant']} | "
          f"{LABEL.get(r['contender'], r['contender'])} | "
          f"{fmt_n(r['barriers'])} | "
          + (f"{r['barriers_per_op']:.2f}" if "barriers_per_op" in r
             else "–")
          + f" | {fmt_n(r['rounds'])} | {fmt_n(r['commits'])} | "
          f"{fmt_n(r['block_writes'])} | {fmt_n(r['rollback_writes'])}"
          + (f" ({r['rollback_pct']:.1f}%)" if "rollback_pct" in r else "")
          + " |")
    w("")
    return "\n".join(L) + "\n"


def optimisation_table(final, stats):
    """Per (workload, variant, fstitch contender): medians over runs of the
    engine's totals.  Prefers the counters written after the final flush
    (-o statsfile); without them, the fstitch-stat snapshot before the
    flush, which misses the flush's own patches and writes."""
    rows = []
    for wl, var in OPT_ROWS:
        for ct in FSTITCH:
            pre = f"{wl}-{var}-{ct}-"
            src, got = "after the final flush (-o statsfile)", \
                [v for k, v in final.items() if k.startswith(pre)]
            if not got:
                src, got = "before the final flush (fstitch-stat)", \
                    [v for k, v in stats.items() if k.startswith(pre)]
            if not got:
                continue
            befores = [flatten(v) for k, v in stats.items()
                       if k.startswith(pre)]
            fl = [flatten(g) for g in got]

            def m(fn, xs=fl):
                vals = []
                for f in xs:
                    try:
                        v = fn(f)
                    except (KeyError, ZeroDivisionError, TypeError):
                        continue
                    if v is not None:
                        vals.append(v)
                return med(vals)
            row = {
                "workload": wl, "variant": var, "contender": ct,
                "runs": len(fl), "source": src,
                "changes": m(lambda f: f["patches.created"]
                             + f["patches.merged"]),
                "patches": m(lambda f: f["patches.created"]),
                "merged_pct": m(lambda f: 100 * f["patches.merged"]
                                / (f["patches.created"]
                                   + f["patches.merged"])),
                # cumulative counts, when the engine has them
                "hard_total": m(lambda f: f.get("patches.hard_created")),
                "undo_total": m(lambda f: f.get("memory.undo_bytes_total")),
                # live levels at the end of the workload, before the flush
                "hard_live_end": m(lambda f: f["patches.hard"], befores),
                "undo_live_end": m(lambda f: f["memory.undo_bytes"],
                                   befores),
                "peak_engine": m(lambda f: f["memory.peak_engine_bytes"]),
                "peak_dirty": m(lambda f: f["memory.peak_dirty_bytes"]),
                "mem_pct": m(lambda f: 100 * f["memory.peak_engine_bytes"]
                             / f["memory.peak_dirty_bytes"]),
                "block_writes": m(lambda f: f["io.block_writes"]),
                "rollback_writes": m(lambda f: f["io.rollback_writes"]),
                "rollback_pct": m(lambda f: 100 * f["io.rollback_writes"]
                                  / f["io.block_writes"]),
                "rounds": m(lambda f: f["io.rounds"]),
            }
            rows.append(row)
    return rows


def fmt_n(x):
    if x is None:
        return "–"
    if x >= 1e9:
        return f"{x / 1e9:.2f} G"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e4:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def fmt_pct(x):
    return "–" if x is None else f"{x:.2f}%"


def markdown(res, keys, present):
    m = res["machine"]
    p = res["params"]
    L = []
    w = L.append
    w("# fstitch file-system benchmark\n")
    w("Produced by `make bench` (tests/bench/fs_bench.sh, "
      f"mode `{p.get('mode', '?')}`, {p.get('runs', '?')} runs"
      + (f" ({p['note']})" if p.get("note") else "") + ", started "
      f"{p.get('started', '?')}, finished {p.get('finished', '?')}).\n")
    w("## Machine\n")
    disk = m.get("disk", {})
    w(f"- {m.get('cores', '?')} cores ({m.get('cpu', '?')}), "
      f"{m.get('memory_gib', '?')} GiB memory, kernel {m.get('kernel', '?')}"
      f", {m.get('os', '')}")
    w(f"- disk: {disk.get('device', '?')} ({disk.get('kind', '')}"
      f"{', ' + disk['lsblk'] if disk.get('lsblk') else ''}), images on its "
      f"{disk.get('host_fs', '?')} file system (not tmpfs)")
    w("- packages: " + ", ".join(f"{k} {v}" for k, v in
                                 m.get("packages", {}).items()))
    n = res["noise"]
    w(f"- load average (1 min) seen during the runs: {n['load_min']} to "
      f"{n['load_max']} on {n['cores']} cores. The machine was shared with "
      "other builds and tests, so times carry that noise; the spread column "
      "shows it per measurement and ratios are taken run by run, contenders "
      "interleaved (their order rotates each run).\n")

    w("## Method\n")
    w("- Every measurement makes a fresh stock ext2 image "
      f"(`{p.get('mkfs', 'mke2fs')}`, {p.get('image_size', '4G')} for untar, "
      "PostMark and directories of over 50k names, 1G otherwise) in a file on the disk above, mounts it, "
      "runs the workload and stops the clock only when the work is durable: "
      "after the unmount, the exit of the FUSE daemon (which flushes on exit)"
      " and an fsync of the image file. `work` and `flush` columns split the"
      " two.")
    w("- Contenders: " + "; ".join([
        "fstitch-mount with `-o consistency=softupdates` and `none`",
        "fuse2fs (e2fsprogs, libfuse2) with its defaults",
        "libfuse's example passthrough_ll (built from libfuse3-dev's "
        "examples at bench time) over the kernel's ext2 on a loop-mounted "
        "image of the same size: the floor for any FUSE file system",
        "the kernel's ext2 (ext4's driver in ext2 mode) on a loop mount",
        "on an ext3 image (`mke2fs -t ext3`, a JBD2 journal) instead: "
        "fstitch-mount with `-o consistency=journal` and `journal-data`, "
        "the kernel's ext3 (ext4's driver) with `data=ordered` and "
        "`data=journal` on a loop mount, and fuse2fs, which mounts the image"
        " but never writes its journal"]))
    w(f"- untar: `{p.get('untar_tar', '?')}`, {p.get('untar_entries', '?')} "
      f"entries, {p.get('untar_bytes', 0) / 1e6:.0f} MB of file data, read "
      "from the page cache; the extracted tree is counted and its bytes "
      "summed on a fresh mount before the rm, and `e2fsck -fn` checks every "
      "image afterwards.")
    pm = p.get("postmark", {})
    w(f"- PostMark: {pm.get('files', '?')} files of {pm.get('min', '?')} B "
      f"to {pm.get('max', '?')} B, {pm.get('transactions', '?')} "
      f"transactions, {pm.get('io', '?')} B reads and writes, seed 42.")
    w(f"- atomic replace: {p.get('replace_n', '?')} updates cycling over 16 "
      f"files of 1 KiB; mail: {p.get('mail_n', '?')} messages of 1 to 8 KiB "
      "moved between two mbox files, then an expunge; metadata: "
      f"{p.get('meta_sizes', '?')} names in one directory (create; stat and "
      "unlink each after a remount), each phase stopped after "
      f"{p.get('meta_timeout_s', '?')} s; a contender whose create of over "
      "50k names took over 60 s or did not finish is measured at that size "
      "in its first run only (fuse2fs scans directories linearly: minutes "
      "per phase). The ext2 module alone: "
      f"{p.get('e2dir_n', '?')} names through lib/e2.h once per run.")
    if p.get("nofile"):
        drops = res["noise"].get("passthrough_ll_cache_drops") or {}
        dtxt = ", ".join(f"{k}: {v}" for k, v in drops.items()) or "none"
        w(f"- Open-file limit {p['nofile']} per process (the machine's hard "
          "limit when lower than 1M, not raisable here): passthrough_ll "
          "keeps one descriptor per inode the kernel remembers and would "
          "fail with EMFILE on bigger trees and directories. So while it "
          "runs, a watcher counts its descriptors every 0.2 s and, past half"
          " the limit, writes 2 to /proc/sys/vm/drop_caches, so that the "
          "kernel forgets unused inodes and passthrough_ll closes their "
          "descriptors. **This handicaps passthrough_ll** (lookups after a "
          "drop miss the kernel's dentry and inode caches, its own and the "
          "backing ext2's) and no other contender; read its ratios as an "
          "upper bound of the floor's time. Drops taken, summed over runs: "
          f"{dtxt}.")
    w("- Ratios are computed within each run (same machine state) and "
      "summarised by their median and min–max over runs.\n")

    if res["skipped"]:
        w("## Contenders skipped\n")
        for s in res["skipped"]:
            w(f"- {LABEL.get(s['contender'], s['contender'])}: {s['reason']}")
        w("")

    w("## Targets (design.md §7)\n")
    w("| target | measured | met |")
    w("|---|---|---|")
    for t in res["targets"]:
        unit = "%" if t["detail"].startswith("percent") else "×"
        v = "not measured" if t["measured"] is None else \
            f"{t['measured']:.2f}{unit} ({t['detail']})"
        met = {None: "–", True: "yes", False: "**no**"}[t["met"]]
        w(f"| {t['target']} | {v} | {met} |")
    w("")

    if res["ratios"]:
        w("## fstitch against the others, run by run\n")
        w("Speed-up = other's time / fstitch's time for the same workload in "
          "the same run (> 1: fstitch finished sooner). Median, then min–max "
          "over runs.\n")
        w("| workload | fstitch | vs | speed-up | min–max | runs |")
        w("|---|---|---|---|---|---|")
        for r in res["ratios"]:
            w(f"| {r['workload']} {r['variant']} | {LABEL[r['fstitch']]} | "
              f"{LABEL.get(r['other'], r['other'])} | "
              f"{fmt_r(r['speedup_median'])} | {fmt_r(r['speedup_min'])}–"
              f"{fmt_r(r['speedup_max'])} | {r['runs']} |")
        w("")

    if res["comparisons"]:
        w("## Ordering without fsync: rates compared run by run\n")
        w("Rate ratio = operations per second of A / of B (durable at the "
          "end in both).\n")
        w("| workload | A | B | rate ratio | min–max | runs |")
        w("|---|---|---|---|---|---|")
        for c in res["comparisons"]:
            w(f"| {c['workload']} | {c['a']} | {c['b']} | "
              f"{fmt_r(c['rate_ratio_median'])} | {fmt_r(c['rate_ratio_min'])}"
              f"–{fmt_r(c['rate_ratio_max'])} | {c['runs']} |")
        w("")

    opt = res.get("optimisation") or []
    if opt:
        w("## Engine optimisations (the paper's figure 9 shape)\n")
        src = sorted({r["source"] for r in opt})
        w("Engine counters of fstitch per workload, median over runs, read "
          + " and ".join(src) + ". *changes* = every change the ext2 "
          "module asked for (patches created + changes merged into an "
          "existing patch); *patches* = patches after merging; *hard* and "
          "*undo* = hard patches created and undo bytes kept over the whole"
          " workload when the engine counts them, else (marked *live*) the "
          "levels still held at the end of the workload, before the flush; "
          "*memory* = peak engine bytes (patch structures, undo data, "
          "dependency edges) / peak dirty block bytes over the mount (the "
          "paper's original reached 4–18%; the goal here is 4%); *rollback*"
          " = blocks written rolled back (a second write of the same block "
          "later) / all block writes (goal < 2%).\n")
        w("| workload | contender | changes | patches | merged | hard | "
          "undo B | peak engine B | peak dirty B | memory | block writes | "
          "rollback | runs |")
        w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in opt:
            hard = fmt_n(r["hard_total"]) if r["hard_total"] is not None \
                else (fmt_n(r["hard_live_end"]) + " live"
                      if r["hard_live_end"] is not None else "–")
            undo = fmt_n(r["undo_total"]) if r["undo_total"] is not None \
                else (fmt_n(r["undo_live_end"]) + " live"
                      if r["undo_live_end"] is not None else "–")
            w(f"| {r['workload']} {r['variant']} | "
              f"{LABEL.get(r['contender'], r['contender'])} | "
              f"{fmt_n(r['changes'])} | {fmt_n(r['patches'])} | "
              f"{fmt_pct(r['merged_pct'])} | {hard} | {undo} | "
              f"{fmt_n(r['peak_engine'])} | {fmt_n(r['peak_dirty'])} | "
              f"{fmt_pct(r['mem_pct'])} | {fmt_n(r['block_writes'])} | "
              f"{fmt_pct(r['rollback_pct'])} | {r['runs']} |")
        w("")

    meta_rows = [s_ for s_ in res["summary"]
                 if s_["workload"] == "meta" and s_["median_s"]]
    if meta_rows or res.get("library_meta"):
        w("## Metadata scaling: one directory\n")
    if meta_rows:
        w("Mounted: microseconds per operation (median total time until "
          "durable / names) for create, stat after a remount, and unlink of"
          " all names of one directory. Flat along a row means O(1) per "
          "operation.\n")
        sizes = sorted({int(r["variant"].rsplit("-", 1)[1])
                        for r in meta_rows})
        w("| operation | contender | " + " | ".join(
            f"{n} names" for n in sizes) + " |")
        w("|---|---|" + "---|" * len(sizes))
        for op in ["create", "stat", "unlink"]:
            for c in present:
                cells = []
                for n in sizes:
                    r = next((x for x in meta_rows if x["contender"] == c
                              and x["variant"] == f"{op}-{n}"), None)
                    if r:
                        cells.append(f"{1e6 * r['median_s'] / r['ops']:.1f}")
                        continue
                    r = next((x for x in res["summary"]
                              if x["contender"] == c and x["workload"] ==
                              "meta" and x["variant"] == f"{op}-{n}"), None)
                    cells.append("not finished" if r and any(
                        "timeout" in f for f in r["failures"]) else "–")
                if any(x != "–" for x in cells):
                    w(f"| {op} | {LABEL.get(c, c)} | " + " | ".join(cells)
                      + " |")
        w("")
    if res.get("library_meta"):
        w("Library level, no FUSE and no I/O in the timed part "
          "(tests/bench/e2_dir_bench.c through lib/e2.h, flusher off, "
          "fresh 4 KiB-block image): mean microseconds per operation, "
          "median over runs. *create* is the mean of the last 1000 creates "
          "before the given size; *lookup* of every name; *create into "
          "holes* refills 1000 freed slots spread over the directory; "
          "*churn* is unlink of a scattered name plus a create. e2fsck -fn "
          "of the image after the final flush: "
          + (", ".join(res.get("library_meta_fsck") or []) or "not run")
          + ".\n")
        w("| operation | entries | µs/op | min–max | runs |")
        w("|---|---|---|---|---|")
        for r in sorted(res["library_meta"],
                        key=lambda x: (x["op"] != "create", x["op"],
                                       x["entries"])):
            w(f"| {r['op']} | {r['entries']} | {r['us_per_op_median']:.2f} |"
              f" {r['us_min']:.2f}–{r['us_max']:.2f} | {r['runs']} |")
        w("")

    w("## All measurements\n")
    w("Times in seconds, until durable: median total (work + flush), min–max"
      " of the total, spread = (max − min) / median.\n")
    last = None
    for s in res["summary"]:
        k = (s["workload"], s["variant"])
        if k != last:
            if last is not None:
                w("")
            w(f"### {s['workload']} / {s['variant']}\n")
            w(f"{s['what']}; {s['ops']} operations.\n")
            w("| contender | total | min–max | work | flush | ops/s | spread "
              "| ok runs | fsck | notes |")
            w("|---|---|---|---|---|---|---|---|---|---|")
            last = k
        rate = s.get("median_ops_per_s")
        w(f"| {LABEL.get(s['contender'], s['contender'])} | "
          f"{fmt_s(s['median_s'])} | {fmt_s(s['min_s'])}–{fmt_s(s['max_s'])}"
          f" | {fmt_s(s['median_work_s'])} | {fmt_s(s['median_flush_s'])} | "
          f"{'–' if rate is None else f'{rate:.0f}'} | "
          f"{s.get('spread_pct', '–')}{'%' if 'spread_pct' in s else ''} | "
          f"{s['ok_runs']}/{s['runs']} | {', '.join(s['fsck']) or '–'} | "
          f"{'; '.join(s['failures']) or ''} |")
    w("")

    if res.get("engine_report"):
        w("## Engine scaling\n")
        w("The patch engine and cache alone (no file system, a null "
          "device), 10k to 1M patches: [engine.md](engine.md), from "
          "tests/bench/engine_bench.c in the same `make bench`.\n")

    if res["plots"]:
        w("## Plots\n")
        for pl in res["plots"]:
            w(f"- [{pl['file']}]({pl['file']}): {pl['caption']}")
        w("")

    w("## Engine counters (fstitch runs)\n")
    if res.get("engine_final"):
        w("After the final flush (`-o statsfile`, written by the daemon as "
          "it exits): raw JSON in report.json (`engine_final`) and "
          "raw/final/.\n")
        cols = [("patches.created", "patches"),
                ("patches.merged", "merged"),
                ("patches.committed", "committed"),
                ("memory.peak_engine_bytes", "peak engine B"),
                ("memory.peak_dirty_bytes", "peak dirty B"),
                ("io.rounds", "rounds"),
                ("io.block_writes", "block writes"),
                ("io.rollback_writes", "rollback writes"),
                ("io.write_errors", "write errors")]
        w("| measurement | " + " | ".join(c[1] for c in cols) + " |")
        w("|---" * (len(cols) + 1) + "|")
        for name, st in res["engine_final"].items():
            flat = flatten(st)
            w(f"| {name} | " + " | ".join(str(flat.get(k, "–"))
                                          for k, _ in cols) + " |")
        w("")
    if res["engine_stats"]:
        w("Taken with `fstitch-stat --json` after each fstitch workload, "
          "before its flush; the raw JSON is in report.json "
          "(`engine_stats`) and raw/stats/.\n")
        cols = [("blocks.dirty", "dirty blocks"),
                ("patches.pending", "patches"),
                ("patches.merged", "merged"),
                ("memory.undo_bytes", "undo B"),
                ("memory.engine_bytes", "engine B"),
                ("memory.dirty_bytes", "dirty B"),
                ("peak_ratio", "peak engine/dirty"),
                ("io.block_writes", "block writes"),
                ("io.rollback_writes", "rollback writes")]
        w("| measurement | " + " | ".join(c[1] for c in cols) + " |")
        w("|---" * (len(cols) + 1) + "|")
        for name, st in res["engine_stats"].items():
            flat = flatten(st)
            pd = flat.get("memory.peak_dirty_bytes")
            if pd:
                flat["peak_ratio"] = "%.2f%%" % (
                    100 * flat.get("memory.peak_engine_bytes", 0) / pd)
            w(f"| {name} | " + " | ".join(str(flat.get(k, "–"))
                                          for k, _ in cols) + " |")
    else:
        w("None collected: the build has no fstitch-stat, or no fstitch "
          "contender ran. The hook is fstitch_stats() in fs_bench.sh.")
    w("")
    return "\n".join(L)


def flatten(d, pre=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{pre}{k}."))
    elif isinstance(d, (int, float)) and not isinstance(d, bool):
        out[pre[:-1]] = d
    return out


def make_plots(out, summary, present, libmeta=(), tag=""):
    """SVG plots with gnuplot, when it is installed.  tag (mode, runs,
    machine) goes under every title, so a plot read alone says what it
    is."""
    if not shutil.which("gnuplot"):
        return []
    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    plots = []

    def gp(name, script, data, caption):
        dat = os.path.join(pdir, name + ".dat")
        with open(dat, "w") as f:
            f.write(data)
        svg = os.path.join(pdir, name + ".svg")
        scr = (f"set terminal svg size 900,500 dynamic font 'sans,11'\n"
               f"set output '{svg}'\n" + script.replace("@DAT@", dat))
        r = subprocess.run(["gnuplot"], input=scr, text=True,
                           capture_output=True)
        if r.returncode == 0:
            plots.append({"file": f"plots/{name}.svg", "caption": caption})
        else:
            print(f"report.py: gnuplot failed for {name}: {r.stderr.strip()}",
                  file=sys.stderr)

    # One bar chart of median total time per contender, for each group of
    # variants that share a scale.
    def bars(name, rows, title, caption):
        if not rows:
            return
        conts = [c for c in present if any(r["contender"] == c and
                                           r["median_s"] is not None
                                           for r in rows)]
        if not conts:
            return
        vars_ = []
        for r in rows:
            v = f'{r["workload"]} {r["variant"]}'
            if v not in vars_:
                vars_.append(v)
        lines = []
        for v in vars_:
            cells = [f'"{v}"']
            for c in conts:
                r = next((x for x in rows if f'{x["workload"]} {x["variant"]}'
                          == v and x["contender"] == c), None)
                if r and r["median_s"] is not None:
                    cells += [f'{r["median_s"]:.6f}', f'{r["min_s"]:.6f}',
                              f'{r["max_s"]:.6f}']
                else:
                    cells += ["NaN", "NaN", "NaN"]
            lines.append(" ".join(cells))
        cols = " , ".join(
            f"'@DAT@' using {2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i}:xtic(1) "
            f"title '{LABEL.get(c, c)}'" for i, c in enumerate(conts))
        script = (f"set title \"{title}\\n{{/*0.8 {tag}}}\"\n"
                  "set ylabel 'seconds until durable "
                  "(median; bars: min-max)'\nset style data histograms\n"
                  "set style histogram errorbars gap 2 lw 1\n"
                  "set style fill solid 0.6 border -1\nset yrange [0:*]\n"
                  "set key top left\nset grid ytics\nset xtics noenhanced\n"
                  "set key noenhanced\n"
                  f"plot {cols}\n")
        gp(name, script, "\n".join(lines) + "\n", caption)

    sel = lambda wl: [r for r in summary if r["workload"] == wl]
    bars("untar", sel("untar"), "linux-source: tar -xf and rm -rf",
         "untar: median seconds (workload + durable unmount) of tar -xf and "
         "rm -rf per contender, min-max bars")
    bars("postmark", sel("postmark"), "PostMark",
         "PostMark: median seconds until durable, min-max bars")
    bars("replace", sel("replace"), "Atomic replace",
         "atomic replace: median seconds for all updates until durable, per "
         "variant and contender, min-max bars")
    bars("mail", sel("mail"), "Mail: move messages, then expunge",
         "mail move: median seconds until durable, min-max bars")

    # Metadata scaling: microseconds per operation against directory size,
    # one plot per operation, one line per contender, and the ext2 module
    # alone (e2_dir_bench, no FUSE and no I/O) dashed where it measured the
    # same operation.
    meta = [r for r in summary if r["workload"] == "meta" and r["median_s"]]
    libop = {"create": "create", "stat": "lookup"}
    for op in ["create", "stat", "unlink"]:
        series = []
        data = []
        idx = 0
        for i, c in enumerate(present):
            pts = sorted((int(r["variant"].rsplit("-", 1)[1]),
                          1e6 * r["median_s"] / r["ops"])
                         for r in meta if r["contender"] == c and
                         r["variant"].startswith(op + "-"))
            if not pts:
                continue
            data.append("\n".join(f"{n} {us:.3f}" for n, us in pts))
            series.append(f"'@DAT@' index {idx} using 1:2 with linespoints "
                          f"lw 2 lc {i + 1} pt {i + 4} title "
                          f"'{LABEL.get(c, c)}'")
            idx += 1
        pts = sorted((r["entries"], r["us_per_op_median"]) for r in libmeta
                     if r["op"] == libop.get(op))
        if pts:
            data.append("\n".join(f"{n} {us:.3f}" for n, us in pts))
            series.append(f"'@DAT@' index {idx} using 1:2 with linespoints "
                          "dt 2 lc rgb 'black' pt 1 title 'ext2 module alone "
                          f"({libop[op]}, e2_dir_bench)'")
        if not series:
            continue
        what_ = {"create": "create", "stat": "stat after a remount",
                 "unlink": "unlink"}[op]
        script = (f"set title \"One directory: {what_}, time per name "
                  f"against the directory's size\\n{{/*0.8 {tag}}}\"\n"
                  "set xlabel 'names in the directory'\nset ylabel "
                  "'microseconds per name (incl. durable unmount)'\n"
                  "set logscale xy\nset key top right noenhanced\n"
                  "set grid\nset xrange [500:200000]\n"
                  "plot " + ", ".join(series) + "\n")
        gp(f"meta-{op}", script, "\n\n\n".join(data) + "\n",
           f"metadata scaling, {what_}: microseconds per name through each "
           "mounted contender (whole phase until durable / names), against "
           "the number of names in one directory, log-log"
           + (f"; dashed: {libop[op]} in the ext2 module alone "
              "(e2_dir_bench, no FUSE, no I/O)" if pts else "")
           + "; flat lines mean O(1) per operation")
    return plots


def main(argv):
    if len(argv) == 3 and argv[1] == "--machine":
        json.dump(machine(argv[2]), sys.stdout, indent=1)
        print()
        return 0
    if len(argv) == 5 and argv[1] == "--subset-tar":
        try:
            n = int(argv[3])
        except ValueError:
            print(__doc__, file=sys.stderr)
            return 64
        subset_tar(argv[2], n, argv[4])
        return 0
    if len(argv) == 2 and not argv[1].startswith("-"):
        return report(argv[1])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
