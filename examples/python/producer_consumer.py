"""examples/python/producer_consumer.py — spec example 2 in Python: four sensors; ticks 1..6 write two
sensors each at ordinal = tick (value 10*tick + sensor), tick 5 deletes S2 instead; every tick seals.
A consumer follows the global floor with change-range reads. --threads runs producer and consumer
in two Python threads (the GIL is released while either waits in the engine).

    PYTHONPATH=build/release/python build/pyvenv/bin/python examples/python/producer_consumer.py [--threads]
"""

import sys
import threading
import time

import numpy as np

import ovstage
from ovstage import OrdinalRange

PLAN = {1: (0, 1), 2: (1, 2), 3: (2, 0), 4: (3, 0), 5: None, 6: (1, 3)}


def producer(stage, sensors, lock, ticks=range(1, 7)):
    for tick in ticks:
        if PLAN[tick] is None:
            stage.delete_attributes(sensors[2], [], tick).wait()  # [] = the whole prim
            stage.advance_write_floor(tick).wait()
            with lock:
                print(f"producer tick {tick}: deleted S2 entirely (floor -> {tick})")
            continue
        wrote = []
        for s in PLAN[tick]:
            v = 10.0 * tick + s
            stage.write_attribute(sensors[s], "value", tick, np.array([v], np.float32), is_array=False).wait()
            wrote.append(f"S{s} = {v:.1f}")
        stage.advance_write_floor(tick).wait()
        with lock:
            print(f"producer tick {tick}: wrote {', '.join(wrote)} (floor -> {tick})")


def consume(stage, pd, everything, last_seen, lock):
    with stage.get_attribute_write_floor() as oq:
        floor = oq.fetch()
    if floor <= last_seen:
        return last_seen
    lines = [f"consumer: floor {floor}, last_seen {last_seen} -> reading delta [{last_seen + 1}, {floor}]"]
    changes = 0
    with stage.read_attributes(everything, ["value"], OrdinalRange.between(last_seen + 1, floor)) as read:
        for g in read.groups():
            names = [pd.get_path_strings(g.prim_list)[g.prim_index(i)].rsplit("/", 1)[1] for i in range(g.prim_count)]
            changes += g.prim_count
            if g.is_delete:
                lines.append(f"  tombstone group (ordinal {g.ordinal}): {', '.join(names)} deleted")
            else:
                a = g.array(0)
                vals = ", ".join(f"{n} = {a[g.data_row_index(i)]:.1f}" for i, n in enumerate(names))
                lines.append(f"  value group (ordinal {g.ordinal}): {vals}")
    lines.append(f"  delta batch: {changes} prim changes")
    lines.append(f"consumer: last_seen -> {floor}")
    with lock:
        print("\n".join(lines))
    return floor


def main():
    threads = "--threads" in sys.argv
    lock = threading.Lock()
    # Eight sealed versions per column (an extension key, as in examples/producer_consumer.c): the
    # consumer's change ranges reach back three ticks.
    with ovstage.Stage("example.producer_consumer", ovstage.StageConfig(retention=8)) as stage:
        pd = stage.get_path_dictionary()
        paths = [f"/World/Sensors/S{i}" for i in range(4)]
        sensors = [stage.query_from_path_list(pd.create_path_list_from_strings([p])) for p in paths]
        everything = stage.query_from_path_list(pd.create_path_list_from_strings(paths))
        if not threads:
            # Deterministic interleaving: the consumer reads after ticks 3 and 6.
            producer(stage, sensors, lock, range(1, 4))
            last = consume(stage, pd, everything, 0, lock)
            producer(stage, sensors, lock, range(4, 7))
            consume(stage, pd, everything, last, lock)
        else:
            t = threading.Thread(target=producer, args=(stage, sensors, lock))
            t.start()
            last = 0
            while last < 6:
                last = consume(stage, pd, everything, last, lock)
                time.sleep(0.001)
            t.join()


if __name__ == "__main__":
    main()
