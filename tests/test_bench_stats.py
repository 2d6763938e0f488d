"""Unit tests for bench/stats.py (statistics, RESULT parsing, allocator proof).

Run:  /usr/bin/python3 tests/test_bench_stats.py            (plain unittest)
      /usr/bin/python3 tests/test_bench_stats.py --pass-fail (one PASS/FAIL/SKIP
                                                              line per test, for
                                                              tests/suite_bench.sh)
"""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import stats  # noqa: E402

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
