#!/usr/bin/env python3
"""Symbolises a sampler.c profile with addr2line and prints the top functions (self and inclusive)."""
import collections
import subprocess
import sys


def load(path):
    maps, samples = [], []
    for line in open(path):
        if line.startswith("map "):
            parts = line.split()
            if len(parts) >= 7 and "x" in parts[2]:
                lo, hi = (int(x, 16) for x in parts[1].split("-"))
                maps.append((lo, hi, int(parts[3], 16), parts[6]))
        elif line.startswith("s"):
            samples.append([int(x, 16) for x in line.split()[1:]])
    return maps, samples


def symbolise(maps, addrs):
    by_module = collections.defaultdict(set)
    where = {}
    for a in addrs:
        for lo, hi, off, mod in maps:
            if lo <= a < hi:
                rel = a - lo + off
                by_module[mod].add(rel)
                where[a] = (mod, rel)
                break
    names = {}
    for mod, rels in by_module.items():
        rels = sorted(rels)
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", mod] + ["%x" % (r - 1 if r else r) for r in rels],
                                 capture_output=True, text=True, check=False).stdout.split("\n")
        except OSError:
            out = []
        for i, r in enumerate(rels):
            fn = out[2 * i] if 2 * i < len(out) else "??"
            names[(mod, r)] = fn if fn != "??" else "%s+%x" % (mod.rsplit("/", 1)[-1], r)
    return {a: names.get(where.get(a), "?%x" % a) for a in addrs}


def main():
    args = sys.argv[1:]
    focus = None
    if "--focus" in args:  # only the samples with this function on the stack
        i = args.index("--focus")
        focus = args[i + 1]
        del args[i:i + 2]
    maps, samples = load(args[0])
    top = int(args[1]) if len(args) > 1 else 30
    # frames 0-1 are the handler and the signal trampoline
    addrs = {a for s in samples for a in s[2:]}
    sym = symbolise(maps, addrs)
    self_c, incl_c = collections.Counter(), collections.Counter()
    if focus:
        samples = [s for s in samples if focus in {sym[a] for a in s[2:]}]
    for s in samples:
        fr = [sym[a] for a in s[2:]]
        if not fr:
            continue
        self_c[fr[0]] += 1
        for fn in set(fr):
            incl_c[fn] += 1
    n = max(len(samples), 1)
    print("%d samples (1 ms of CPU each)%s" % (len(samples), " with %s on the stack" % focus if focus else ""))
    print("self:")
    for fn, c in self_c.most_common(top):
        print("  %6.2f%%  %s" % (100.0 * c / n, fn))
    print("inclusive:")
    for fn, c in incl_c.most_common(top):
        print("  %6.2f%%  %s" % (100.0 * c / n, fn))


if __name__ == "__main__":
    main()
