"""Statistics, parsing and allocator-proof checks for the hakmem benchmarks.

Used by bench/run.py and tests/test_bench_stats.py.  Pure functions only (no
process handling; check_peer_proof resolves symbolic links), so everything
here is unit-testable.

Command line (used by tests/suite_bench.sh):
    python3 bench/stats.py check ALLOCATOR [FILE]
reads a workload's output (FILE or stdin), parses its RESULT line and checks
the allocator proof for ALLOCATOR (or, written NAME=LIBRARY, for a library
given with PEERS); prints "OK ..." and exits 0, or prints
"PROOF FAILED ..." / "PARSE FAILED ..." and exits 1.
"""

import functools
import math
import os
import re
import sys

# Syscalls counted by the strace run.  The first four are the mmap family the
# report's "syscalls/op" column adds up; brk is kept separately (glibc grows
# its main heap with brk, so leaving it out would flatter glibc).
MMAP_FAMILY = ("mmap", "munmap", "madvise", "mremap")
TRACED_SYSCALLS = MMAP_FAMILY + ("brk",)

# allocator name -> (regex the basename of the malloc-providing object must
# match, required hakmem_owned value)
#   hakmem: must be libhakmem*.so* AND hakmem_owns() must claim a fresh block;
#   others: must be their own library and have no hakmem_owns symbol (-1).
PROOF_RULES = {
    "hakmem": (r"^libhakmem[\w.-]*\.so(\.[\w.]+)?$", 1),
    "glibc": (r"^libc\.so(\.\d+)*$", -1),
    "mimalloc": (r"^libmimalloc[\w.-]*\.so(\.[\w.]+)?$", -1),
    "jemalloc": (r"^libjemalloc[\w.-]*\.so(\.[\w.]+)?$", -1),
    "tcmalloc": (r"^libtcmalloc[\w.-]*\.so(\.[\w.]+)?$", -1),
}


class ParseError(ValueError):
    """The output has no (or more than one) well-formed RESULT line."""


class ProofError(ValueError):
    """The run was not served by the allocator it was meant to measure."""


def _convert(value):
    for conv in (int, float):
        try:
            return conv(value)
        except ValueError:
            pass
    return value


def parse_result_line(line):
    """Parse one 'RESULT key=value ...' line into a dict (numbers converted)."""
    line = line.strip()
    if not line.startswith("RESULT "):
        raise ParseError("not a RESULT line: %r" % line[:80])
    fields = {}
    for tok in line.split()[1:]:
        if "=" not in tok:
            raise ParseError("malformed field %r" % tok)
        key, value = tok.split("=", 1)
        if not key:
            raise ParseError("empty key in %r" % tok)
        fields[key] = _convert(value)
    for key in ("workload", "ops", "seconds", "ops_per_sec", "allocator", "hakmem_owned"):
        if key not in fields:
            raise ParseError("RESULT line lacks %s" % key)
    if not isinstance(fields["ops"], int) or fields["ops"] <= 0:
        raise ParseError("ops must be a positive integer, got %r" % fields["ops"])
    if not isinstance(fields["seconds"], (int, float)) or fields["seconds"] <= 0:
        raise ParseError("seconds must be positive, got %r" % fields["seconds"])
    return fields


def parse_output(text):
    """Find exactly one RESULT line in a workload's stdout and parse it."""
    lines = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise ParseError("no RESULT line in output")
    if len(lines) > 1:
        raise ParseError("%d RESULT lines in output (expected one)" % len(lines))
    return parse_result_line(lines[0])


def check_proof(expected, fields):
    """Raise ProofError unless `fields` (a parsed RESULT) shows that the
    allocator named `expected` provided malloc for the run."""
    if expected not in PROOF_RULES:
        raise ProofError("unknown allocator %r" % expected)
    pattern, owned = PROOF_RULES[expected]
    path = str(fields.get("allocator", ""))
    base = os.path.basename(path)
    if not re.match(pattern, base):
        raise ProofError(
            "expected %s but malloc was provided by %s (preload did not take effect?)"
            % (expected, path or "<unknown>"))
    foreign = fields.get("foreign_samples", 0)
    if isinstance(foreign, int) and foreign > 0:
        raise ProofError("%d block(s) sampled from the workload were not served by the "
                         "expected allocator (foreign_samples=%d)" % (foreign, foreign))
    got = fields.get("hakmem_owned")
    if got != owned:
        if expected == "hakmem":
            raise ProofError("malloc comes from %s but hakmem_owns() on a fresh block "
                             "returned %r (expected 1)" % (path, got))
        raise ProofError("expected %s but hakmem_owns is present (hakmem_owned=%r)"
                         % (expected, got))


def check_peer_proof(name, lib, fields):
    """Raise ProofError unless `fields` (a parsed RESULT) shows that the
    library `lib` of a PEERS entry `name` provided malloc for the run: the
    shared object defining malloc (RESULT's allocator=, from dladdr) must be
    that very file (compared after resolving symbolic links), and no sampled
    workload block may be foreign.  hakmem_owned must be -1 (no hakmem in the
    process) or 1 (the peer is itself a hakmem build and owns its blocks); 0
    means hakmem is loaded but did not serve the run."""
    path = str(fields.get("allocator", ""))
    if not path or path == "unknown" or (
            os.path.realpath(path) != os.path.realpath(lib)):
        raise ProofError(
            "expected %s (%s) but malloc was provided by %s (preload did not take effect?)"
            % (name, lib, path or "<unknown>"))
    foreign = fields.get("foreign_samples", 0)
    if isinstance(foreign, int) and foreign > 0:
        raise ProofError("%d block(s) sampled from the workload were not served by the "
                         "expected allocator (foreign_samples=%d)" % (foreign, foreign))
    got = fields.get("hakmem_owned")
    if got not in (-1, 1):
        raise ProofError("malloc comes from %s but hakmem_owns is present and did not claim "
                         "a fresh block (hakmem_owned=%r)" % (path, got))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        raise ValueError("median of empty sequence")
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def mean(xs):
    if not xs:
        raise ValueError("mean of empty sequence")
    return sum(xs) / float(len(xs))


def cv(xs):
    """Coefficient of variation: sample standard deviation / mean (0 for n < 2)."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    if m == 0:
        return 0.0
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return math.sqrt(var) / abs(m)


def geomean(xs):
    xs = list(xs)
    if not xs:
        raise ValueError("geomean of empty sequence")
    if any(x <= 0 for x in xs):
        raise ValueError("geomean needs positive values")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def ratio(value, baseline):
    """value / baseline, or None when either is missing or baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / float(baseline)


# ---- paired comparisons: is one allocator faster than another? ----
# Runs are interleaved (every allocator once per repetition, one after the
# other), so the ratio of two allocators' throughputs within a repetition
# cancels most of a shared machine's drift.  The verdict rests on the median
# of those per-repetition ratios and a distribution-free confidence interval
# for it (the sign test's order statistics): no assumption about the shape of
# the noise, and a single wild run moves it by one rank at most.

def binom_half_cdf(n, k):
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, j) for j in range(min(k, n) + 1)) / float(2 ** n)


def median_ci(xs, level):
    """(lo, hi): a confidence interval of at least `level` for the median of
    the population xs was drawn from -- the k-th smallest and the k-th
    largest value, k the largest with P(Bin(n, 1/2) < k) <= (1 - level) / 2.
    None when n is too small for that level (n = 5 at 0.98, for one)."""
    xs = sorted(xs)
    n = len(xs)
    k = 0
    while binom_half_cdf(n, k) <= (1.0 - level) / 2.0:
        k += 1
    if k == 0:
        return None
    return xs[k - 1], xs[n - k]


# ---- few repetitions (QUICK's 3): Student's t on the logarithms ----
# The sign test above needs 6 paired ratios for a 98 % interval.  With 3 to
# 5 (make bench QUICK=1 makes 3), the runner falls back on the t interval of
# the mean of log(ratio) -- the geometric mean of the ratios -- which assumes
# that the logarithms of the paired ratios are roughly normal.  With n = 3 at
# 98 % the interval is mean +- 6.96 s / sqrt(3), so it excludes 1 only when
# the difference is about 4 standard deviations of the ratios or more (and
# then all three ratios lie on the same side of 1).

def _t_pdf(t, df):
    c = math.exp(math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0)) / math.sqrt(df * math.pi)
    return c * (1.0 + t * t / df) ** (-(df + 1) / 2.0)


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom (Simpson's rule on
    the density after the substitution t = tan(u), which maps the whole line
    to (-pi/2, pi/2); accurate to ~1e-10 for df >= 1)."""
    if t == 0:
        return 0.5
    u_end = math.atan(abs(t))
    steps = 2000
    h = u_end / steps
    f = lambda u: _t_pdf(math.tan(u), df) / math.cos(u) ** 2
    acc = f(0.0) + f(u_end)
    for i in range(1, steps):
        acc += (4 if i % 2 else 2) * f(i * h)
    half = acc * h / 3.0
    return 0.5 + half if t > 0 else 0.5 - half


@functools.lru_cache(maxsize=None)
def t_quantile(p, df):
    """The t with P(T <= t) = p (0.5 < p < 1), by bisection on t_cdf
    (remembered: the runner asks for a handful of (p, df) pairs)."""
    if not 0.5 < p < 1.0:
        raise ValueError("t_quantile wants 0.5 < p < 1")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


# the fewest paired ratios the t interval is used with: at 2 the sample
# standard deviation has one degree of freedom and t(0.99, 1) = 31.8
T_MIN_REPS = 3


def geomean_ci(xs, level):
    """(lo, hi): the `level` t interval of the geometric mean of the positive
    ratios xs (the mean of their logarithms, back-transformed); None with
    fewer than T_MIN_REPS values."""
    n = len(xs)
    if n < T_MIN_REPS:
        return None
    logs = [math.log(x) for x in xs]
    m = mean(logs)
    sd = math.sqrt(sum((v - m) ** 2 for v in logs) / (n - 1))
    half = t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * sd / math.sqrt(n)
    return math.exp(m - half), math.exp(m + half)


def paired_ratios(a, b):
    """[a[r] / b[r]] for the repetitions r both have (dicts rep -> value)."""
    return [a[r] / float(b[r]) for r in sorted(set(a) & set(b)) if b[r]]


def verdict(ci):
    """'ahead' when the interval of the ratio lies above 1, 'behind' when
    below, 'level' when it holds 1 (no difference the runs can show), and
    'too few runs' without an interval."""
    if ci is None:
        return "too few runs"
    lo, hi = ci
    return "ahead" if lo > 1.0 else "behind" if hi < 1.0 else "level"


_STRACE_ROW = re.compile(
    r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(?P<calls>\d+)\s+(?:(?P<errors>\d+)\s+)?(?P<name>\w+)\s*$")


def parse_strace_summary(text):
    """Parse `strace -c` summary output into {syscall: calls}.

    Every syscall in TRACED_SYSCALLS is present in the result (0 when strace
    did not list it).  The 'total' row is ignored."""
    counts = dict((name, 0) for name in TRACED_SYSCALLS)
    seen_header = False
    for line in text.splitlines():
        if line.lstrip().startswith("% time"):
            seen_header = True
            continue
        m = _STRACE_ROW.match(line)
        if m and m.group("name") != "total":
            counts[m.group("name")] = counts.get(m.group("name"), 0) + int(m.group("calls"))
    if not seen_header:
        raise ParseError("no strace -c summary table found")
    return counts


def syscalls_per_op(counts, ops, names=MMAP_FAMILY):
    if ops <= 0:
        raise ValueError("ops must be positive")
    return sum(counts.get(n, 0) for n in names) / float(ops)


# Resource usage of a finished child (os.wait4 / resource.getrusage): the
# fields the runner keeps.  Page faults are counted for the whole process,
# all its threads, from exec to exit (start-up included: the dynamic loader
# and libc take ~100 minor faults, the same under every allocator).
RUSAGE_FIELDS = (("minflt", "ru_minflt", int), ("majflt", "ru_majflt", int),
                 ("utime_s", "ru_utime", float), ("stime_s", "ru_stime", float))


def rusage_fields(ru):
    """{minflt, majflt, utime_s, stime_s} from a struct rusage-like object
    (os.wait4's third value, resource.getrusage()); raises ParseError if a
    field is missing or negative."""
    out = {}
    for key, attr, conv in RUSAGE_FIELDS:
        value = getattr(ru, attr, None)
        if value is None:
            raise ParseError("rusage lacks %s" % attr)
        value = conv(value)
        if value < 0:
            raise ParseError("rusage %s is negative (%r)" % (attr, value))
        out[key] = value
    return out


def per_op(count, ops):
    if ops <= 0:
        raise ValueError("ops must be positive")
    return count / float(ops)


def fault_summary(usages_and_ops):
    """Medians over the repetitions of one workload x allocator.
    usages_and_ops: [(rusage_fields dict, ops)].  Returns minflt_per_op (the
    median of the per-run ratios), minflt, majflt, utime_s and stime_s."""
    pairs = list(usages_and_ops)
    if not pairs:
        raise ValueError("fault_summary of no runs")
    out = {"minflt_per_op": median([per_op(u["minflt"], ops) for u, ops in pairs])}
    for key, _, _ in RUSAGE_FIELDS:
        out[key] = median([u[key] for u, _ in pairs])
    return out


def _main(argv):
    if len(argv) < 3 or argv[1] != "check":
        sys.stderr.write("usage: stats.py check ALLOCATOR [FILE]\n")
        return 2
    expected = argv[2]
    text = open(argv[3]).read() if len(argv) > 3 else sys.stdin.read()
    try:
        fields = parse_output(text)
    except ParseError as e:
        print("PARSE FAILED: %s" % e)
        return 1
    try:
        if "=" in expected:  # NAME=LIBRARY: a PEERS entry
            check_peer_proof(*expected.split("=", 1), fields=fields)
        else:
            check_proof(expected, fields)
    except ProofError as e:
        print("PROOF FAILED: %s" % e)
        return 1
    print("OK %s served workload=%s (allocator=%s hakmem_owned=%s)"
          % (expected, fields["workload"], fields["allocator"], fields["hakmem_owned"]))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
