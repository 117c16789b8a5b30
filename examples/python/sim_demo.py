"""examples/python/sim_demo.py — the demo's simulation loop in Python (examples/sim_demo.c): a
simulation feeding a training loop through the stage, with every value checked.

E environments x B bodies are E*B prims /World/env_<e>/body_<b>. Each simulation step s (1..S) writes
two columns at ordinal s in one write_attributes batch:
  pose      float32 x 7 (position + quaternion), folded with make_dltensor into (N,) lanes 7
  velocity  float32 x 6 (linear + angular), written in the (N, 6) convenience form
Every K-th step (--sparse-every) is sparse: only the environments that "reset" at that step (a hash
of (env, step)) are written, through a mask; the other prims keep their values.

Threads (the binding releases the GIL while each waits in the engine):
  P producers  producer p simulates steps p+1, p+1+P, ...; each waits for its write (its arrays
               are read by the engine until then).
  sealer       advances the global write floor over the longest prefix of steps whose writes were
               all submitted (a floor advance is ordered after the writes submitted below it).
  consumer     a training loop: polls the global floor F; a latest read of both columns at F; every
               Nth new floor (--range-every) a change-range read [last range end + 1, F]. It checks
               every value against the value function, and that exactly the expected prims are
               present (latest) or changed (range). A range read whose history left retention fails
               with OUT_OF_RANGE and the consumer rebases it; a latest read whose version left
               retention reads the newest version (as 0.2.1), checked as of its groups' ordinal.

Every value is value(column, prim, lane, step): a 24-bit integer scaled by 2**-12, exact in float32,
the same function as the C demo's. Output: progress on stderr (--quiet: none), a summary on stdout
ending in "result: OK"; exit status 0 only if every op succeeded and no value mismatched.

    PYTHONPATH=build/release/python build/pyvenv/bin/python examples/python/sim_demo.py [--steps 200] ...
"""

import argparse
import sys
import threading
import time

import numpy as np

import ovstage
from ovstage import DLDataType, DLDataTypeCode, ErrorCode, OrdinalRange, OvstageError, WriteDesc

POSE, VEL = 0, 1
LANES = {POSE: 7, VEL: 6}
M32 = np.uint64(0xFFFFFFFF)


# ---- the deterministic simulation (uint32 arithmetic as in sim_demo.c) --------------------------

def mix(h):
    """The C demo's 32-bit mixer on numpy uint64 holding uint32 values."""
    h = np.asarray(h, np.uint64) & M32
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x7FEB352D)) & M32
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(0x846CA68B)) & M32
    h ^= h >> np.uint64(16)
    return h


def values(col, prims, step):
    """value(col, prim, lane, step) for every prim of `prims` (array) and lane: (len(prims), lanes) float32."""
    lanes = np.arange(LANES[col], dtype=np.uint64)
    p = np.asarray(prims, np.uint64)[:, None]
    inner = mix((p * np.uint64(16) + lanes * np.uint64(2) + np.uint64(col)) & M32)
    h = mix(((np.uint64(step) * np.uint64(0x9E3779B1)) & M32) ^ inner)
    return ((h & np.uint64(0xFFFFFF)).astype(np.float32) * np.float32(1.0 / 4096.0))


class Sim:
    def __init__(self, o):
        self.o = o
        self.n = o.envs * o.bodies
        self.env_of = np.arange(self.n) // o.bodies

    def is_sparse(self, step):
        return self.o.sparse_every and step % self.o.sparse_every == 0

    def writes(self, step):
        """Per environment: does step `step` write it? About one in four reset at a sparse step."""
        e = np.arange(self.o.envs, dtype=np.uint64)
        if not self.is_sparse(step):
            return np.ones(self.o.envs, bool)
        s = np.uint64(step)
        h = mix((e * np.uint64(0x85EBCA6B)) & M32 ^ mix((s ^ (s >> np.uint64(32))) & M32))
        return (h & np.uint64(3)) == 0

    def expected_step(self, at):
        """Per environment: the last step <= at that wrote it (0 = never)."""
        out = np.zeros(self.o.envs, np.int64)
        todo = np.ones(self.o.envs, bool)
        for m in range(at, 0, -1):
            hit = todo & self.writes(m)
            out[hit] = m
            todo &= ~hit
            if not todo.any():
                break
        return out

    def changed_in(self, a, b):
        ch = np.zeros(self.o.envs, bool)
        for m in range(a, b + 1):
            ch |= self.writes(m)
        return ch


# ---- the run ----------------------------------------------------------------------------------

class Demo:
    def __init__(self, o):
        self.o = o
        self.sim = Sim(o)
        self.stage = ovstage.Stage("demo.sim", ovstage.StageConfig(retention=o.retention))
        pd = self.stage.get_path_dictionary()
        self.cols = pd.intern_tokens(["pose", "velocity"])
        paths = [f"/World/env_{e}/body_{b}" for e in range(o.envs) for b in range(o.bodies)]
        self.plist = pd.create_path_list_from_strings(paths)
        self.query = self.stage.query_from_path_list(self.plist)
        self.cond = threading.Condition()
        self.submitted = set()
        self.error = None
        self.abort = threading.Event()
        self.sealed = 0
        self.consumer_floor = 0
        self.checked = 0
        self.mismatches = 0
        self.first_mismatch = None
        self.latest_reads = self.range_reads = self.polls = self.stale = self.rebased = 0
        self.dense = self.sparse = 0
        self.lat = {"write": [], "seal": [], "latest": [], "range": []}
        self.lock = threading.Lock()

    def fail(self, msg):
        with self.cond:
            if self.error is None:
                self.error = msg
            self.abort.set()
            self.cond.notify_all()

    def close(self):
        self.query.release().wait()
        self.plist.release()
        self.stage.destroy()

    # producers
    def producer(self, index):
        o, sim, n = self.o, self.sim, self.sim.n
        pose = np.zeros((n, 7), np.float32)
        vel = np.zeros((n, 6), np.float32)
        all_prims = np.arange(n)
        pose_t = ovstage.make_dltensor(pose, dtype=DLDataType(DLDataTypeCode.kDLFloat, 32, 7))
        lat = []
        try:
            for s in range(index + 1, o.steps + 1, o.producers):
                if self.abort.is_set():
                    break
                w = sim.writes(s)
                rows = all_prims[w[sim.env_of]]
                pose[rows] = values(POSE, rows, s)
                vel[rows] = values(VEL, rows, s)
                sparse = bool(sim.is_sparse(s))
                kw = dict(mask=w[sim.env_of], count=n) if sparse else {}
                descs = [WriteDesc(self.cols[POSE], pose_t, False, **kw), WriteDesc(self.cols[VEL], vel, False, **kw)]
                t0 = time.perf_counter()
                while True:
                    op = self.stage.write_attributes(self.query, descs, s)
                    if op.status != ErrorCode.QUEUE_FULL:
                        break
                    time.sleep(50e-6)  # back-pressure: let the queue drain
                if not op.ok:
                    op.wait()  # raises the rejection
                with self.cond:  # the sealer may seal s from now on
                    self.submitted.add(s)
                    self.cond.notify_all()
                op.wait()  # the arrays are refilled only after the engine copied them
                lat.append(time.perf_counter() - t0)
                with self.lock:
                    if sparse:
                        self.sparse += 1
                    else:
                        self.dense += 1
        except Exception as e:
            self.fail(f"producer {index}: {type(e).__name__}: {e}")
        with self.lock:
            self.lat["write"] += lat

    # sealer
    def sealer(self):
        sealed = 0
        try:
            while sealed < self.o.steps:
                with self.cond:
                    while sealed + 1 not in self.submitted and not self.abort.is_set():
                        self.cond.wait()
                    if self.abort.is_set():
                        return
                    target = sealed
                    while target < self.o.steps and target + 1 in self.submitted:
                        target += 1
                t0 = time.perf_counter()
                self.stage.advance_write_floor(target).wait()
                self.lat["seal"].append(time.perf_counter() - t0)
                sealed = self.sealed = target
        except Exception as e:
            self.fail(f"sealer: {type(e).__name__}: {e}")

    # consumer
    def mismatch(self, msg):
        self.mismatches += 1
        if self.first_mismatch is None:
            self.first_mismatch = msg

    def check_group(self, g, col, at, env_step, changed, seen):
        o, lanes = self.o, LANES[col]
        if g.ordinal > at:
            self.mismatch(f"column {col}: group ordinal {g.ordinal} above the read's end {at}")
        t = g.tensor(0)
        if t.dtype != DLDataType(DLDataTypeCode.kDLFloat, 32, lanes) or len(t.shape) != 1:
            self.mismatch(f"column {col}: unexpected group layout {t.shape} {t.dtype}")
            return
        data = g.array(0).reshape(-1, lanes)
        cnt = g.prim_count
        prims = (np.fromiter((g.prim_index(i) for i in range(cnt)), np.int64, cnt) if g.has_prim_index_map
                 else np.arange(g.prim_offset, g.prim_offset + cnt))
        rows = (np.fromiter((g.data_row_index(i) for i in range(cnt)), np.int64, cnt) if g.has_data_index_map
                else np.arange(cnt))
        if seen[prims].any() or len(np.unique(prims)) != cnt:
            self.mismatch(f"column {col}: a prim reported twice")
        seen[prims] = True
        env = prims // o.bodies
        steps = env_step[env]
        bad = (steps == 0) | (~changed[env] if changed is not None else False)
        if bad.any():
            self.mismatch(f"column {col}: prim {prims[bad][0]} reported at {at} but "
                          f"{'was never written' if steps[bad][0] == 0 else 'did not change in the range'}")
        got = data[rows]
        for step in np.unique(steps[~bad]):
            sel = (steps == step) & ~bad
            want = values(col, prims[sel], int(step))
            diff = got[sel] != want
            if diff.any():
                i, lane = np.argwhere(diff)[0]
                self.mismatch(f"column {col} prim {prims[sel][i]} lane {lane} as of {at}: got {got[sel][i, lane]}, "
                              f"want {want[i, lane]} (step {step})")
            self.checked += int(sel.sum()) * lanes

    def read_and_check(self, rng, at):
        """One read of both columns, checked; False when its version left retention (OUT_OF_RANGE)."""
        sim = self.sim
        env_step = sim.expected_step(at)
        changed = sim.changed_in(rng.start_ordinal, at) if rng.start_ordinal is not None else None
        t0 = time.perf_counter()
        try:
            with self.stage.read_attributes(self.query, self.cols, rng) as read:
                seen = {c: np.zeros(sim.n, bool) for c in (POSE, VEL)}
                col_at = {}  # column -> the newer ordinal its groups answered with
                lat = None
                for g in read.groups():  # a fetch of a failed read raises with the read's code
                    if lat is None:
                        lat = time.perf_counter() - t0  # enqueue -> first group
                    col = self.cols.index(g.attribute)
                    # A latest read whose state as of `at` left retention before it ran reads the
                    # newest version (as 0.2.1): that column is checked as of its group's ordinal.
                    if changed is None and g.ordinal > col_at.get(col, at):
                        col_at[col] = g.ordinal
                    col_step = sim.expected_step(col_at[col]) if col in col_at else env_step
                    if g.is_delete:
                        self.mismatch(f"column {col}: unexpected tombstone group")
                    else:
                        self.check_group(g, col, col_at.get(col, at), col_step, changed, seen[col])
        except OvstageError as e:
            if e.code == ErrorCode.OUT_OF_RANGE:
                return False
            raise
        for col in (POSE, VEL):
            want = (sim.expected_step(col_at[col]) if col in col_at else env_step)[sim.env_of] > 0
            if changed is not None:
                want &= changed[sim.env_of]
            missing = want & ~seen[col]
            if missing.any():
                self.mismatch(f"column {col}: prim {np.argmax(missing)} missing from the "
                              f"{'range' if changed is not None else 'latest'} read at {at}")
        if lat is not None:
            self.lat["range" if changed is not None else "latest"].append(lat)
        return True

    def consumer(self):
        last = range_last = new_floors = 0
        try:
            while not self.abort.is_set():
                with self.stage.get_attribute_write_floor() as oq:
                    floor = oq.fetch()
                self.polls += 1
                if floor == last:
                    if floor >= self.o.steps:
                        break
                    time.sleep(100e-6)  # nothing new sealed yet
                    continue
                if not self.read_and_check(OrdinalRange.latest(floor), floor):
                    self.stale += 1  # sealed past retention before the read ran: re-poll
                    continue
                self.latest_reads += 1
                last = self.consumer_floor = floor
                new_floors += 1
                if new_floors % self.o.range_every == 0 or floor >= self.o.steps:
                    if self.read_and_check(OrdinalRange.between(range_last + 1, floor), floor):
                        self.range_reads += 1
                    else:
                        self.rebased += 1  # history reclaimed: the latest read above is the new base
                    range_last = floor
        except Exception as e:
            self.fail(f"consumer: {type(e).__name__}: {e}")

    def progress(self, t_start, end="\r"):
        el = time.perf_counter() - t_start
        sys.stderr.write(f"  sealed {self.sealed}/{self.o.steps} steps  {self.sealed / el if el else 0:.0f} steps/s  "
                         f"consumer at {self.consumer_floor}  reads {self.latest_reads}+{self.range_reads}  "
                         f"checked {self.checked / 1e6:.2f}M values  mismatches {self.mismatches}{end}")
        sys.stderr.flush()


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))] if v else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--bodies", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--sparse-every", type=int, default=10, help="0: no sparse steps")
    ap.add_argument("--range-every", type=int, default=4)
    ap.add_argument("--retention", type=int, default=64)
    ap.add_argument("--quiet", action="store_true")
    o = ap.parse_args(argv)
    for name, lo in (("envs", 1), ("bodies", 1), ("steps", 1), ("producers", 1), ("sparse_every", 0),
                     ("range_every", 1), ("retention", 2)):
        if getattr(o, name) < lo:
            ap.error(f"--{name.replace('_', '-')} must be at least {lo}, got {getattr(o, name)}")
    d = Demo(o)
    if not o.quiet:
        sys.stderr.write(f"sim demo: {o.envs} envs x {o.bodies} bodies = {d.sim.n} prims, {o.steps} steps, "
                         f"{o.producers} producers\n")
    t_start = time.perf_counter()
    threads = [threading.Thread(target=d.sealer, name="sealer"), threading.Thread(target=d.consumer, name="consumer")]
    threads += [threading.Thread(target=d.producer, args=(i,), name=f"producer-{i}") for i in range(o.producers)]
    for t in threads:
        t.start()
    while threads[1].is_alive():
        threads[1].join(0.25)
        if not o.quiet:
            d.progress(t_start)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t_start
    if not o.quiet:
        d.progress(t_start, "\n")
    d.close()

    complete = d.sealed == o.steps and d.consumer_floor == o.steps
    ok = d.error is None and d.mismatches == 0 and complete
    print(f"ovstage sim demo (Python): {o.envs} envs x {o.bodies} bodies = {d.sim.n} prims, "
          "columns pose (float32 x 7) + velocity (float32 x 6)")
    print(f"  {o.steps} steps, {o.producers} producer threads + sealer + consumer, every {o.sparse_every}th step "
          f"sparse, retention {o.retention}\n")
    rows = [("steps sealed", f"{d.sealed} of {o.steps} ({d.dense} dense, {d.sparse} sparse)"),
            ("time to seal all steps", f"{wall:.3f} s"), ("steps/s", f"{d.sealed / wall:.0f}")]
    for k, name in (("write", "write op (2 columns)"), ("seal", "floor advance"), ("latest", "latest read (first group)"),
                    ("range", "range read (first group)")):
        v = d.lat[k]
        rows.append((f"  {name} p50/p99", f"{pct(v, .5) * 1e6:.1f} / {pct(v, .99) * 1e6:.1f} us ({len(v)} ops)"
                     if v else "-"))
    rows += [("floor polls", str(d.polls)), ("reads checked (latest/range)", f"{d.latest_reads} / {d.range_reads}"),
             ("stale reads re-polled", str(d.stale)), ("range reads rebased", str(d.rebased)),
             ("values checked", str(d.checked)), ("mismatches", str(d.mismatches))]
    for k, v in rows:
        print(f"  {k:<34} {v}")
    if d.error:
        print(f"\nERROR: {d.error}")
    if d.first_mismatch:
        print(f"\nFIRST MISMATCH: {d.first_mismatch}")
    if d.error is None and not complete:
        print("\nERROR: the run did not complete")
    print(f"\nresult: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
