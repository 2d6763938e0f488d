#!/usr/bin/python3
"""Allocator comparison runner: hakmem vs glibc, mimalloc, jemalloc, tcmalloc and any peers.

Runs the workload binaries in build/bench/ (built by `make`; this script builds
nothing) under each allocator, interleaved: for each repetition, for each
workload, every allocator runs once in turn (A B C D E A B C D E ...).
Afterwards one extra, untimed run per workload and allocator under
`strace -f -c` counts mmap/munmap/madvise/mremap (and brk).

Every timed run also records the child's resource usage (os.wait4): minor
and major page faults, user and system CPU time; the table reports minor
faults per operation.

--peers "NAME=/path/lib.so ..." (make bench PEERS=...) adds any preloadable
allocator to the comparison: it runs wherever the Debian peers run, appears in
every table, the CSV and the chart, and counts as a peer for the verdicts (the
faster peer of a workload is the fastest of all the peers run).  Its proof is
that malloc comes from that very file (bench/stats.py check_peer_proof).

Every run must prove which allocator served it (see bench/stats.py
check_proof); a failed proof aborts the whole comparison (exit 3).  A missing
peer library (or PEERS entry) aborts before anything runs (exit 2).  A crashed or timed-out run
is reported and the comparison continues, but the exit status is 1.

Verdicts (hakmem against the faster peer): the sign test's interval of the
median paired ratio from 7 repetitions; with 3 to 6 (QUICK's 3) the t interval
of their geometric mean (bench/stats.py geomean_ci); with fewer, none, said in
one line.

Each allocator's version (allocator_versions: dpkg-query for glibc and the
Debian peers, the source tree for hakmem, NAME@VERSION or the file name for a
PEERS entry) is in the table, both CSVs and the chart's legend.

Outputs (in --out-dir, default build/bench/results/, outside git): a compact
table on stdout (at most 100 columns), latest.csv (summary), latest_runs.csv
(every run), latest.md (the full table + verdicts + machine), latest.png (two
panels: throughput ratio and peak RSS, error bars from the repetitions).  `--snapshot` (make bench-snapshot) copies the
latest results into results/, the committed snapshot, and runs nothing.
See docs/benchmarks.md.
"""

import argparse
import csv
import datetime
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
# make bench writes here (ignored by git, so a run leaves the tree clean) ...
DEFAULT_OUT_DIR = os.path.join(ROOT, "build", "bench", "results")
# ... and `make bench-snapshot` copies these files from there to the committed
# snapshot (docs/benchmarks.md quotes it)
SNAPSHOT_DIR = os.path.join(ROOT, "results")
SNAPSHOT_FILES = ("latest.md", "latest.csv", "latest_runs.csv")

# name -> (library candidates, Debian package); glibc = no preload
ALLOCATORS = [
    ("hakmem", None, None),
    ("glibc", None, None),
    ("mimalloc", ["libmimalloc.so.2", "libmimalloc.so.2.0"], "libmimalloc2.0"),
    ("jemalloc", ["libjemalloc.so.2"], "libjemalloc2"),
    ("tcmalloc", ["libtcmalloc_minimal.so.4"], "libtcmalloc-minimal4"),
]
BASELINE = "mimalloc"
# "candidate": a second hakmem build (--candidate-lib), proven as hakmem, for
# A/B comparisons of two builds in one interleaved run; never in the default set
CANDIDATE = "candidate"


def _w(name, binary, smoke, quick, full, strace_args=None, only=None, env=None):
    """only: the allocators the workload runs under (default every one; the
    candidate runs wherever hakmem does); env: environment variables every run
    of the workload gets (timed and strace runs, every allocator); binary: a
    name in --bin-dir, or an absolute path (an interpreter)"""
    return {"name": name, "bin": binary,
            "args": {"smoke": smoke, "quick": quick, "full": full},
            "strace_args": strace_args, "only": only, "env": env or {}}


def _runs_under(w, alloc):
    return not w["only"] or alloc in w["only"] or (alloc == CANDIDATE and "hakmem" in w["only"])


def _no_sleep(args):
    return args[:2] + ["0"]  # fragmentation: skip the 1 s sleep in the strace run


# Arguments per profile (smoke: tests only; quick: runs of ~0.1-0.5 s;
# full: runs of ~0.5-2 s on a 2-core box).
WORKLOADS = [
    _w("random_mixed", "random_mixed", ["20000", "400", "1", "mixed"],
       ["5000000", "400", "1", "mixed"], ["20000000", "400", "1", "mixed"]),
    _w("random_256", "random_mixed", ["20000", "400", "1", "256"],
       ["5000000", "400", "1", "256"], ["20000000", "400", "1", "256"]),
    _w("random_large", "random_mixed", ["5000", "400", "1", "large"],
       ["1000000", "400", "1", "large"], ["4000000", "400", "1", "large"]),
]
# multi-threaded workloads at 2 threads (= cores here) and 8 (oversubscribed)
WORKLOADS += [_w("larson_t" + t, "larson", [t, "2", "500", "100"],
                 [t, "40", "25000", "1000"], [t, "100", "50000", "1000"]) for t in ("2", "8")]
WORKLOADS += [_w("prodcons_t" + t, "prodcons", [t, "5000"], [t, "1000000"], [t, "4000000"])
              for t in ("2", "8")]
WORKLOADS += [_w("thread_churn_t" + t, "thread_churn", [t, "40", "20"], [t, "4000", "100"],
                 [t, "6000", "100"]) for t in ("2", "8")]
WORKLOADS += [_w("false_sharing_t" + t, "false_sharing", [t, "16", "100"],
                 [t, "64", "100000"], [t, "64", "300000"]) for t in ("2", "8")]
WORKLOADS += [
    _w("realloc_growth", "realloc_growth", ["5000"], ["2000000"], ["5000000"]),
    _w("large_blocks", "large_blocks", ["10", "4", "1", "65536", "4194304"], ["200"], ["600"]),
    # issue 12: large blocks with ~256 MiB live, and thread pairs with mixed sizes
    _w("large_heap", "large_heap", ["10", "16", "1", "65536", "4194304"], ["200", "256"],
       ["600", "256"]),
    _w("churn_mixed", "churn_mixed", ["2", "3", "50"], ["2", "100", "1000"],
       ["2", "250", "1000"]),
    _w("fragmentation", "fragmentation", ["4", "1", "10"], ["64", "1", "1000"],
       ["256", "1", "1000"], strace_args=_no_sleep),
    # issue 14: per-request trees of 16 B..4 KiB blocks; freed one by one
    # (every allocator), or all at once with the heap API: hakmem_heap_destroy
    # against mimalloc's mi_heap_destroy (the only two with one)
    _w("request_arena", "request_arena", ["200", "300", "free"], ["20000", "300", "free"],
       ["60000", "300", "free"]),
    _w("request_arena_destroy", "request_arena", ["200", "300", "destroy"],
       ["20000", "300", "destroy"], ["60000", "300", "destroy"], only=("hakmem", "mimalloc")),
]
# issue 25: larson.cpp as the Hoard and mimalloc-bench suites run it ("larson 5
# 8 1000 5000 100 4141 2": sizes 8..999, 5,000 blocks per thread, thread
# generations of 100 * 5,000 replacements, 2 threads), time-bound as it is
# but for 1 s instead of 5 (MILLIS; ROUNDS is ignored); see bench/larson.c
WORKLOADS += [_w("larson_orig_t2", "larson",
                 ["2", "1", "5000", "500", "4141", "8", "1000", "cpp", "50"],
                 ["2", "1", "500000", "5000", "4141", "8", "1000", "cpp", "300"],
                 ["2", "1", "500000", "5000", "4141", "8", "1000", "cpp", "1000"])]
# issue 25: CPython (Debian's python3) under allocation stress; PYTHONMALLOC=
# malloc hands every object to the allocator under test (bench/interp_py.py);
# PYTHONHASHSEED=0: the same dict layouts, so the same requests, every run
INTERP_PY = os.path.join(ROOT, "bench", "interp_py.py")
WORKLOADS += [_w("interp_py", "/usr/bin/python3", [INTERP_PY, "2000", "200"],
                 [INTERP_PY, "50000"], [INTERP_PY, "200000"],
                 env={"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"})]


class Run:
    def __init__(self, workload, alloc, rep, fields=None, error=None, usage=None):
        self.workload, self.alloc, self.rep = workload, alloc, rep
        self.fields, self.error = fields, error
        self.usage = usage  # stats.rusage_fields() of the child, or None


def find_library(names, package):
    for n in names:
        p = os.path.join(LIBDIR, n)
        if os.path.exists(p):
            return p
    try:  # fall back to the package's own file list
        out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if os.path.basename(line) in names and os.path.exists(line):
                return line
    except OSError:
        pass
    return None


def resolve_allocators(selected, hakmem_lib, candidate_lib=None):
    """Return [(name, preload path or None)]; exit 2 naming anything missing."""
    chosen, missing = [], []
    for name, libs, pkg in ALLOCATORS + [(CANDIDATE, None, None)]:
        if name not in selected:
            continue
        if name == "glibc":
            chosen.append((name, None))
        elif name == "hakmem":
            if not os.path.exists(hakmem_lib):
                missing.append("hakmem: %s not found (run `make release` first)" % hakmem_lib)
            chosen.append((name, os.path.abspath(hakmem_lib)))
        elif name == CANDIDATE:
            if not candidate_lib or not os.path.exists(candidate_lib):
                missing.append("candidate: --candidate-lib %s not found" % candidate_lib)
            else:
                chosen.append((name, os.path.abspath(candidate_lib)))
        else:
            path = find_library(libs, pkg)
            if not path:
                missing.append("%s: %s not found (Debian package %s; `sh bench/setup.sh` as "
                               "root installs it)" % (name, " or ".join(libs), pkg))
            chosen.append((name, path))
    if missing:
        for m in missing:
            print("MISSING PEER: " + m, file=sys.stderr)
        print("run.py: refusing to run an incomplete comparison (use --allocators to choose "
              "a subset explicitly)", file=sys.stderr)
        sys.exit(2)
    return chosen


# ---- each allocator's version: the table, the CSVs and the chart name it ----
GLIBC_PACKAGE = "libc6"


def dpkg_version(package):
    """The installed version of a Debian package (dpkg-query), or None."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    v = out.stdout.strip()
    return v if out.returncode == 0 and v else None


def hakmem_version(lib):
    """HAKMEM_VERSION_STRING of the source tree the library was built in (the
    include/hakmem.h above build/libhakmem.so, build/<variant>/libhakmem.so),
    with that tree's git commit when it is a checkout ("0.1.0+e3f0e9c");
    None when the library lies outside a source tree."""
    d = os.path.dirname(os.path.abspath(lib))
    for _ in range(4):
        d = os.path.dirname(d)
        hdr = os.path.join(d, "include", "hakmem.h")
        if os.path.isfile(hdr):
            m = re.search(r'^#define HAKMEM_VERSION_STRING "([^"]+)"', open(hdr).read(), re.M)
            if not m:
                return None
            try:
                out = subprocess.run(["git", "-C", d, "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True, timeout=30)
                commit = out.stdout.strip() if out.returncode == 0 else ""
            except (OSError, subprocess.SubprocessError):
                commit = ""
            return m.group(1) + ("+" + commit if commit else "")
    return None


def version_from_file_name(path):
    """A PEERS library's version from its file name, after following links:
    libmimalloc.so.3.4 -> 3.4, librpmalloc-1.4.5.so -> 1.4.5; None without one."""
    base = os.path.basename(os.path.realpath(path))
    m = (re.search(r"\.so\.(\d+(?:\.\w+)*)$", base) or
         re.search(r"[-_](\d+(?:\.\d+)+)\.so$", base))
    return m.group(1) if m else None


UNKNOWN_VERSION = "unknown"


def allocator_versions(allocs, peer_versions=None):
    """{allocator name: version string}: hakmem and a candidate from their
    source tree, glibc and the Debian peers from dpkg-query of their package,
    a PEERS entry from its NAME@VERSION or else its file name; 'unknown'
    where none of these says."""
    peer_versions = peer_versions or {}
    pkgs = dict((name, pkg) for name, _, pkg in ALLOCATORS)
    pkgs["glibc"] = GLIBC_PACKAGE
    out = {}
    for name, lib in allocs:
        if name in peer_versions:
            v = peer_versions[name] or version_from_file_name(lib)
        elif name in ("hakmem", CANDIDATE):
            v = hakmem_version(lib) if lib else None
        else:
            v = dpkg_version(pkgs[name]) if pkgs.get(name) else None
        out[name] = v or UNKNOWN_VERSION
    return out


ELF_MAGIC = b"\x7fELF"


def parse_peers(specs, taken, versions=None):
    """[(name, absolute library path)] from --peers arguments, each a
    whitespace-separated list of NAME=PATH or NAME@VERSION=PATH; exit 2
    naming any entry that is malformed, clashes with another allocator's name
    or whose file is missing or no ELF file.  versions (a dict), if given,
    gets {name: VERSION or None} for every entry."""
    peers, errors = [], []
    for spec in specs:
        for entry in spec.split():
            name, sep, path = entry.partition("=")
            if not sep or not name or not path:
                errors.append("PEERS entry %r: want NAME=/path/to/lib.so or "
                              "NAME@VERSION=/path/to/lib.so" % entry)
                continue
            name, at, version = name.partition("@")
            if at and not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.+~:-]*$", version):
                errors.append("PEERS entry %r: the version %r may hold only letters, digits "
                              "and _ . + ~ : -" % (entry, version))
                continue
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$", name):
                errors.append("PEERS entry %r: the name %r may hold only letters, digits "
                              "and _ . + -" % (entry, name))
                continue
            if name in taken or name in [p[0] for p in peers]:
                errors.append("PEERS entry %r: the name %s is already taken (by a built-in "
                              "allocator or an earlier entry); choose another" % (entry, name))
                continue
            path = os.path.abspath(path)
            if not os.path.isfile(path):
                errors.append("MISSING PEER: %s: %s not found (PEERS)" % (name, path))
                continue
            try:
                with open(path, "rb") as f:
                    magic = f.read(4)
            except OSError as e:
                errors.append("PEERS entry %s: cannot read %s: %s" % (name, path, e))
                continue
            if magic != ELF_MAGIC:
                errors.append("PEERS entry %s: %s is not an ELF shared object" % (name, path))
                continue
            peers.append((name, path))
            if versions is not None:
                versions[name] = version or None
    if errors:
        for e in errors:
            print(e if e.startswith("MISSING PEER") else "run.py: " + e, file=sys.stderr)
        print("run.py: refusing to run an incomplete comparison", file=sys.stderr)
        sys.exit(2)
    return peers


def prove(alloc, lib, fields, peer_libs):
    """Raise stats.ProofError unless the run of `alloc` was served by it: a
    candidate must be hakmem, a PEERS library the very file given."""
    if alloc in peer_libs:
        stats.check_peer_proof(alloc, lib, fields)
    else:
        stats.check_proof("hakmem" if alloc == CANDIDATE else alloc, fields)


def run_child(argv, preload, timeout, extra_env=None):
    """Run argv with LD_PRELOAD=preload; return (rc, stdout, stderr, usage).
    rc is None on timeout (the child's process group is killed).  usage is
    stats.rusage_fields() of the child's resource usage as os.wait4 reports it
    (the whole process, all its threads, start-up included), None on timeout."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    if extra_env:
        env.update(extra_env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env,
                                start_new_session=True)
        deadline = time.monotonic() + timeout
        rc, usage, delay = None, None, 0.0005
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                rc = os.waitstatus_to_exitcode(status)
                usage = stats.rusage_fields(ru)
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                os.waitpid(proc.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        proc.returncode = rc if rc is not None else -9
        out.seek(0)
        err.seek(0)
        return (rc, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                usage)


def describe_failure(rc, stderr):
    if rc is None:
        what = "timed out"
    elif rc < 0:
        what = "killed by signal %d" % -rc
    else:
        what = "exit status %d" % rc
    tail = " | ".join(stderr.strip().splitlines()[-3:])
    return what + (": " + tail if tail else "")


def proof_abort(wl, alloc, err, where):
    print("\nPROOF FAILED (%s run of %s under %s): %s" % (where, wl, alloc, err), file=sys.stderr)
    print("run.py: the measurement would not be of %s; aborting." % alloc, file=sys.stderr)
    sys.exit(3)


def fmt_rate(x):
    if x is None:
        return "-"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return "%.2f%s" % (x / div, unit)
    return "%.1f" % x


def fmt_opt(x, fmt):
    return "-" if x is None else fmt % x


def fmt_faults(x):
    """Minor faults per op: 3 significant digits without exponents where they read well."""
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 0.1:
        return "%.3g" % x
    return "%.2e" % x


def summarize(runs, allocs, workloads, sysc):
    """Per (workload, alloc) summary rows, plus per-alloc geomean of ratios."""
    rows = []
    for wl in workloads:
        med = {}
        wl_rows = []
        for a, _ in allocs:
            ok = [r.fields for r in runs if r.workload == wl and r.alloc == a and r.fields]
            failed = [r for r in runs if r.workload == wl and r.alloc == a and r.error]
            if not ok and not failed:
                continue            # not run under this allocator (_w's only)
            row = {"workload": wl, "allocator": a, "runs": len(ok), "failed_runs": len(failed)}
            if ok:
                tput = [f["ops_per_sec"] for f in ok]
                row["median_ops_per_sec"] = stats.median(tput)
                row["min_ops_per_sec"], row["max_ops_per_sec"] = min(tput), max(tput)
                row["cv"] = stats.cv(tput)
                row["median_seconds"] = stats.median([f["seconds"] for f in ok])
                rss = [f.get("peak_rss_kb", 0) for f in ok]
                row["peak_rss_kb"] = stats.median(rss)
                row["min_peak_rss_kb"], row["max_peak_rss_kb"] = min(rss), max(rss)
                usage = [(r.usage, r.fields["ops"]) for r in runs
                         if r.workload == wl and r.alloc == a and r.fields and r.usage]
                if usage:
                    row.update(stats.fault_summary(usage))
                for key in ("cache_line_shares", "shared_objects", "thread_line_shares", "rss_after_free_kb",
                            "rss_after_sleep_kb", "rss_refill_kb"):
                    vals = [f[key] for f in ok if isinstance(f.get(key), (int, float))]
                    if vals:
                        row[key] = stats.median(vals)
                med[a] = row["median_ops_per_sec"]
            sc = sysc.get((wl, a))
            if sc:
                counts, ops = sc
                row["syscalls_per_op"] = stats.syscalls_per_op(counts, ops)
                for n in stats.TRACED_SYSCALLS:
                    row[n + "_calls"] = counts.get(n, 0)
                row["strace_ops"] = ops
            rows.append(row)
            wl_rows.append(row)
        base = [r for r in wl_rows if r["allocator"] == BASELINE]
        base_faults = base[0].get("minflt_per_op") if base else None
        for row in wl_rows:
            row["ratio_vs_" + BASELINE] = stats.ratio(med.get(row["allocator"]), med.get(BASELINE))
            row["faults_ratio_vs_" + BASELINE] = stats.ratio(row.get("minflt_per_op"), base_faults)
    # the geometric means cover the workloads every allocator ran, so that
    # they compare (a workload run under a few allocators only, such as
    # request_arena_destroy, has its rows but no say in the means)
    ran = {}
    for r in rows:
        if r.get("ratio_vs_" + BASELINE):
            ran.setdefault(r["workload"], set()).add(r["allocator"])
    common = {wl for wl, who in ran.items() if all(a in who for a, _ in allocs)}
    geo = {}
    for a, _ in allocs:
        rs = [r["ratio_vs_" + BASELINE] for r in rows
              if r["allocator"] == a and r["workload"] in common and r.get("ratio_vs_" + BASELINE)]
        geo[a] = (stats.geomean(rs), len(rs)) if rs else (None, 0)
    return rows, geo


# ---- verdicts: hakmem against the faster peer, a candidate against hakmem ----
# The confidence of each look at a comparison.  make bench looks up to three
# times (after 10, 15 and 20 repetitions: --until-verdict), so a pair of
# allocators that is truly level gets a wrong verdict in at most about 6 % of
# the comparisons.
VERDICT_LEVEL = 0.98
# The sign test's interval needs this many paired ratios at VERDICT_LEVEL
# (7 at 98 %: with 6, even all six on one side has probability 1/64 > 1 %);
# with fewer (QUICK: 3), the final reading uses the t interval of the
# geometric mean instead (stats.geomean_ci; docs/benchmarks.md, "Verdicts")
SIGN_MIN_REPS = next(n for n in range(1, 100) if stats.median_ci(list(range(n)), VERDICT_LEVEL))


def _subjects(allocs):
    """The allocators a verdict is about (hakmem, a candidate build)."""
    return [a for a, _ in allocs if a in ("hakmem", CANDIDATE)]


def _throughputs(runs, wl, alloc):
    return dict((r.rep, r.fields["ops_per_sec"]) for r in runs
                if r.workload == wl and r.alloc == alloc and r.fields)


def best_peers(runs, allocs, workloads):
    """{workload: the peer with the highest median throughput} (peers: every
    allocator but hakmem and the candidate; a workload no peer ran has none)."""
    peers = [a for a, _ in allocs if a not in _subjects(allocs)]
    best = {}
    for wl in workloads:
        medians = [(stats.median(list(t.values())), a) for a in peers
                   for t in [_throughputs(runs, wl, a)] if t]
        if medians:
            best[wl] = max(medians, key=lambda m: m[0])[1]
    return best


def comparisons(runs, allocs, workloads, peers, level=VERDICT_LEVEL, few=False):
    """Per workload: hakmem (and a candidate) against the peer in `peers`,
    and a candidate against hakmem.  Each: the per-repetition throughput
    ratios' median, its sign-test confidence interval at `level` and the
    verdict (method "sign").  few=True (the final reading of a run): a
    comparison with too few ratios for the sign test but at least
    stats.T_MIN_REPS gets the t interval of the ratios' geometric mean
    instead (method "t"; ratio is then that geometric mean)."""
    names = [a for a, _ in allocs]
    out = []
    for wl in workloads:
        pairs = [(a, peers[wl]) for a in _subjects(allocs) if wl in peers]
        if CANDIDATE in names and "hakmem" in names:
            pairs.append((CANDIDATE, "hakmem"))
        for a, b in pairs:
            rs = stats.paired_ratios(_throughputs(runs, wl, a), _throughputs(runs, wl, b))
            if not rs:
                continue
            ci, method, est = stats.median_ci(rs, level), "sign", stats.median(rs)
            if ci is None:
                method = "-"
                if few and len(rs) >= stats.T_MIN_REPS:
                    ci, method, est = stats.geomean_ci(rs, level), "t", stats.geomean(rs)
            out.append({"workload": wl, "allocator": a, "against": b, "reps": len(rs),
                        "ratio": est, "ci": ci, "method": method, "verdict": stats.verdict(ci)})
    return out


def undecided(comps):
    """{workload: allocators to run again}: the comparisons without a verdict."""
    todo = {}
    for c in comps:
        if c["verdict"] not in ("ahead", "behind"):
            todo.setdefault(c["workload"], set()).update((c["allocator"], c["against"]))
    return todo


def verdict_lines(comps, markdown=False):
    """The verdicts, each under 100 columns; a single line when no
    comparison has enough repetitions for one."""
    if not comps:
        return []
    if all(c["verdict"] == "too few runs" for c in comps):
        most = max(c["reps"] for c in comps)
        return ["Verdicts: none: %d paired repetition%s, and a verdict needs %d (docs/benchmarks.md)."
                % (most, "" if most == 1 else "s", stats.T_MIN_REPS)]
    title = ["Verdicts (%g %% intervals of the per-repetition throughput ratio of interleaved runs;"
             % (VERDICT_LEVEL * 100),
             "ahead/behind when the interval excludes 1; sign: median, sign test, %d+ reps;"
             % SIGN_MIN_REPS,
             "t: geometric mean, t test on the logarithms, %d-%d reps):"
             % (stats.T_MIN_REPS, SIGN_MIN_REPS - 1)]
    fmt_ci = lambda c: "[%.3f, %.3f]" % c["ci"] if c["ci"] else "-"
    if markdown:
        lines = [" ".join(title), "", "| workload | allocator | against | reps | ratio | CI | method | verdict |",
                 "|---|---|---|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %d | %.3f | %s | %s | %s |" % (
            c["workload"], c["allocator"], c["against"], c["reps"], c["ratio"], fmt_ci(c),
            c["method"], c["verdict"]) for c in comps]
        return lines
    lines = title[:]
    lines += ["  %-22s %-9s vs %-9s %3d reps  %.3f %-16s %-4s  %s" % (
        c["workload"], c["allocator"], c["against"], c["reps"], c["ratio"], fmt_ci(c),
        c["method"], c["verdict"]) for c in comps]
    return lines


def add_verdicts(rows, comps):
    """The CSV's verdict columns: hakmem's row against the faster peer, a
    candidate's row against hakmem (or the peer, without hakmem)."""
    chosen = {}
    for c in comps:
        key = (c["workload"], c["allocator"])
        if key not in chosen or c["against"] == "hakmem":
            chosen[key] = c
    for row in rows:
        c = chosen.get((row["workload"], row["allocator"]))
        if c:
            row.update(verdict_against=c["against"], verdict_reps=c["reps"],
                       verdict_ratio=c["ratio"], verdict_lo=c["ci"][0] if c["ci"] else None,
                       verdict_hi=c["ci"][1] if c["ci"] else None,
                       verdict_method=c["method"], verdict=c["verdict"])


def notes_for(row):
    n = []
    if "cache_line_shares" in row:
        n.append("line_shares=%d" % row["cache_line_shares"])
    if "thread_line_shares" in row:
        n.append("thread_line_shares=%d" % row["thread_line_shares"])
    if "rss_after_free_kb" in row:
        n.append("after_free=%.1fM after_sleep=%.1fM" % (row["rss_after_free_kb"] / 1024.0,
                                                         row.get("rss_after_sleep_kb", 0) / 1024.0))
    if row.get("failed_runs"):
        n.append("FAILED %d run(s)" % row["failed_runs"])
    return " ".join(n)


def table_lines(rows, geo, markdown=False, versions=None):
    """The full table (latest.md; plain text with markdown=False, wider than
    a terminal): every column, the allocators' versions in a column."""
    versions = versions or {}
    hdr = ["workload", "allocator", "version", "median ops/s", "CV%", "vs " + BASELINE,
           "median s", "peak RSS MB", "minor faults/op", "faults vs " + BASELINE,
           "mmap-family syscalls/op", "notes"]
    body = []
    for r in rows:
        body.append([r["workload"], r["allocator"], versions.get(r["allocator"], UNKNOWN_VERSION),
                     fmt_rate(r.get("median_ops_per_sec")),
                     fmt_opt(r["cv"] * 100 if "cv" in r else None, "%.1f"),
                     fmt_opt(r.get("ratio_vs_" + BASELINE), "%.3f"),
                     fmt_opt(r.get("median_seconds"), "%.3f"),
                     fmt_opt(r["peak_rss_kb"] / 1024.0 if "peak_rss_kb" in r else None, "%.1f"),
                     fmt_faults(r.get("minflt_per_op")),
                     fmt_opt(r.get("faults_ratio_vs_" + BASELINE), "%.2f"),
                     fmt_opt(r.get("syscalls_per_op"), "%.2e"), notes_for(r)])
    lines = []
    if markdown:
        lines.append("| " + " | ".join(hdr) + " |")
        lines.append("|" + "---|" * len(hdr))
        lines += ["| " + " | ".join(b) + " |" for b in body]
    else:
        widths = [max(len(hdr[i]), *(len(b[i]) for b in body)) for i in range(len(hdr) - 1)]
        fmt = "  ".join("%%-%ds" % w for w in widths) + "  %s"
        lines.append(fmt % tuple(hdr))
        lines.append("-" * (sum(widths) + 2 * len(widths) + 5))
        prev = None
        for b in body:
            if prev is not None and b[0] != prev:
                lines.append("")
            prev = b[0]
            lines.append(fmt % tuple(b))
    lines.append("")
    return lines + geomean_lines(geo, markdown)


def geomean_lines(geo, markdown=False):
    if markdown:
        lines = ["| allocator | geometric mean of throughput ratio vs %s | workloads |"
                 % BASELINE, "|---|---|---|"]
        return lines + ["| %s | %s | %d |" % (a, fmt_opt(g, "%.3f"), n) for a, (g, n) in geo.items()]
    lines = ["Geometric mean of throughput ratio vs %s:" % BASELINE]
    for a, (g, n) in geo.items():
        lines.append("  %-9s %s (over %d workloads)" % (a, fmt_opt(g, "%.3f"), n))
    return lines


COMPACT_WIDTH = 100


def compact_table_lines(rows, geo, versions=None, width=COMPACT_WIDTH, full_table=None):
    """The table make bench prints: the columns that compare, each line at
    most `width` columns.  The allocator column names each allocator with its
    version ("mimalloc 2.0.9-1"); when that would make a line too wide, the
    versions go to a line of their own above the table.  The full table
    (every column, notes) is in latest.md (full_table: its path)."""
    versions = versions or {}
    hdr = ["workload", "allocator", "ops/s", "CV%", "ratio", "RSS MB", "faults/op", "sysc/op"]

    def body(with_versions):
        out = []
        for r in rows:
            a = r["allocator"]
            if with_versions:
                a += " " + versions.get(a, UNKNOWN_VERSION)
            out.append([r["workload"], a, fmt_rate(r.get("median_ops_per_sec")),
                        fmt_opt(r["cv"] * 100 if "cv" in r else None, "%.1f"),
                        fmt_opt(r.get("ratio_vs_" + BASELINE), "%.3f"),
                        fmt_opt(r["peak_rss_kb"] / 1024.0 if "peak_rss_kb" in r else None, "%.1f"),
                        fmt_faults(r.get("minflt_per_op")),
                        fmt_opt(r.get("syscalls_per_op"), "%.1e")])
        return out

    def widths(b):
        return [max(len(hdr[i]), *(len(x[i]) for x in b)) for i in range(len(hdr))]

    b = body(True)
    w = widths(b) if b else [len(h) for h in hdr]
    lines = []
    if sum(w) + 2 * (len(w) - 1) > width:
        b = body(False)
        w = widths(b) if b else [len(h) for h in hdr]
        names = list(dict.fromkeys(r["allocator"] for r in rows))
        lines += _wrap("versions: " + ", ".join("%s %s" % (a, versions.get(a, UNKNOWN_VERSION))
                                               for a in names), width)
    # text columns left, numbers right
    fmt = "  ".join(("%%-%ds" if i < 2 else "%%%ds") % x for i, x in enumerate(w))
    lines.append((fmt % tuple(hdr)).rstrip())
    lines.append("-" * min(width, sum(w) + 2 * (len(w) - 1)))
    prev = None
    for row, x in zip(rows, b):
        if prev is not None and x[0] != prev:
            lines.append("")
        prev = x[0]
        lines.append((fmt % tuple(x)).rstrip())
    failed = ["%s/%s %d" % (r["workload"], r["allocator"], r["failed_runs"])
              for r in rows if r.get("failed_runs")]
    if failed:
        lines += _wrap("FAILED runs (workload/allocator count): " + ", ".join(failed), width)
    lines += _wrap("ops/s: median throughput; CV%%: its coefficient of variation; ratio: ops/s / "
                   "%s's; RSS MB: median peak RSS; faults/op: minor page faults per op; "
                   "sysc/op: mmap-family syscalls per op%s"
                   % (BASELINE, "; every column: " + full_table if full_table else ""), width)
    lines.append("")
    return lines + geomean_lines(geo)


def _wrap(text, width):
    import textwrap
    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False,
                         subsequent_indent="  ")


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def chart_series(rows, geo, allocs, workloads, versions=None):
    """What the chart draws, per allocator: its legend label (name and
    version); per workload its throughput ratio to mimalloc's median with the
    error bar (lowest and highest repetition, each divided by mimalloc's
    median; as distances below and above the bar), then the geometric mean
    (no error bar); per workload its median peak RSS in MB with the lowest
    and highest repetition.  A workload the allocator did not run has 0."""
    versions = versions or {}
    row_of = dict(((x["workload"], x["allocator"]), x) for x in rows)
    base = dict((wl, row_of.get((wl, BASELINE), {}).get("median_ops_per_sec")) for wl in workloads)
    out = []
    for a, _ in allocs:
        ser = {"name": a, "label": "%s %s" % (a, versions.get(a, UNKNOWN_VERSION)),
               "ratio": [], "ratio_err": ([], []), "rss_mb": [], "rss_err": ([], [])}
        for wl in workloads:
            r = row_of.get((wl, a), {})
            y = r.get("ratio_vs_" + BASELINE) or 0
            ser["ratio"].append(y)
            ok = y and base[wl] and "min_ops_per_sec" in r
            ser["ratio_err"][0].append(max(0.0, y - r["min_ops_per_sec"] / base[wl]) if ok else 0.0)
            ser["ratio_err"][1].append(max(0.0, r["max_ops_per_sec"] / base[wl] - y) if ok else 0.0)
            m = r.get("peak_rss_kb")
            ok = m and "min_peak_rss_kb" in r
            ser["rss_mb"].append(m / 1024.0 if m else 0)
            ser["rss_err"][0].append(max(0.0, (m - r["min_peak_rss_kb"]) / 1024.0) if ok else 0.0)
            ser["rss_err"][1].append(max(0.0, (r["max_peak_rss_kb"] - m) / 1024.0) if ok else 0.0)
        ser["ratio"].append(geo.get(a, (None, 0))[0] or 0)
        ser["ratio_err"][0].append(0.0)
        ser["ratio_err"][1].append(0.0)
        out.append(ser)
    return out


def write_chart(path, rows, geo, allocs, workloads, title, versions=None):
    """Two panels (chart_series): each allocator's throughput ratio to
    mimalloc per workload and the geometric mean, with error bars from the
    lowest to the highest repetition, and its median peak RSS per workload
    with the same kind of error bars; both on log scales."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("run.py: matplotlib missing (%s); no chart written" % e, file=sys.stderr)
        return False
    series = chart_series(rows, geo, allocs, workloads, versions)
    names = [a for a, _ in allocs]
    groups = list(workloads) + ["GEOMEAN"]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(10, len(groups) * 0.9), 10))
    width = 0.8 / max(1, len(names))
    err_style = {"elinewidth": 0.7, "capthick": 0.7}
    for i, ser in enumerate(series):
        xs = [j + (i - (len(names) - 1) / 2.0) * width for j in range(len(groups))]
        ax.bar(xs, ser["ratio"], width, label=ser["label"], yerr=ser["ratio_err"], capsize=1.5,
               error_kw=err_style)
        ax2.bar(xs[:-1], ser["rss_mb"], width, label=ser["label"], yerr=ser["rss_err"],
                capsize=1.5, error_kw=err_style)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("throughput / %s's median (>1 = faster)" % BASELINE)
    ax.set_yscale("log")
    ticks = [0.0625, 0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0]
    ax.set_yticks(ticks)
    ax.set_yticklabels(["%g" % t for t in ticks])
    ax.minorticks_off()
    ax.grid(axis="y", linewidth=0.3)
    ax.set_title(title + "\nbars: median; error bars: lowest to highest repetition", fontsize=9)
    ax.legend(fontsize=8, ncol=min(len(names), 5))
    ax2.set_xticks(range(len(workloads)))
    ax2.set_xticklabels(workloads, rotation=35, ha="right", fontsize=8)
    ax2.set_ylabel("peak RSS, MB (log scale)")
    ax2.set_yscale("log")
    lo_y, hi_y = ax2.get_ylim()
    rticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
              if lo_y <= t <= hi_y]
    ax2.set_yticks(rticks)
    ax2.set_yticklabels(["%g" % t for t in rticks])
    ax2.minorticks_off()
    ax2.grid(axis="y", linewidth=0.3)
    ax2.set_title("peak RSS (VmHWM): median; error bars: lowest to highest repetition", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def snapshot(src_dir, dst_dir):
    """Copy the latest results into the committed snapshot directory; runs nothing."""
    missing = [f for f in SNAPSHOT_FILES if not os.path.isfile(os.path.join(src_dir, f))]
    if missing:
        print("run.py: no results to snapshot: %s missing in %s (run `make bench` first)"
              % (", ".join(missing), src_dir), file=sys.stderr)
        return 2
    os.makedirs(dst_dir, exist_ok=True)
    for f in SNAPSHOT_FILES:
        shutil.copyfile(os.path.join(src_dir, f), os.path.join(dst_dir, f))
    with open(os.path.join(dst_dir, "latest.md")) as f:
        head = f.readline().strip()
    print("copied %s from %s to %s" % (", ".join(SNAPSHOT_FILES), src_dir, dst_dir))
    print("snapshot: " + head)
    if "`full`" not in head:
        print("run.py: note: this snapshot is not of a full run (profile in the line above)",
              file=sys.stderr)
    return 0


def machine_description():
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return ("nproc=%d, CPU: %s, kernel %s, %s" % (os.cpu_count() or 0, model, platform.release(),
                                                   datetime.datetime.now().strftime("%Y-%m-%d %H:%M")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run (3 reps, small sizes)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, for tests only")
    ap.add_argument("--reps", type=int, help="repetitions (default 5, 3 with --quick)")
    ap.add_argument("--allocators", default=",".join(a[0] for a in ALLOCATORS),
                    help="comma list from %s, and %s (--peers come on top)"
                    % (",".join(a[0] for a in ALLOCATORS), CANDIDATE))
    ap.add_argument("--peers", action="append", default=[], metavar="'NAME[@VERSION]=LIB ...'",
                    help="more allocators to compare (make bench PEERS=...): whitespace-"
                    "separated NAME=/path/lib.so entries (repeatable); each is preloaded, "
                    "proven to serve malloc from that file, and a peer in the verdicts; "
                    "NAME@VERSION=... names its version (else the file name's, if any)")
    ap.add_argument("--workloads", default="all", help="comma list of workload names")
    ap.add_argument("--hakmem-lib", default=os.path.join(ROOT, "build", "libhakmem.so"))
    ap.add_argument("--candidate-lib", help="a second hakmem build, run as allocator "
                    "'candidate' (add it to --allocators) and proven as hakmem")
    ap.add_argument("--candidate-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable set for the candidate's runs only "
                    "(repeatable); with --candidate-lib equal to --hakmem-lib it compares "
                    "one build with and without a setting, e.g. HAKMEM_SAMPLE_BYTES=524288")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR,
                    help="where the results go (default build/bench/results, outside git)")
    ap.add_argument("--snapshot", action="store_true",
                    help="run nothing: copy %s from --out-dir into --snapshot-dir, the "
                    "committed snapshot (make bench-snapshot)" % ", ".join(SNAPSHOT_FILES))
    ap.add_argument("--snapshot-dir", default=SNAPSHOT_DIR, help="default results/")
    ap.add_argument("--no-syscalls", action="store_true", help="skip the strace runs")
    ap.add_argument("--until-verdict", type=int, default=0, metavar="N",
                    help="run a workload whose comparison has no verdict again (hakmem against "
                    "the faster peer, a candidate against hakmem), in batches of --reps "
                    "repetitions, up to N in all (make bench: 20)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    args = ap.parse_args()
    if args.snapshot:
        return snapshot(args.out_dir, args.snapshot_dir)

    profile = "smoke" if args.smoke else "quick" if args.quick else "full"
    reps = args.reps or (1 if args.smoke else 3 if args.quick else 5)
    known = [a[0] for a in ALLOCATORS] + [CANDIDATE]
    selected = [a.strip() for a in args.allocators.split(",") if a.strip()]
    bad = [a for a in selected if a not in known]
    if bad or not selected:
        ap.error("unknown allocator(s) %s; choose from %s" % (bad, known))
    wls = WORKLOADS if args.workloads == "all" else [
        w for w in WORKLOADS if w["name"] in args.workloads.split(",")]
    if not wls:
        ap.error("no workload matches %r" % args.workloads)
    peer_versions = {}
    peer_list = parse_peers(args.peers, known, peer_versions)
    allocs = resolve_allocators(selected, args.hakmem_lib, args.candidate_lib) + peer_list
    versions = allocator_versions(allocs, peer_versions)
    peer_libs = dict(peer_list)
    cand_env = {}
    for kv in args.candidate_env:
        if "=" not in kv:
            ap.error("--candidate-env wants NAME=VALUE, not %r" % kv)
        k, v = kv.split("=", 1)
        cand_env[k] = v
    for w in wls:
        b = os.path.join(args.bin_dir, w["bin"])
        if not os.access(b, os.X_OK):
            print("run.py: workload binary %s missing (run `make bench-bins`)" % b, file=sys.stderr)
            sys.exit(2)
    strace = None if args.no_syscalls else "/usr/bin/strace"
    if strace and not os.access(strace, os.X_OK):
        print("MISSING TOOL: strace (Debian package strace) is needed for syscall counts; "
              "`sh bench/setup.sh` as root, or pass --no-syscalls", file=sys.stderr)
        sys.exit(2)

    load0 = os.getloadavg()
    if load0[0] > 0.5 * (os.cpu_count() or 1):
        print("WARNING: machine busy before the run (load average %.2f %.2f %.2f on %d CPUs); "
              "expect a high CV" % (load0 + (os.cpu_count() or 0,)), file=sys.stderr)
    total = reps * sum(1 for w in wls for a, _ in allocs if _runs_under(w, a))
    print("hakmem benchmark: profile=%s reps=%d workloads=%d allocators=%s" %
          (profile, reps, len(wls), ",".join(a for a, _ in allocs)))
    print("machine: " + machine_description())
    for a, p in allocs:
        print("  %-9s %-20s %s" % (a, versions[a], p or "(no preload: glibc)"))
    print("timed runs: %d (interleaved)%s, then %d strace runs" %
          (total, ", and again up to %d repetitions where a comparison has no verdict" %
           args.until_verdict if args.until_verdict else "", 0 if not strace else total // reps))
    sys.stdout.flush()

    t_start = time.monotonic()
    runs, n = [], 0

    def timed(w, a, lib, rep, label):
        """One timed, proven run of workload w under allocator a."""
        argv = [os.path.join(args.bin_dir, w["bin"])] + w["args"][profile]
        env = dict(w["env"], **(cand_env if a == CANDIDATE else {}))
        rc, out, err, usage = run_child(argv, lib, args.timeout, env)
        run = Run(w["name"], a, rep, usage=usage)
        if rc != 0:
            run.error = describe_failure(rc, err)
        else:
            try:
                run.fields = stats.parse_output(out)
            except stats.ParseError as e:
                run.error = "bad output: %s" % e
        if run.fields:
            try:
                prove(a, lib, run.fields, peer_libs)
            except stats.ProofError as e:
                proof_abort(w["name"], a, e, "timed")
        runs.append(run)
        if run.error:
            print("[%s] rep %d %-18s %-9s FAILED: %s" % (label, rep + 1, w["name"], a, run.error))
        else:
            f = run.fields
            print("[%s] rep %d %-18s %-9s %10s ops/s  %7.3fs  peak %.1f MB  %s minor faults/op" %
                  (label, rep + 1, w["name"], a, fmt_rate(f["ops_per_sec"]), f["seconds"],
                   f.get("peak_rss_kb", 0) / 1024.0,
                   fmt_faults(stats.per_op(usage["minflt"], f["ops"]))))
        sys.stdout.flush()

    for rep in range(reps):
        for w in wls:
            for a, lib in allocs:
                if not _runs_under(w, a):
                    continue
                n += 1
                timed(w, a, lib, rep, "%3d/%d" % (n, total))

    # Rows without a verdict run again, only the allocators compared, in
    # batches of `reps` interleaved repetitions, up to --until-verdict.
    names = [w["name"] for w in wls]
    peers = best_peers(runs, allocs, names)
    done = reps
    while args.until_verdict and done < args.until_verdict:
        todo = undecided(comparisons(runs, allocs, names, peers))
        if not todo:
            break
        batch = min(reps, args.until_verdict - done)
        print("no verdict yet after %d repetitions: %s; %d more" %
              (done, ", ".join(sorted(todo)), batch))
        for rep in range(done, done + batch):
            for w in wls:
                for a, lib in allocs:
                    if a in todo.get(w["name"], ()):
                        timed(w, a, lib, rep, "again")
        done += batch

    sysc = {}
    if strace:
        fd, trace_file = tempfile.mkstemp(prefix="hakmem-strace-")
        os.close(fd)
        for w in wls:
            bargs = w["args"][profile]
            if w["strace_args"]:
                bargs = w["strace_args"](bargs)
            for a, lib in allocs:
                if not _runs_under(w, a):
                    continue
                argv = [strace, "-f", "--seccomp-bpf", "-c", "-o", trace_file,
                        "-e", "trace=" + ",".join(stats.TRACED_SYSCALLS)]
                if lib:
                    argv += ["-E", "LD_PRELOAD=" + lib]
                for k, v in w["env"].items():
                    argv += ["-E", "%s=%s" % (k, v)]
                if a == CANDIDATE:
                    for k, v in cand_env.items():
                        argv += ["-E", "%s=%s" % (k, v)]
                argv += [os.path.join(args.bin_dir, w["bin"])] + bargs
                rc, out, err, _ = run_child(argv, None, args.timeout * 3)
                msg = None
                try:
                    if rc != 0:
                        raise stats.ParseError(describe_failure(rc, err))
                    f = stats.parse_output(out)
                    try:
                        prove(a, lib, f, peer_libs)
                    except stats.ProofError as e:
                        proof_abort(w["name"], a, e, "strace")
                    counts = stats.parse_strace_summary(open(trace_file).read())
                    sysc[(w["name"], a)] = (counts, f["ops"])
                    msg = "%.2e mmap-family syscalls/op (%s)" % (
                        stats.syscalls_per_op(counts, f["ops"]),
                        " ".join("%s=%d" % (k, v) for k, v in counts.items()))
                except stats.ParseError as e:
                    msg = "FAILED: %s" % e
                    runs.append(Run(w["name"], a, -1, error="strace run " + msg))
                print("[strace] %-18s %-9s %s" % (w["name"], a, msg))
                sys.stdout.flush()
        os.unlink(trace_file)

    rows, geo = summarize(runs, allocs, names, sysc)
    # the final reading: the t interval where a comparison has 3-5 repetitions
    comps = comparisons(runs, allocs, names, peers, few=True)
    add_verdicts(rows, comps)
    for r in rows:
        r["version"] = versions.get(r["allocator"], UNKNOWN_VERSION)
    elapsed = time.monotonic() - t_start
    load = "1-min load average %.2f before the run, %.2f after" % (load0[0], os.getloadavg()[0])
    print("")
    more = " (up to %d where a comparison had no verdict)" % done if done > reps else ""
    md_path = os.path.join(args.out_dir, "latest.md")
    print("=== results: profile=%s, %d interleaved reps%s, medians; %.0f s" %
          (profile, reps, more, elapsed))
    print("=== " + load)
    for line in (compact_table_lines(rows, geo, versions, full_table=md_path) + [""] +
                 verdict_lines(comps)):
        print(line)

    os.makedirs(args.out_dir, exist_ok=True)
    # the version right after the allocator's name
    write_csv(os.path.join(args.out_dir, "latest.csv"), [
        dict([(k, r[k]) for k in ("workload", "allocator", "version")] +
             [(k, v) for k, v in r.items() if k not in ("workload", "allocator", "version")])
        for r in rows])
    # the RESULT line's own workload (the program's name) and allocator (the
    # object that defined malloc) as result_workload and result_allocator:
    # the runner's names stay in workload and allocator
    write_csv(os.path.join(args.out_dir, "latest_runs.csv"), [
        dict([("workload", r.workload), ("allocator", r.alloc),
              ("version", versions.get(r.alloc, UNKNOWN_VERSION)), ("rep", r.rep),
              ("error", r.error or "")]
             + sorted((("result_" + k if k in ("workload", "allocator") else k), v)
                      for k, v in (r.fields or {}).items())
             + [("rusage_" + k, v) for k, v in sorted((r.usage or {}).items())])
        for r in runs])
    title = "hakmem benchmark (%s, %d reps), %s" % (profile, reps, machine_description())
    with open(md_path, "w") as f:
        f.write("Profile `%s`, %d interleaved repetitions%s, %.0f s total (%s).  Machine: %s\n\n"
                % (profile, reps, more, elapsed, load, machine_description()))
        if peer_list:
            f.write("Peers added with PEERS: %s\n\n" % ", ".join(
                "%s = `%s`" % p for p in peer_list))
        f.write("\n".join(table_lines(rows, geo, markdown=True, versions=versions) + [""] +
                          verdict_lines(comps, markdown=True)) + "\n")
    chart = write_chart(os.path.join(args.out_dir, "latest.png"), rows, geo, allocs,
                        [w["name"] for w in wls], title, versions)
    print("wrote %s/latest.csv, latest_runs.csv, latest.md%s" %
          (args.out_dir, ", latest.png" if chart else ""))
    print("(`make bench-snapshot` copies them into results/, the committed snapshot)")
    failed = [r for r in runs if r.error]
    if failed:
        print("run.py: %d run(s) FAILED (see above); exit status 1" % len(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
