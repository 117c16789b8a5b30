"""examples/python/write_flavors.py — spec example 6 in Python: (1) a write_attributes batch (heat
float32, tint float32 x 3 COLOR), (2) a write on a prototype prim cloned to two environments, (3) four
writes at ordinals 4..7 enqueued without waiting and drained by polling, then sealed, (4) GPU ingest
from a CUDA array (torch, cupy or warp, whichever is installed) read back on the CPU, or a skip line.

    PYTHONPATH=build/release/python build/pyvenv/bin/python examples/python/write_flavors.py
"""

import numpy as np

import ovstage
from ovstage import AttributeSemantic, ErrorCode, OrdinalRange, OvstageError, WriteDesc


def column(stage, query, attr, ordinal, to_host=np.from_dlpack):
    """The values of attr as of ordinal, in query order; to_host turns a group tensor into a numpy
    array (numpy takes CPU tensors only: a GPU column's tensor goes through a GPU library)."""
    with stage.read_attributes(query, [attr], OrdinalRange.latest(ordinal)) as read:
        for g in read.groups():
            a = to_host(g.dlpack(0))
            return [a[g.data_row_index(i)] for i in range(g.prim_count)]
    return []


def cuda_to_host(name):
    """numpy copy of a CUDA group tensor through the GPU library `name` (zero copy on the device)."""
    if name == "torch":
        import torch

        return lambda t: torch.from_dlpack(t).cpu().numpy()
    if name == "cupy":
        import cupy

        return lambda t: cupy.from_dlpack(t).get()
    import warp as wp

    return lambda t: wp.from_dlpack(t).numpy()


def cuda_array():
    """(name, a CUDA array holding [5, 6, 7]) from the first GPU library found, or None."""
    try:
        import torch

        if torch.cuda.is_available():
            return "torch", torch.tensor([5.0, 6.0, 7.0], device="cuda")
    except ImportError:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return "cupy", cupy.asarray([5.0, 6.0, 7.0], dtype=cupy.float32)
    except Exception:
        pass
    try:
        import warp as wp

        # its start-up banner would interleave with the example's output: quiet (warp < 1.10) or
        # warnings only (the log level of later versions)
        wp.config.quiet = True
        wp.config.log_level = 30
        wp.init()
        if wp.is_cuda_available():
            return "warp", wp.array([5.0, 6.0, 7.0], dtype=wp.float32, device="cuda")
    except Exception:
        pass
    return None


def main():
    with ovstage.Stage("example.write_flavors") as stage:
        pd = stage.get_path_dictionary()
        q = stage.query_from_path_list(pd.create_path_list_from_strings(["/World/A", "/World/B"]))

        # (1) one batch, one op, two columns.
        stage.write_attributes(q, [
            WriteDesc("heat", np.array([7, 8], np.float32), is_array=False),
            WriteDesc("tint", np.array([[.1, .2, .3], [.4, .5, .6]], np.float32), is_array=False,
                      semantic=AttributeSemantic.COLOR),
        ], 1).wait()
        stage.advance_write_floor(1).wait()
        print("heat:", " ".join(f"{v:.1f}" for v in column(stage, q, "heat", 1)))
        print("tint:", " ".join("(" + " ".join(f"{x:.1f}" for x in row) + ")" for row in column(stage, q, "tint", 1)))

        # (2) prototype + clones.
        proto = stage.query_from_path_list(pd.create_path_list_from_strings(["/World/Proto/Rig"]))
        stage.write_attribute(proto, "mass", 2, np.array([5.0], np.float32), is_array=False).wait()
        stage.advance_write_floor(2).wait()
        stage.clone("/World/Proto/Rig", ["/World/Env0/Rig", "/World/Env1/Rig"], 3)
        stage.advance_write_floor(3).wait()
        for env in ("/World/Env0/Rig", "/World/Env1/Rig"):
            eq = stage.query_from_path_list(pd.create_path_list_from_strings([env]))
            print(f"mass {env} =", f"{column(stage, eq, 'mass', 3)[0]:.1f}")

        # (3) a pipeline: four writes in flight, drained by polling wait_op(timeout 0).
        sample = stage.query_from_path_list(pd.create_path_list_from_strings(["/World/S0", "/World/S1", "/World/S2"]))
        ops = [stage.write_attribute(sample, "sample", o, np.arange(3, dtype=np.float32) + 100 * (o - 3),
                                     is_array=False) for o in range(4, 8)]
        pending = {op.op_id: op for op in ops}
        while pending:
            for op_id in list(pending):
                code, errors, _ = stage.wait_op(op_id, 0)
                if code == ErrorCode.OK:
                    if errors:
                        raise SystemExit(f"op {op_id} failed")
                    stage.release_op(op_id)
                    del pending[op_id]
        stage.advance_write_floor(7).wait()
        print("latest sample after the pipeline:", " ".join(f"{v:.0f}" for v in column(stage, sample, "sample", 7)))

        # (4) GPU ingest.
        found = cuda_array()
        if found is None:
            print("gpu-samples: skipped (no CUDA device with torch, cupy or warp)")
            return
        name, arr = found
        try:
            stage.write_attribute(sample, "gpu-samples", 8, arr, is_array=False).wait()
        except OvstageError as e:
            print(f"gpu-samples: skipped ({name} array refused: {e.message})")
            return
        stage.advance_write_floor(8).wait()
        back = column(stage, sample, "gpu-samples", 8, cuda_to_host(name))
        print(f"gpu-samples ({name}) read back on CPU", np.array(back))


if __name__ == "__main__":
    main()
