"""Unit tests for bench/stats.py (statistics, RESULT parsing, allocator proof,
page-fault accounting) and for bench/run.py's summary, table and snapshot.

Run:  /usr/bin/python3 tests/test_bench_stats.py            (plain unittest)
      /usr/bin/python3 tests/test_bench_stats.py --pass-fail (one PASS/FAIL/SKIP
                                                              line per test, for
                                                              tests/suite_bench.sh)
"""

import collections
import contextlib
import io
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import stats  # noqa: E402
import run  # noqa: E402

GLIBC_LINE = ("RESULT workload=random_mixed threads=1 ops=2000000 seconds=0.048562 "
              "ops_per_sec=41184838.4 allocator=/lib/x86_64-linux-gnu/libc.so.6 "
              "hakmem_owned=-1 peak_rss_kb=1744 ws=400 mallocs=1000105 checksum=12")
HAKMEM_LINE = ("RESULT workload=larson threads=8 ops=400000 seconds=0.02 ops_per_sec=2e7 "
               "allocator=/work/main/build/libhakmem.so hakmem_owned=1 peak_rss_kb=9000")

STRACE_SUMMARY = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 86.99    0.451581          72      6200           madvise
  8.81    0.045713          43      1043           mmap
  4.21    0.021854          21      1003         2 munmap
------ ----------- ----------- --------- --------- ----------------
100.00    0.519148          62      8246         2 total
"""


class TestStatistics(unittest.TestCase):
    def test_median_odd(self):
        self.assertEqual(stats.median([5, 1, 3]), 3)

    def test_median_even(self):
        self.assertEqual(stats.median([4, 1, 3, 2]), 2.5)

    def test_median_empty_raises(self):
        self.assertRaises(ValueError, stats.median, [])

    def test_cv_known_value(self):
        # mean 5, sample sd of [2,4,4,4,5,5,7,9] = sqrt(32/7)
        self.assertAlmostEqual(stats.cv([2, 4, 4, 4, 5, 5, 7, 9]), math.sqrt(32 / 7.0) / 5)

    def test_cv_constant_is_zero(self):
        self.assertEqual(stats.cv([3.0, 3.0, 3.0]), 0.0)

    def test_cv_single_value_is_zero(self):
        self.assertEqual(stats.cv([42.0]), 0.0)

    def test_geomean(self):
        self.assertAlmostEqual(stats.geomean([1, 4, 16]), 4.0)
        self.assertAlmostEqual(stats.geomean([0.5, 2.0]), 1.0)

    def test_geomean_rejects_nonpositive(self):
        self.assertRaises(ValueError, stats.geomean, [1.0, 0.0])
        self.assertRaises(ValueError, stats.geomean, [])

    def test_ratio(self):
        self.assertAlmostEqual(stats.ratio(150.0, 100.0), 1.5)
        self.assertIsNone(stats.ratio(None, 100.0))
        self.assertIsNone(stats.ratio(1.0, 0))


class TestParsing(unittest.TestCase):
    def test_parse_fields_and_types(self):
        f = stats.parse_result_line(GLIBC_LINE)
        self.assertEqual(f["workload"], "random_mixed")
        self.assertEqual(f["ops"], 2000000)
        self.assertIsInstance(f["ops"], int)
        self.assertAlmostEqual(f["seconds"], 0.048562)
        self.assertEqual(f["hakmem_owned"], -1)
        self.assertEqual(f["allocator"], "/lib/x86_64-linux-gnu/libc.so.6")
        self.assertEqual(f["ws"], 400)

    def test_parse_output_ignores_other_lines(self):
        f = stats.parse_output("warming up\n" + HAKMEM_LINE + "\nbye\n")
        self.assertEqual(f["threads"], 8)

    def test_parse_output_requires_a_result(self):
        self.assertRaises(stats.ParseError, stats.parse_output, "no result here\n")

    def test_parse_output_rejects_two_results(self):
        self.assertRaises(stats.ParseError, stats.parse_output,
                          GLIBC_LINE + "\n" + GLIBC_LINE + "\n")

    def test_parse_rejects_missing_required_field(self):
        self.assertRaises(stats.ParseError, stats.parse_result_line,
                          "RESULT workload=x ops=1 seconds=1 ops_per_sec=1 allocator=/a.so")

    def test_parse_rejects_nonpositive_ops_and_time(self):
        bad_ops = GLIBC_LINE.replace("ops=2000000 ", "ops=0 ")
        bad_time = GLIBC_LINE.replace("seconds=0.048562", "seconds=0")
        self.assertRaises(stats.ParseError, stats.parse_result_line, bad_ops)
        self.assertRaises(stats.ParseError, stats.parse_result_line, bad_time)

    def test_parse_rejects_malformed_token(self):
        self.assertRaises(stats.ParseError, stats.parse_result_line, GLIBC_LINE + " junk")

    def test_strace_summary(self):
        c = stats.parse_strace_summary(STRACE_SUMMARY)
        self.assertEqual(c["madvise"], 6200)
        self.assertEqual(c["mmap"], 1043)
        self.assertEqual(c["munmap"], 1003)  # row with an errors column
        self.assertEqual(c["mremap"], 0)     # not listed -> 0
        self.assertEqual(c["brk"], 0)
        self.assertNotIn("total", c)

    def test_strace_summary_requires_table(self):
        self.assertRaises(stats.ParseError, stats.parse_strace_summary, "strace: error\n")

    def test_syscalls_per_op(self):
        c = stats.parse_strace_summary(STRACE_SUMMARY)
        self.assertAlmostEqual(stats.syscalls_per_op(c, 8246), 1.0)
        c["brk"] = 1000  # brk is reported separately, not in the mmap family
        self.assertAlmostEqual(stats.syscalls_per_op(c, 8246), 1.0)


class TestProof(unittest.TestCase):
    def fields(self, line=GLIBC_LINE, **over):
        f = stats.parse_result_line(line)
        f.update(over)
        return f

    def test_glibc_accepted(self):
        stats.check_proof("glibc", self.fields())

    def test_hakmem_accepted(self):
        stats.check_proof("hakmem", self.fields(HAKMEM_LINE))

    def test_hakmem_expected_but_glibc_served(self):
        with self.assertRaises(stats.ProofError) as cm:
            stats.check_proof("hakmem", self.fields())
        self.assertIn("libc.so.6", str(cm.exception))

    def test_hakmem_path_but_not_owned(self):
        self.assertRaises(stats.ProofError, stats.check_proof, "hakmem",
                          self.fields(HAKMEM_LINE, hakmem_owned=0))

    def test_hakmem_rejects_foreign_samples(self):
        # a workload block hakmem_owns() did not claim (e.g. a size forwarded to glibc)
        self.assertRaises(stats.ProofError, stats.check_proof, "hakmem",
                          self.fields(HAKMEM_LINE, owned_samples=10, foreign_samples=1))
        stats.check_proof("hakmem", self.fields(HAKMEM_LINE, owned_samples=10,
                                                 foreign_samples=0))

    def test_hakmem_path_but_no_owns_symbol(self):
        self.assertRaises(stats.ProofError, stats.check_proof, "hakmem",
                          self.fields(HAKMEM_LINE, hakmem_owned=-1))

    def test_peer_expected_but_glibc_served(self):
        for peer in ("mimalloc", "jemalloc", "tcmalloc"):
            self.assertRaises(stats.ProofError, stats.check_proof, peer, self.fields())

    def test_peers_accepted(self):
        for peer, path in (("mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"),
                           ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
                           ("tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")):
            stats.check_proof(peer, self.fields(allocator=path))

    def test_glibc_expected_but_mimalloc_served(self):
        self.assertRaises(stats.ProofError, stats.check_proof, "glibc",
                          self.fields(allocator="/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"))

    def test_glibc_expected_but_hakmem_loaded(self):
        # hakmem_owns visible means hakmem is in the process: not a glibc run
        self.assertRaises(stats.ProofError, stats.check_proof, "glibc",
                          self.fields(hakmem_owned=0))

    def test_libc_lookalike_rejected(self):
        self.assertRaises(stats.ProofError, stats.check_proof, "glibc",
                          self.fields(allocator="/tmp/libc.so.6.evil/libhakmem.so"))
        self.assertRaises(stats.ProofError, stats.check_proof, "glibc",
                          self.fields(allocator="unknown"))

    def test_unknown_allocator_rejected(self):
        self.assertRaises(stats.ProofError, stats.check_proof, "nosuch", self.fields())


class TestPeerProof(unittest.TestCase):
    """A library given with PEERS (run.py --peers) must itself define the
    malloc the run used: the very file, after resolving symbolic links."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.lib = os.path.join(self.dir.name, "libpeer.so.1")
        open(self.lib, "wb").close()
        self.link = os.path.join(self.dir.name, "libpeer.so")
        os.symlink(self.lib, self.link)

    def tearDown(self):
        self.dir.cleanup()

    def fields(self, **over):
        f = stats.parse_result_line(GLIBC_LINE)
        f.update(allocator=self.lib)
        f.update(over)
        return f

    def test_the_file_itself_and_a_link_to_it_accepted(self):
        stats.check_peer_proof("p", self.lib, self.fields())
        stats.check_peer_proof("p", self.link, self.fields())
        stats.check_peer_proof("p", self.lib, self.fields(allocator=self.link))

    def test_glibc_or_another_library_rejected(self):
        with self.assertRaises(stats.ProofError) as cm:
            stats.check_peer_proof("p", self.lib, self.fields(
                allocator="/lib/x86_64-linux-gnu/libc.so.6"))
        self.assertIn("libc.so.6", str(cm.exception))
        self.assertIn("expected p (", str(cm.exception))
        # same file name elsewhere is not the same library
        self.assertRaises(stats.ProofError, stats.check_peer_proof, "p", self.lib,
                          self.fields(allocator="/elsewhere/libpeer.so.1"))
        self.assertRaises(stats.ProofError, stats.check_peer_proof, "p", self.lib,
                          self.fields(allocator="unknown"))

    def test_foreign_samples_and_unclaimed_hakmem_rejected(self):
        self.assertRaises(stats.ProofError, stats.check_peer_proof, "p", self.lib,
                          self.fields(owned_samples=5, foreign_samples=1))
        self.assertRaises(stats.ProofError, stats.check_peer_proof, "p", self.lib,
                          self.fields(hakmem_owned=0))
        # a peer that is itself a hakmem build owns its blocks
        stats.check_peer_proof("p", self.lib, self.fields(hakmem_owned=1))

    def test_command_line_takes_name_equals_library(self):
        out = os.path.join(self.dir.name, "out")
        with open(out, "w") as f:
            f.write("RESULT workload=w ops=1 seconds=1 ops_per_sec=1 allocator=%s "
                    "hakmem_owned=-1\n" % self.link)
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "stats.py")
        ok = subprocess.run([sys.executable, here, "check", "p=" + self.lib, out],
                            capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stdout)
        bad = subprocess.run([sys.executable, here, "check", "p=/lib/x86_64-linux-gnu/libm.so.6",
                              out], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("PROOF FAILED", bad.stdout)


class TestPeersOption(unittest.TestCase):
    """run.py --peers (make bench PEERS=...): parsing, refusals, and the
    verdict's faster peer chosen among the PEERS libraries too."""

    def parse(self, *specs):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                return run.parse_peers(list(specs), ["hakmem", "glibc", "mimalloc"]), ""
            except SystemExit as e:
                self.assertEqual(e.code, 2)
                return None, err.getvalue()

    def test_entries_parsed_to_absolute_paths(self):
        with tempfile.TemporaryDirectory() as d:
            lib = os.path.join(d, "liba.so")
            with open(lib, "wb") as f:
                f.write(b"\x7fELF" + b"\0" * 60)
            got, _ = self.parse("a=%s  b.2=%s" % (lib, os.path.relpath(lib)), "c=" + lib)
            self.assertEqual(got, [("a", lib), ("b.2", lib), ("c", lib)])
            _, err = self.parse("mimalloc=" + lib)
            self.assertIn("name mimalloc is already taken", err)
            _, err = self.parse("a=%s a=%s" % (lib, lib))
            self.assertIn("name a is already taken", err)
            _, err = self.parse("a/b=" + lib)
            self.assertIn("may hold only", err)
            _, err = self.parse(lib)
            self.assertIn("want NAME=/path/to/lib.so", err)
            text = os.path.join(d, "notes.txt")
            open(text, "w").close()
            _, err = self.parse("t=" + text)
            self.assertIn("is not an ELF shared object", err)

    def test_missing_library_named(self):
        _, err = self.parse("ghost=/nonexistent/libghost.so")
        self.assertIn("MISSING PEER: ghost: /nonexistent/libghost.so not found (PEERS)", err)

    def test_faster_peer_may_be_a_peers_library(self):
        allocs = [("hakmem", "/x/libhakmem.so"), ("mimalloc", "/y/libmimalloc.so.2"),
                  ("mi3", "/p/libmimalloc.so.3")]
        out = []
        for rep in range(10):
            for a, ops in (("hakmem", 100.0), ("mimalloc", 90.0), ("mi3", 110.0)):
                f = stats.parse_result_line(HAKMEM_LINE)
                f.update(workload="w", ops=1000, ops_per_sec=ops)
                out.append(run.Run("w", a, rep, fields=f))
        peers = run.best_peers(out, allocs, ["w"])
        self.assertEqual(peers, {"w": "mi3"})
        comps = run.comparisons(out, allocs, ["w"], peers)
        self.assertEqual([(c["allocator"], c["against"], c["verdict"]) for c in comps],
                         [("hakmem", "mi3", "behind")])
        rows, geo = run.summarize(out, allocs, ["w"], {})
        self.assertEqual([r["allocator"] for r in rows], ["hakmem", "mimalloc", "mi3"])
        self.assertIn("| w | mi3 |", "\n".join(run.table_lines(rows, geo, markdown=True)))


# what os.wait4 returns as its third value, reduced to the fields used
FakeRusage = collections.namedtuple("FakeRusage", "ru_minflt ru_majflt ru_utime ru_stime")


class TestFaults(unittest.TestCase):
    def test_rusage_fields(self):
        u = stats.rusage_fields(FakeRusage(410755, 2, 1.5, 5.75))
        self.assertEqual(u, {"minflt": 410755, "majflt": 2, "utime_s": 1.5, "stime_s": 5.75})
        self.assertIsInstance(u["minflt"], int)

    def test_rusage_fields_of_real_struct(self):
        # resource.struct_rusage and os.wait4's value are the same type
        u = stats.rusage_fields(resource.getrusage(resource.RUSAGE_SELF))
        self.assertGreater(u["minflt"], 0)
        self.assertGreaterEqual(u["stime_s"], 0.0)

    def test_rusage_fields_rejects_missing_or_negative(self):
        self.assertRaises(stats.ParseError, stats.rusage_fields, object())
        self.assertRaises(stats.ParseError, stats.rusage_fields, FakeRusage(-1, 0, 0.0, 0.0))

    def test_wait4_of_a_child_counts_its_faults(self):
        # the child writes 4096 fresh pages: at least that many minor faults
        prog = "import mmap; m = mmap.mmap(-1, 4096 * 4096)\nfor i in range(0, len(m), 4096): m[i] = 1"
        proc = subprocess.Popen([sys.executable, "-c", prog])
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.assertEqual(proc.returncode, 0)
        self.assertGreaterEqual(stats.rusage_fields(ru)["minflt"], 4096)

    def test_per_op(self):
        self.assertAlmostEqual(stats.per_op(410755, 500000), 0.82151)
        self.assertRaises(ValueError, stats.per_op, 1, 0)

    def test_fault_summary_medians(self):
        runs = [({"minflt": 100, "majflt": 0, "utime_s": 1.0, "stime_s": 0.1}, 10),
                ({"minflt": 900, "majflt": 1, "utime_s": 3.0, "stime_s": 0.3}, 100),
                ({"minflt": 400, "majflt": 0, "utime_s": 2.0, "stime_s": 0.2}, 10)]
        f = stats.fault_summary(runs)
        # median of the per-run ratios 10, 9, 40 -- not median(minflt)/median(ops)
        self.assertAlmostEqual(f["minflt_per_op"], 10.0)
        self.assertEqual(f["minflt"], 400)
        self.assertEqual(f["majflt"], 0)
        self.assertAlmostEqual(f["stime_s"], 0.2)
        self.assertRaises(ValueError, stats.fault_summary, [])


class TestRunnerSummary(unittest.TestCase):
    """bench/run.py: fault columns in the summary, the table and the CSV."""

    ALLOCS = [("hakmem", "/x/libhakmem.so"), ("mimalloc", "/y/libmimalloc.so.2")]

    def runs(self):
        out = []
        for rep, (h_flt, m_flt) in enumerate(((4000, 100), (5000, 120), (4500, 80))):
            for alloc, flt, secs in (("hakmem", h_flt, 2.0 + rep), ("mimalloc", m_flt, 1.0)):
                f = stats.parse_result_line(HAKMEM_LINE)
                f.update(workload="churn_mixed", ops=1000, seconds=secs, ops_per_sec=1000 / secs)
                out.append(run.Run("churn_mixed", alloc, rep, fields=f, usage={
                    "minflt": flt, "majflt": 0, "utime_s": 0.5, "stime_s": 0.25}))
        out.append(run.Run("churn_mixed", "hakmem", 3, error="timed out"))  # not counted
        return out

    def test_summary_faults_and_ratio(self):
        rows, _ = run.summarize(self.runs(), self.ALLOCS, ["churn_mixed"], {})
        h, m = rows
        self.assertEqual((h["allocator"], m["allocator"]), ("hakmem", "mimalloc"))
        self.assertAlmostEqual(h["minflt_per_op"], 4.5)
        self.assertAlmostEqual(m["minflt_per_op"], 0.1)
        self.assertAlmostEqual(h["faults_ratio_vs_mimalloc"], 45.0)
        self.assertAlmostEqual(m["faults_ratio_vs_mimalloc"], 1.0)
        self.assertAlmostEqual(h["median_seconds"], 3.0)
        self.assertAlmostEqual(h["ratio_vs_mimalloc"], (1000 / 3.0) / 1000.0)
        self.assertEqual(h["failed_runs"], 1)

    def test_geomean_covers_workloads_every_allocator_ran(self):
        out = self.runs()
        # a workload run under hakmem and the baseline only, with a third
        # allocator in the comparison: it has rows, but no say in the means
        allocs = self.ALLOCS + [("tcmalloc", "/z/libtcmalloc.so")]
        for rep in range(3):
            f = stats.parse_result_line(HAKMEM_LINE)
            f.update(workload="churn_mixed", ops=1000, seconds=1.0, ops_per_sec=1000.0)
            out.append(run.Run("churn_mixed", "tcmalloc", rep, fields=f))
            for alloc, secs in (("hakmem", 0.1), ("mimalloc", 1.0)):
                f = stats.parse_result_line(HAKMEM_LINE)
                f.update(workload="arena", ops=1000, seconds=secs, ops_per_sec=1000 / secs)
                out.append(run.Run("arena", alloc, rep, fields=f))
        rows, geo = run.summarize(out, allocs, ["churn_mixed", "arena"], {})
        self.assertIn(("arena", "hakmem"), [(r["workload"], r["allocator"]) for r in rows])
        self.assertEqual(geo["hakmem"][1], 1)
        self.assertAlmostEqual(geo["hakmem"][0], (1000 / 3.0) / 1000.0)
        self.assertEqual(geo["tcmalloc"], (1.0, 1))

    def test_table_and_csv_carry_the_fault_column(self):
        rows, geo = run.summarize(self.runs(), self.ALLOCS, ["churn_mixed"], {})
        text = "\n".join(run.table_lines(rows, geo))
        md = "\n".join(run.table_lines(rows, geo, markdown=True))
        for t in (text, md):
            self.assertIn("minor faults/op", t)
            self.assertIn("faults vs mimalloc", t)
        self.assertIn("| churn_mixed | hakmem |", md)
        self.assertIn("| 4.5 | 45.00 |", md)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "latest.csv")
            run.write_csv(path, rows)
            with open(path) as fh:
                header = fh.readline().strip().split(",")
        for col in ("minflt_per_op", "faults_ratio_vs_mimalloc", "median_seconds", "minflt",
                    "stime_s", "peak_rss_kb"):
            self.assertIn(col, header)

    def test_fmt_faults(self):
        self.assertEqual(run.fmt_faults(None), "-")
        self.assertEqual(run.fmt_faults(1535.4), "1535")
        self.assertEqual(run.fmt_faults(4.5), "4.5")
        self.assertEqual(run.fmt_faults(0.000171), "1.71e-04")


class TestVerdicts(unittest.TestCase):
    """Paired ratios, the sign test's interval of their median, and the
    verdicts bench/run.py prints (hakmem against the faster peer, a
    candidate against hakmem) and repeats rows for."""

    def test_binomial_cdf(self):
        self.assertAlmostEqual(stats.binom_half_cdf(21, 5), 27896 / 2.0 ** 21)
        self.assertEqual(stats.binom_half_cdf(4, 4), 1.0)
        self.assertEqual(stats.binom_half_cdf(4, -1), 0.0)

    def test_median_ci_order_statistics(self):
        xs = list(range(21, 0, -1))            # any order
        self.assertEqual(stats.median_ci(xs, 0.95), (6, 16))
        self.assertEqual(stats.median_ci(xs, 0.98), (5, 17))
        self.assertEqual(stats.median_ci(list(range(1, 11)), 0.98), (1, 10))
        self.assertEqual(stats.median_ci(list(range(1, 21)), 0.98), (5, 16))
        self.assertIsNone(stats.median_ci([1, 2, 3, 4, 5], 0.98))   # 1/32 > 1 %

    def test_paired_ratios_pair_by_repetition(self):
        a = {0: 10.0, 1: 30.0, 3: 8.0}
        b = {0: 5.0, 1: 10.0, 2: 7.0, 3: 0.0}   # rep 2 unpaired, rep 3 divides by 0
        self.assertEqual(stats.paired_ratios(a, b), [2.0, 3.0])

    def test_verdict(self):
        self.assertEqual(stats.verdict((1.01, 1.2)), "ahead")
        self.assertEqual(stats.verdict((0.8, 0.99)), "behind")
        self.assertEqual(stats.verdict((0.9, 1.1)), "level")
        self.assertEqual(stats.verdict(None), "too few runs")

    ALLOCS = [("hakmem", "/x/libhakmem.so"), ("mimalloc", "/y/libmimalloc.so.2"),
              ("tcmalloc", "/z/libtcmalloc.so.4"), ("candidate", "/c/libhakmem.so")]

    def runs(self, n, speed):
        """n repetitions of workload w; speed: allocator -> f(rep) ops/s"""
        out = []
        for rep in range(n):
            for a, _ in self.ALLOCS:
                f = stats.parse_result_line(HAKMEM_LINE)
                f.update(workload="w", ops=1000, ops_per_sec=speed[a](rep))
                out.append(run.Run("w", a, rep, fields=f))
        return out

    def test_comparisons_against_the_faster_peer(self):
        # tcmalloc is the faster peer; the machine's speed drifts 3x over the
        # run, which the pairing cancels: hakmem is 5 % ahead in every rep, the
        # candidate as fast as hakmem, alternately 1 % ahead and behind
        drift = lambda rep: 1.0 + 0.1 * rep
        speed = {"hakmem": lambda r: 105 * drift(r), "tcmalloc": lambda r: 100 * drift(r),
                 "mimalloc": lambda r: 50 * drift(r),
                 "candidate": lambda r: 105 * drift(r) * (1.01 if r % 2 else 0.99)}
        runs = self.runs(20, speed)
        peers = run.best_peers(runs, self.ALLOCS, ["w"])
        self.assertEqual(peers, {"w": "tcmalloc"})
        comps = run.comparisons(runs, self.ALLOCS, ["w"], peers)
        got = dict(((c["allocator"], c["against"]), c) for c in comps)
        self.assertEqual(set(got), {("hakmem", "tcmalloc"), ("candidate", "tcmalloc"),
                                    ("candidate", "hakmem")})
        h = got[("hakmem", "tcmalloc")]
        self.assertEqual((h["reps"], h["verdict"]), (20, "ahead"))
        self.assertAlmostEqual(h["ratio"], 1.05)
        self.assertEqual(got[("candidate", "hakmem")]["verdict"], "level")
        self.assertEqual(run.undecided(comps), {"w": {"candidate", "hakmem"}})
        rows, _ = run.summarize(runs, self.ALLOCS, ["w"], {})
        run.add_verdicts(rows, comps)
        byname = dict((r["allocator"], r) for r in rows)
        self.assertEqual((byname["hakmem"]["verdict_against"], byname["hakmem"]["verdict"]),
                         ("tcmalloc", "ahead"))
        self.assertEqual(byname["candidate"]["verdict_against"], "hakmem")
        self.assertNotIn("verdict", byname["tcmalloc"])
        text = "\n".join(run.verdict_lines(comps))
        self.assertIn("hakmem    vs tcmalloc   20 reps  1.050", text)
        self.assertIn("| w | candidate | hakmem | 20 |", "\n".join(run.verdict_lines(comps, True)))

    def test_one_slow_run_moves_a_verdict_by_one_rank(self):
        # hakmem 2 % behind in 19 of 20 reps, 3x ahead in one (a peer's run
        # that the machine slowed down): still behind
        speed = {"hakmem": lambda r: 98.0 if r != 7 else 300.0, "tcmalloc": lambda r: 100.0,
                 "mimalloc": lambda r: 50.0, "candidate": lambda r: 98.0}
        runs = self.runs(20, speed)
        comps = run.comparisons(runs, self.ALLOCS, ["w"], run.best_peers(runs, self.ALLOCS, ["w"]))
        self.assertEqual([c["verdict"] for c in comps if c["allocator"] == "hakmem"], ["behind"])

    def test_too_few_runs_is_no_verdict(self):
        speed = {"hakmem": lambda r: 200.0, "tcmalloc": lambda r: 100.0,
                 "mimalloc": lambda r: 50.0, "candidate": lambda r: 200.0}
        runs = self.runs(5, speed)
        comps = run.comparisons(runs, self.ALLOCS, ["w"], run.best_peers(runs, self.ALLOCS, ["w"]))
        self.assertEqual(set(c["verdict"] for c in comps), {"too few runs"})
        self.assertIn("w", run.undecided(comps))


class TestRunnerOutputs(unittest.TestCase):
    def test_default_out_dir_is_ignored_by_git(self):
        # make bench must leave the git tree clean: its results go under build/
        rel = os.path.relpath(run.DEFAULT_OUT_DIR, run.ROOT)
        self.assertTrue(rel.startswith("build" + os.sep), rel)
        if not os.path.isdir(os.path.join(run.ROOT, ".git")) and \
                not os.path.isfile(os.path.join(run.ROOT, ".git")):
            self.skipTest("not a git checkout")
        r = subprocess.run(["git", "-C", run.ROOT, "check-ignore", "-q",
                            os.path.join(rel, "latest.md")])
        self.assertEqual(r.returncode, 0, "%s is not ignored by git" % rel)
        self.assertEqual(os.path.relpath(run.SNAPSHOT_DIR, run.ROOT), "results")

    def test_snapshot_copies_and_refuses_without_results(self):
        with tempfile.TemporaryDirectory() as d:
            src, dst = os.path.join(d, "src"), os.path.join(d, "dst")
            os.makedirs(src)
            quiet = io.StringIO()
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                self.assertEqual(run.snapshot(src, dst), 2)  # nothing to copy
            self.assertIn("no results to snapshot", quiet.getvalue())
            self.assertFalse(os.path.exists(dst))
            for f in run.SNAPSHOT_FILES:
                with open(os.path.join(src, f), "w") as fh:
                    fh.write("Profile `full`, %s\n" % f)
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                self.assertEqual(run.snapshot(src, dst), 0)
            for f in run.SNAPSHOT_FILES:
                with open(os.path.join(dst, f)) as fh:
                    self.assertEqual(fh.read(), "Profile `full`, %s\n" % f)


class TestFewRepetitions(unittest.TestCase):
    """QUICK's 3 repetitions: the t interval of the paired ratios' geometric
    mean (bench/stats.py geomean_ci), used by the final reading of a run
    where the sign test has too few ratios; one line when there is none."""

    ALLOCS = TestVerdicts.ALLOCS

    def test_t_quantile_matches_the_tables(self):
        for p, df, want in ((0.99, 2, 6.964557), (0.99, 3, 4.540703), (0.99, 4, 3.746947),
                            (0.975, 10, 2.228139), (0.995, 1, 63.656741)):
            self.assertAlmostEqual(stats.t_quantile(p, df), want, places=4)
        self.assertRaises(ValueError, stats.t_quantile, 0.4, 3)

    def test_t_cdf(self):
        self.assertEqual(stats.t_cdf(0.0, 3), 0.5)
        self.assertAlmostEqual(stats.t_cdf(6.964557, 2), 0.99, places=6)
        self.assertAlmostEqual(stats.t_cdf(-1.5, 4) + stats.t_cdf(1.5, 4), 1.0, places=9)
        # df = 1 is the Cauchy distribution: 1/2 + atan(t)/pi
        self.assertAlmostEqual(stats.t_cdf(2.0, 1), 0.5 + math.atan(2.0) / math.pi, places=8)

    def test_geomean_ci_known_value(self):
        xs = [1.1, 1.2, 1.3]
        logs = [math.log(x) for x in xs]
        m = sum(logs) / 3
        sd = math.sqrt(sum((v - m) ** 2 for v in logs) / 2)
        half = 6.964557 * sd / math.sqrt(3)          # t(0.99, 2 df), from a table
        lo, hi = stats.geomean_ci(xs, 0.98)
        self.assertAlmostEqual(lo, math.exp(m - half), places=5)
        self.assertAlmostEqual(hi, math.exp(m + half), places=5)
        self.assertIsNone(stats.geomean_ci([1.1, 1.2], 0.98))
        self.assertEqual(stats.geomean_ci([1.5, 1.5, 1.5], 0.98), (1.5, 1.5))

    def test_false_verdicts_of_a_level_pair_stay_near_two_percent(self):
        # A/A: two equal allocators, log-normal noise of 10 % per run, 3
        # repetitions, 20,000 times: the 98 % interval excludes 1 in ~2 %
        import random
        rnd = random.Random(38)
        n, wrong = 20000, 0
        for _ in range(n):
            rs = [math.exp(rnd.gauss(0, 0.1) - rnd.gauss(0, 0.1)) for _ in range(3)]
            wrong += stats.verdict(stats.geomean_ci(rs, 0.98)) != "level"
        self.assertTrue(0.014 < wrong / n < 0.026, "false verdicts: %.2f %%" % (100.0 * wrong / n))

    def runs(self, ratios):
        speed = {"hakmem": lambda r: 100.0 * ratios[r], "tcmalloc": lambda r: 100.0,
                 "mimalloc": lambda r: 50.0, "candidate": lambda r: 100.0 * ratios[r]}
        return TestVerdicts.runs(TestVerdicts(), len(ratios), speed)

    def verdicts(self, ratios, few=True):
        rs = self.runs(ratios)
        comps = run.comparisons(rs, self.ALLOCS, ["w"], run.best_peers(rs, self.ALLOCS, ["w"]),
                                few=few)
        return dict(((c["allocator"], c["against"]), c) for c in comps)

    def test_quick_gives_a_verdict_where_the_difference_is_large(self):
        got = self.verdicts([1.30, 1.25, 1.33])
        h = got[("hakmem", "tcmalloc")]
        self.assertEqual((h["reps"], h["method"], h["verdict"]), (3, "t", "ahead"))
        self.assertAlmostEqual(h["ratio"], stats.geomean([1.30, 1.25, 1.33]))
        self.assertEqual(got[("candidate", "hakmem")]["verdict"], "level")  # the same speed
        self.assertEqual(self.verdicts([0.70, 0.72, 0.69])[("hakmem", "tcmalloc")]["verdict"],
                         "behind")
        # the loop of --until-verdict does not take it: it runs more repetitions
        h = self.verdicts([1.30, 1.25, 1.33], few=False)[("hakmem", "tcmalloc")]
        self.assertEqual((h["method"], h["verdict"]), ("-", "too few runs"))

    def test_quick_level_where_the_noise_hides_the_difference(self):
        h = self.verdicts([1.30, 0.85, 1.10])[("hakmem", "tcmalloc")]
        self.assertEqual((h["method"], h["verdict"]), ("t", "level"))

    def test_the_sign_test_from_seven_repetitions(self):
        self.assertEqual(run.SIGN_MIN_REPS, 7)      # at 98 %: 1/64 > 1 % with 6
        h = self.verdicts([1.30, 1.25, 1.33, 1.28, 1.31, 1.27])[("hakmem", "tcmalloc")]
        self.assertEqual((h["method"], h["verdict"]), ("t", "ahead"))
        h = self.verdicts([1.30, 1.25, 1.33, 1.28, 1.31, 1.27, 1.29])[("hakmem", "tcmalloc")]
        self.assertEqual((h["method"], h["verdict"]), ("sign", "ahead"))

    def test_one_line_when_no_comparison_has_a_verdict(self):
        rs = self.runs([1.3, 1.3])
        comps = run.comparisons(rs, self.ALLOCS, ["w", "v"], run.best_peers(rs, self.ALLOCS, ["w"]),
                                few=True)
        self.assertEqual(run.verdict_lines(comps),
                         ["Verdicts: none: 2 paired repetitions, and a verdict needs 3 "
                          "(docs/benchmarks.md)."])

    def test_verdict_lines_fit_100_columns(self):
        comps = [{"workload": "request_arena_destroy", "allocator": "candidate",
                  "against": "mimalloc3", "reps": 20, "ratio": 1.234, "ci": (0.5123, 12.345),
                  "method": "sign", "verdict": "behind"},
                 {"workload": "w", "allocator": "hakmem", "against": "tcmalloc", "reps": 3,
                  "ratio": 1.2, "ci": None, "method": "-", "verdict": "too few runs"}]
        lines = run.verdict_lines(comps)
        self.assertEqual(len(lines), 5)
        self.assertTrue(all(len(x) <= 100 for x in lines), [len(x) for x in lines])
        self.assertIn("| request_arena_destroy | candidate | mimalloc3 | 20 | 1.234 | "
                      "[0.512, 12.345] | sign | behind |", "\n".join(run.verdict_lines(comps, True)))


class TestVersions(unittest.TestCase):
    """Each allocator's version (table, CSVs, chart): Debian packages through
    dpkg-query, hakmem from its source tree, PEERS from NAME@VERSION or the
    file name."""

    def test_version_from_file_name(self):
        with tempfile.TemporaryDirectory() as d:
            real = os.path.join(d, "libmimalloc.so.3.4")
            open(real, "w").close()
            os.symlink("libmimalloc.so.3.4", os.path.join(d, "libmimalloc.so"))
            self.assertEqual(run.version_from_file_name(os.path.join(d, "libmimalloc.so")), "3.4")
            rp = os.path.join(d, "librpmalloc-1.4.5.so")
            open(rp, "w").close()
            self.assertEqual(run.version_from_file_name(rp), "1.4.5")
            sn = os.path.join(d, "libsnmallocshim.so")
            open(sn, "w").close()
            self.assertIsNone(run.version_from_file_name(sn))

    def test_peers_take_name_at_version(self):
        with tempfile.TemporaryDirectory() as d:
            lib = os.path.join(d, "libsnmallocshim.so")
            with open(lib, "wb") as f:
                f.write(b"\x7fELF" + b"\0" * 60)
            versions = {}
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                got = run.parse_peers(["sn@0.7.5=%s plain=%s" % (lib, lib)], ["hakmem"], versions)
            self.assertEqual(got, [("sn", lib), ("plain", lib)])
            self.assertEqual(versions, {"sn": "0.7.5", "plain": None})
            with contextlib.redirect_stderr(err):
                self.assertRaises(SystemExit, run.parse_peers, ["sn@=%s" % lib], [], {})
            self.assertIn("the version '' may hold only", err.getvalue())

    def test_allocator_versions(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "include"))
            os.makedirs(os.path.join(d, "build", "hardened"))
            with open(os.path.join(d, "include", "hakmem.h"), "w") as f:
                f.write('#define HAKMEM_VERSION_STRING "9.8.7"\n')
            hk = os.path.join(d, "build", "libhakmem.so")
            cand = os.path.join(d, "build", "hardened", "libhakmem.so")
            peer = os.path.join(d, "libfoo.so.1.2")
            saved = run.dpkg_version
            asked = []
            run.dpkg_version = lambda pkg: asked.append(pkg) or {"libc6": "2.36-9",
                                                                  "libmimalloc2.0": "2.0.9+ds-2"}.get(pkg)
            try:
                got = run.allocator_versions(
                    [("hakmem", hk), ("glibc", None), ("mimalloc", "/x/libmimalloc.so.2"),
                     ("tcmalloc", "/x/libtcmalloc_minimal.so.4"), ("candidate", cand),
                     ("foo", peer), ("bar", "/nowhere/libbar.so")], {"foo": None, "bar": "1.0"})
            finally:
                run.dpkg_version = saved
        self.assertEqual(got, {"hakmem": "9.8.7", "glibc": "2.36-9", "mimalloc": "2.0.9+ds-2",
                               "tcmalloc": "unknown", "candidate": "9.8.7", "foo": "1.2",
                               "bar": "1.0"})
        self.assertEqual(sorted(asked), ["libc6", "libmimalloc2.0", "libtcmalloc-minimal4"])

    def test_this_machine(self):
        if not shutil.which("dpkg-query"):
            self.skipTest("no dpkg-query")
        self.assertTrue(run.dpkg_version("libc6").startswith("2."))
        self.assertIsNone(run.dpkg_version("no-such-package-hakmem"))
        hdr = open(os.path.join(run.ROOT, "include", "hakmem.h")).read()
        want = re.search(r'HAKMEM_VERSION_STRING "([^"]+)"', hdr).group(1)
        got = run.hakmem_version(os.path.join(run.ROOT, "build", "libhakmem.so"))
        self.assertTrue(got == want or got.startswith(want + "+"), got)


class TestCompactTable(unittest.TestCase):
    """make bench's table on stdout: at most 100 columns, versions named; the
    full table (every column, a version column) in latest.md."""

    VERSIONS = {"hakmem": "0.1.0+e3f0e9c", "glibc": "2.36-9+deb12u14",
                "mimalloc": "2.0.9+ds-2", "jemalloc": "5.3.0-1", "tcmalloc": "2.10-1"}

    def rows(self, allocs, workloads=("request_arena_destroy", "random_mixed")):
        out = []
        for wl in workloads:
            for rep in range(3):
                for i, a in enumerate(allocs):
                    f = stats.parse_result_line(HAKMEM_LINE)
                    f.update(workload=wl, ops=1000000, seconds=0.01,
                             ops_per_sec=123456789.0 * (i + 1) * (1 + rep / 10.0),
                             peak_rss_kb=300000 + 1000 * rep)
                    out.append(run.Run(wl, a, rep, fields=f, usage={
                        "minflt": 171, "majflt": 0, "utime_s": 0.5, "stime_s": 0.25}))
        out.append(run.Run(workloads[0], allocs[0], 3, error="timed out"))
        sysc = dict(((wl, a), ({"mmap": 12345, "munmap": 0, "madvise": 0, "mremap": 0, "brk": 0},
                               1000)) for wl in workloads for a in allocs)
        return run.summarize(out, [(a, None) for a in allocs], list(workloads), sysc)

    def test_fits_100_columns_with_the_versions(self):
        rows, geo = self.rows(list(self.VERSIONS))
        lines = run.compact_table_lines(rows, geo, self.VERSIONS,
                                        full_table="/work/x/build/bench/results/latest.md")
        self.assertTrue(all(len(x) <= 100 for x in lines), max(len(x) for x in lines))
        text = "\n".join(lines)
        for a, v in self.VERSIONS.items():
            self.assertRegex(text, r"\nrandom_mixed +%s %s +" % (a, re.escape(v)))
        self.assertIn("FAILED runs (workload/allocator count): request_arena_destroy/hakmem 1", text)
        self.assertIn("latest.md", text)
        self.assertIn("Geometric mean of throughput ratio vs mimalloc:", text)
        self.assertIn("\n  hakmem    ", text)

    def test_versions_on_a_line_of_their_own_when_too_wide(self):
        versions = dict(self.VERSIONS, mimalloc3="3.4.3-built-from-the-release-tag-with-MI_SECURE")
        rows, geo = self.rows(list(versions))
        lines = run.compact_table_lines(rows, geo, versions)
        self.assertTrue(all(len(x) <= 100 for x in lines), max(len(x) for x in lines))
        self.assertTrue(lines[0].startswith("versions: hakmem 0.1.0+e3f0e9c, glibc"), lines[0])
        self.assertIn("mimalloc3 3.4.3-built-from-the-release-tag-with-MI_SECURE",
                      " ".join(x.strip() for x in lines[:3]))
        self.assertRegex("\n".join(lines), r"\nrandom_mixed +mimalloc3 +\d")

    def test_full_table_has_a_version_column(self):
        rows, geo = self.rows(["hakmem", "mimalloc"])
        md = run.table_lines(rows, geo, markdown=True, versions=self.VERSIONS)
        self.assertEqual(md[0].split(" | ")[:3], ["| workload", "allocator", "version"])
        self.assertIn("| random_mixed | mimalloc | 2.0.9+ds-2 | ", "\n".join(md))


class TestChart(unittest.TestCase):
    """The chart's data: versions in the legend, error bars from the
    repetitions, a second panel of peak RSS."""

    def test_series(self):
        allocs = [("hakmem", None), ("mimalloc", None)]
        out = []
        for rep, (h, m, rss) in enumerate(((150.0, 100.0, 2048), (100.0, 90.0, 4096),
                                           (120.0, 110.0, 1024))):
            for a, tput in (("hakmem", h), ("mimalloc", m)):
                f = stats.parse_result_line(HAKMEM_LINE)
                f.update(workload="w", ops_per_sec=tput, peak_rss_kb=rss)
                out.append(run.Run("w", a, rep, fields=f))
        rows, geo = run.summarize(out, allocs, ["w"], {})
        ser = run.chart_series(rows, geo, allocs, ["w"], {"hakmem": "0.1.0", "mimalloc": "2.0.9"})
        h, m = ser
        self.assertEqual((h["label"], m["label"]), ("hakmem 0.1.0", "mimalloc 2.0.9"))
        # medians 120 / 100: ratio 1.2; reps 100..150 -> 1.0..1.5
        self.assertAlmostEqual(h["ratio"][0], 1.2)
        self.assertAlmostEqual(h["ratio_err"][0][0], 0.2)
        self.assertAlmostEqual(h["ratio_err"][1][0], 0.3)
        self.assertAlmostEqual(m["ratio_err"][0][0], 0.1)     # mimalloc's own spread: 90..110
        self.assertAlmostEqual(m["ratio_err"][1][0], 0.1)
        self.assertEqual(len(h["ratio"]), 2)                  # the workload and GEOMEAN
        self.assertEqual((h["ratio_err"][0][1], h["ratio_err"][1][1]), (0.0, 0.0))
        self.assertEqual(h["rss_mb"], [2.0])
        self.assertEqual((h["rss_err"][0][0], h["rss_err"][1][0]), (1.0, 2.0))

    def test_png(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("python3-matplotlib missing")
        rows, geo = TestCompactTable.rows(TestCompactTable(), ["hakmem", "mimalloc"])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.png")
            self.assertTrue(run.write_chart(path, rows, geo, [("hakmem", None), ("mimalloc", None)],
                                            ["request_arena_destroy", "random_mixed"], "t",
                                            {"hakmem": "0.1.0"}))
            with open(path, "rb") as f:
                self.assertEqual(f.read(4), b"\x89PNG")


class _PassFailResult(unittest.TestResult):
    """Prints PASS/FAIL/SKIP lines in the suite format."""

    @staticmethod
    def _name(test):
        return "bench_stats." + test.id().split(".")[-2] + "." + test.id().split(".")[-1]

    @staticmethod
    def _reason(err):
        return str(err[1]).replace("\n", " ")[:200]

    def addSuccess(self, test):
        super().addSuccess(test)
        print("PASS %s" % self._name(test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        print("FAIL %s: %s" % (self._name(test), self._reason(err)))

    def addError(self, test, err):
        super().addError(test, err)
        print("FAIL %s: error: %s" % (self._name(test), self._reason(err)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        print("SKIP %s: %s" % (self._name(test), reason))


if __name__ == "__main__":
    if "--pass-fail" in sys.argv:
        suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
        result = _PassFailResult()
        suite.run(result)
        sys.exit(0 if result.wasSuccessful() else 1)
    unittest.main()
