#!/usr/bin/python3
"""tools/layer-check.py -- check that hakmem's code obeys its layers (issue 24).

The layers, the hook tables and the known upward calls are in one table,
tools/layers.tsv (its header says what each row means).  From the built
objects this derives the file-level call graph: nm lists each object's
undefined symbols; one that another object defines as a function (nm type T
or W) is a call of that function (or its address taken) -- references to
data (hak_opt, hak_tls.heap, hak_counters, ...) are not calls, and the static
inline functions of src/hak_internal.h compiled into an object are that
object's own.  Several object directories (release, debug, stats) may be
given: their calls are merged.  Then, one PASS or FAIL line each:

  layers.table                 every src/*.c and every object has exactly one
                               layer row; header rows name existing headers
  layers.no_new_upward_calls   every call into a higher layer is a listed
                               known upward call
  layers.exceptions_current    every listed known upward call still exists
                               (so that the list only shrinks)
  layers.hook_tables           the function-pointer variables defined in src/
                               (from the objects' DWARF, readelf) are exactly
                               the hook and plain rows, each in its file
  layers.design_picture        docs/design.md's layer picture is the block
                               --picture prints

Usage:
  tools/layer-check.py [--table T] [--doc D] [--src DIR] [OBJDIR...]
                           check (default OBJDIR: build/obj); exit 1 on a FAIL
  tools/layer-check.py --picture          print the picture block
  tools/layer-check.py --update-doc       rewrite the block in docs/design.md
  tools/layer-check.py --calls [OBJDIR..] print every cross-file call with the
                                          caller's and callee's layers
  tools/layer-check.py --measure ORDER [OBJDIR..]
                           count the upward calls under another order of the
                           same layers, e.g. "entry points,profiles,pages,heaps,
                           segments,support,platform" (a layer may be written
                           "a+b" to merge two)
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = '<!-- layers: generated from tools/layers.tsv by tools/layer-check.py --update-doc; do not edit by hand -->'


def rel(path):
    r = os.path.relpath(path, ROOT)
    return path if r.startswith('..') else r


class Table:
    def __init__(self, path):
        self.path = path
        self.layers = []          # layer names, top to bottom
        self.rows = []            # (layer, file, text) for layer and header rows, in order
        self.file_layer = {}      # 'hak_alloc' -> layer index (.c rows)
        self.hooks = {}           # variable -> (file stem, text)
        self.plain = {}           # variable -> (file stem, text)
        self.upward = {}          # (caller stem, function) -> note
        self.errors = []
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip('\n')
                if not line.strip() or line.lstrip().startswith('#'):
                    continue
                cols = line.split('\t')
                where = '%s:%d' % (rel(path), n)
                if len(cols) != 4 or not all(c.strip() for c in cols):
                    self.errors.append('%s: want 4 TAB-separated columns: %r' % (where, line))
                    continue
                kind, a, b, text = (c.strip() for c in cols)
                if kind in ('layer', 'header'):
                    if a not in self.layers:
                        self.layers.append(a)
                    elif self.layers[-1] != a:
                        self.errors.append('%s: rows of layer %r are not together' % (where, a))
                    self.rows.append((a, b, text))
                    if kind == 'layer':
                        if not b.endswith('.c'):
                            self.errors.append('%s: a layer row names a .c file: %r' % (where, b))
                        stem = b[:-2]
                        if stem in self.file_layer:
                            self.errors.append('%s: %s has a second layer row' % (where, b))
                        self.file_layer[stem] = self.layers.index(a)
                    elif not os.path.exists(os.path.join(ROOT, 'src', b)):
                        self.errors.append('%s: no src/%s' % (where, b))
                elif kind in ('hook', 'plain'):
                    d = self.hooks if kind == 'hook' else self.plain
                    if a in self.hooks or a in self.plain:
                        self.errors.append('%s: %s named twice' % (where, a))
                    d[a] = (b[:-2] if b.endswith('.c') else b, text)
                elif kind == 'upward':
                    key = (a[:-2] if a.endswith('.c') else a, b)
                    if key in self.upward:
                        self.errors.append('%s: upward call %s -> %s listed twice' % (where, a, b))
                    self.upward[key] = text
                else:
                    self.errors.append('%s: unknown kind %r' % (where, kind))

    def picture(self):
        """The layer picture of docs/design.md, one file a line."""
        fw = max(len(f) for _, f, _ in self.rows) + 2
        out, last = [], None
        for layer, f, text in self.rows:
            if layer != last:
                if last is not None:
                    out.append('      |')
                head = ' %-16s' % layer
                last = layer
            else:
                head = ' ' * 17
            out.append(('%s%-*s%s' % (head, fw, f, text)).rstrip())
        out.append('')
        out.append(' calls go down; up only through a hook table:')
        for var, (f, text) in self.hooks.items():
            out.append('   %s (%s.c) <- %s' % (var, f, text))
        return '\n'.join(out) + '\n'


def nm_objects(objdir):
    """{stem: (set of undefined symbols, set of defined function symbols, set of defined data symbols)}"""
    objs = {}
    for name in sorted(os.listdir(objdir)):
        if not name.endswith('.o'):
            continue
        out = subprocess.run(['nm', '-P', os.path.join(objdir, name)], capture_output=True,
                             text=True, check=True).stdout
        und, fun, dat = set(), set(), set()
        for line in out.splitlines():
            p = line.split()
            if len(p) < 2:
                continue
            sym, t = p[0], p[1]
            if t in 'Uw':
                und.add(sym)
            elif t in 'TW':
                fun.add(sym)
            elif t in 'DdBbRrVv':
                dat.add(sym)
        objs[name[:-2]] = (und, fun, dat)
    return objs


def calls_of(objdirs):
    """{(caller stem, function): callee stem} over all object directories; the stems seen."""
    calls, stems = {}, set()
    for d in objdirs:
        objs = nm_objects(d)
        stems |= set(objs)
        definer = {}
        for stem, (_, fun, _) in objs.items():
            for s in fun:
                definer[s] = stem
        for stem, (und, _, _) in objs.items():
            for s in und:
                if s in definer and definer[s] != stem:
                    calls[(stem, s)] = definer[s]
    return calls, stems


def upward_calls(calls, file_layer):
    return {k: v for k, v in calls.items()
            if k[0] in file_layer and v in file_layer and file_layer[v] < file_layer[k[0]]}


# ---- function-pointer variables, from DWARF (readelf) ----

DIE_RE = re.compile(r'^\s*<(\d+)><([0-9a-f]+)>: Abbrev Number: (\d+)(?: \((\w+)\))?')
ATTR_RE = re.compile(r'^\s*<[0-9a-f]+>\s+(DW_AT_\w+)\s*:\s*(.*)$')


def dwarf_dies(obj):
    out = subprocess.run(['readelf', '--debug-dump=info', obj], capture_output=True,
                         text=True).stdout
    dies, stack, cur = {}, [], None
    for line in out.splitlines():
        m = DIE_RE.match(line)
        if m:
            depth, off, abbrev, tag = int(m.group(1)), int(m.group(2), 16), m.group(3), m.group(4)
            if abbrev == '0':          # end of a list of children
                cur = None
                continue
            del stack[depth:]
            cur = {'tag': tag, 'depth': depth, 'children': [], 'parent': stack[-1] if stack else None}
            dies[off] = cur
            if stack:
                dies[stack[-1]]['children'].append(off)
            stack.append(off)
            continue
        m = ATTR_RE.match(line)
        if m and cur is not None:
            attr, val = m.group(1), m.group(2).strip()
            if attr == 'DW_AT_name':
                cur['name'] = val.rsplit('): ', 1)[-1] if val.startswith('(') else val
            elif attr in ('DW_AT_type', 'DW_AT_specification', 'DW_AT_abstract_origin'):
                r = re.search(r'<0x([0-9a-f]+)>', val)
                if r:
                    cur[attr] = int(r.group(1), 16)
            elif attr in ('DW_AT_location', 'DW_AT_declaration', 'DW_AT_external'):
                cur[attr] = val
    return dies


def holds_fnptr(dies, off, seen=None):
    seen = set() if seen is None else seen
    if off is None or off in seen or off not in dies:
        return False
    seen.add(off)
    d = dies[off]
    tag = d['tag']
    if tag == 'DW_TAG_pointer_type':
        t = d.get('DW_AT_type')
        while t in dies and dies[t]['tag'] in ('DW_TAG_typedef', 'DW_TAG_const_type',
                                               'DW_TAG_volatile_type', 'DW_TAG_atomic_type'):
            t = dies[t].get('DW_AT_type')
        return t in dies and dies[t]['tag'] == 'DW_TAG_subroutine_type'
    if tag in ('DW_TAG_typedef', 'DW_TAG_const_type', 'DW_TAG_volatile_type',
               'DW_TAG_atomic_type', 'DW_TAG_array_type', 'DW_TAG_member'):
        return holds_fnptr(dies, d.get('DW_AT_type'), seen)
    if tag in ('DW_TAG_structure_type', 'DW_TAG_union_type'):
        return any(holds_fnptr(dies, c, seen) for c in d['children'])
    return False


def fnptr_variables(objdir, stems):
    """{variable: stem} for every variable defined (file scope or static in a
    function) in an object whose type is or holds a function pointer."""
    found, any_dwarf = {}, False
    for stem in sorted(stems):
        dies = dwarf_dies(os.path.join(objdir, stem + '.o'))
        any_dwarf = any_dwarf or bool(dies)
        for off, d in dies.items():
            if d['tag'] != 'DW_TAG_variable' or 'DW_AT_location' not in d:
                continue
            src = d
            for ref in ('DW_AT_specification', 'DW_AT_abstract_origin'):
                if ref in d and d[ref] in dies:
                    src = dies[d[ref]]
            name, typ = src.get('name') or d.get('name'), d.get('DW_AT_type', src.get('DW_AT_type'))
            if not name:
                continue
            # a function's automatic variables have a stack location (DW_OP_fbreg, a
            # location list); statics and globals have DW_OP_addr
            if 'DW_OP_addr' not in d['DW_AT_location']:
                continue
            if holds_fnptr(dies, typ):
                found[name] = stem
    return found if any_dwarf else None


def main():
    ap = argparse.ArgumentParser(description='check hakmem\'s layers (tools/layers.tsv)')
    ap.add_argument('--table', default=os.path.join(ROOT, 'tools/layers.tsv'))
    ap.add_argument('--doc', default=os.path.join(ROOT, 'docs/design.md'))
    ap.add_argument('--src', default=os.path.join(ROOT, 'src'))
    ap.add_argument('--picture', action='store_true')
    ap.add_argument('--update-doc', action='store_true')
    ap.add_argument('--calls', action='store_true')
    ap.add_argument('--measure')
    ap.add_argument('objdirs', nargs='*')
    a = ap.parse_args()
    t = Table(a.table)
    objdirs = a.objdirs or [os.path.join(ROOT, 'build/obj')]

    if a.picture:
        sys.stdout.write(t.picture())
        return 0
    if a.update_doc:
        with open(a.doc) as f:
            doc = f.read()
        i = doc.find(BEGIN)
        if i < 0:
            sys.exit('%s: no line %s' % (a.doc, BEGIN))
        j = doc.index('```\n', i)
        k = doc.index('```\n', j + 4)
        doc = doc[:j + 4] + t.picture() + doc[k:]
        with open(a.doc, 'w') as f:
            f.write(doc)
        return 0

    for d in objdirs:
        if not os.path.isdir(d):
            print('FAIL layers.table: no object directory %s (run make)' % d)
            return 1
    calls, stems = calls_of(objdirs)

    if a.calls:
        for (caller, fn), callee in sorted(calls.items()):
            lc, le = t.file_layer.get(caller), t.file_layer.get(callee)
            mark = 'UP' if lc is not None and le is not None and le < lc else ''
            print('%-14s -> %-14s %-36s %s' % (caller, callee, fn, mark))
        return 0
    if a.measure:
        order = [s.strip() for s in a.measure.split(',')]
        where = {}
        for i, group in enumerate(order):
            for layer in group.split('+'):
                if layer not in t.layers:
                    sys.exit('no layer %r in %s' % (layer, a.table))
                where[t.layers.index(layer)] = i
        if len(where) != len(t.layers):
            sys.exit('the order must name every layer: %s' % ', '.join(t.layers))
        fl = {f: where[l] for f, l in t.file_layer.items()}
        up = upward_calls(calls, fl)
        for (caller, fn), callee in sorted(up.items()):
            print('  %s.c -> %s (%s.c)' % (caller, fn, callee))
        print('%d upward calls (%d file pairs) under: %s'
              % (len(up), len({(k[0], v) for k, v in up.items()}), ' > '.join(order)))
        return 0

    status = 0

    def report(name, problems):
        nonlocal status
        if problems:
            status = 1
            for p in problems:
                print('  ' + p)
            print('FAIL %s: %d problem%s' % (name, len(problems), 's' if len(problems) != 1 else ''))
        else:
            print('PASS %s' % name)

    # the table itself
    problems = list(t.errors)
    srcs = {f[:-2] for f in os.listdir(a.src) if f.endswith('.c')}
    for s in sorted(srcs - set(t.file_layer)):
        problems.append('src/%s.c has no layer row' % s)
    for s in sorted(set(t.file_layer) - srcs):
        problems.append('%s.c has a layer row but is not in src/' % s)
    for s in sorted(stems - set(t.file_layer)):
        problems.append('object %s.o has no layer row' % s)
    missing = ['%s/%s.o' % (rel(d), s) for d in objdirs for s in sorted(set(t.file_layer) & srcs)
               if not os.path.exists(os.path.join(d, s + '.o'))]
    for m in missing:
        problems.append('no object %s (run make): the calls below would be incomplete' % m)
    report('layers.table', problems)
    if missing:
        return status

    # upward calls
    up = upward_calls(calls, t.file_layer)
    L = t.layers
    new = sorted(k for k in up if k not in t.upward)
    problems = ['new upward call: %s.c (%s) -> %s, defined in %s.c (%s)'
                % (k[0], L[t.file_layer[k[0]]], k[1], up[k], L[t.file_layer[up[k]]]) for k in new]
    report('layers.no_new_upward_calls', problems)
    gone = sorted(k for k in t.upward if k not in up)
    problems = []
    for k in gone:
        why = 'no longer called' if k not in calls else 'no longer upward (%s.c)' % calls[k]
        problems.append('known upward call %s.c -> %s: %s; delete its row from %s'
                        % (k[0], k[1], why, rel(a.table)))
    report('layers.exceptions_current', problems)
    pairs = {}
    for k in up:
        if k in t.upward:
            pairs.setdefault((k[0], up[k]), []).append(k[1])
    print('known upward calls remaining: %d (%d file pairs)' % (sum(map(len, pairs.values())), len(pairs)))
    for (caller, callee), fns in sorted(pairs.items()):
        print('    %-14s -> %-12s %s' % (caller + '.c', callee + '.c', ' '.join(sorted(fns))))

    # hook tables: every function-pointer variable named, in the right file
    problems = []
    found = fnptr_variables(objdirs[0], stems)
    dwarf = found is not None
    if not dwarf:
        print('SKIP layers.hook_tables: no debug information in %s (built without -g)' % objdirs[0])
        found = {}
    named = dict((v, f) for v, (f, _) in t.plain.items())
    named.update((v, f) for v, (f, _) in t.hooks.items())
    for v, f in sorted(found.items()):
        if v not in named:
            problems.append('function-pointer variable %s (%s.c) is not in the table: a hook row if '
                            'upper layers register into it, else a plain row' % (v, f))
        elif named[v] != f:
            problems.append('%s is defined in %s.c, the table says %s.c' % (v, f, named[v]))
    for v in sorted(set(named) - set(found)) if dwarf else []:
        problems.append('%s (%s.c, in the table) is not a function-pointer variable of the objects'
                        % (v, named[v]))
    if dwarf:
        report('layers.hook_tables', problems)

    # the picture in docs/design.md
    problems = []
    try:
        with open(a.doc) as f:
            doc = f.read()
    except OSError as e:
        doc = ''
        problems.append(str(e))
    i = doc.find(BEGIN)
    if doc and i < 0:
        problems.append('%s: no line %s' % (rel(a.doc), BEGIN))
    elif doc:
        m = re.compile(r'```\n(.*?)```\n', re.S).search(doc, i)
        if not m:
            problems.append('%s: no ``` block after the marker' % rel(a.doc))
        elif m.group(1) != t.picture():
            want, have = t.picture().splitlines(), m.group(1).splitlines()
            for n in range(max(len(want), len(have))):
                w = want[n] if n < len(want) else '<none>'
                h = have[n] if n < len(have) else '<none>'
                if w != h:
                    problems.append('picture line %d is %r, the table gives %r' % (n + 1, h, w))
                    break
            problems.append('run tools/layer-check.py --update-doc')
    report('layers.design_picture', problems)
    return status


if __name__ == '__main__':
    sys.exit(main())
