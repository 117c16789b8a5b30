"""examples/python/minimal.py — spec example 1 in Python: intern a token, write [1, 2, 3] at ordinal 1,
seal, read it back; write by name at 2, clone /World/A at 3, write [7, 8, 9] through
DLTensor.from_dlpack at 4 and read it back through np.from_dlpack (the column now spans the clones,
so the group resolves rows through its data index map).

    PYTHONPATH=build/release/python build/pyvenv/bin/python examples/python/minimal.py
"""

import numpy as np

import ovstage
from ovstage import OrdinalRange


def main():
    with ovstage.Stage("example.minimal") as stage:
        pd = stage.get_path_dictionary()
        attr = pd.intern_token("temperature")
        print(f"attribute token {attr} = {pd.token_to_string(attr)!r}")
        with pd.create_path_list_from_strings(["/World/A", "/World/B", "/World/C"]) as plist:
            with stage.query_from_path_list(plist) as query:
                stage.write_attribute(query, attr, ordinal=1, tensors=np.array([1.0, 2.0, 3.0], np.float32),
                                      is_array=False).wait()
                stage.advance_write_floor(ordinal=1).wait()
                with stage.read_attributes(query, [attr], OrdinalRange.latest(1)) as read:
                    read.wait()
                    group = read.fetch_next()
                    try:
                        print("read back ordinal", group.ordinal, group.array(0))
                    finally:
                        stage.release_group(group)

                stage.write_attribute(query, "temperature", 2, np.array([4, 5, 6], np.float32), is_array=False).wait()
                stage.advance_write_floor(2).wait()
                stage.clone("/World/A", ["/World/A_env0", "/World/A_env1"], 3)
                stage.advance_write_floor(3).wait()
                print("cloned /World/A -> A_env0, A_env1")

                t = ovstage.DLTensor.from_dlpack(np.array([7, 8, 9], np.float32))
                stage.write_attribute(query, attr, 4, t, is_array=False).wait()
                stage.advance_write_floor(4).wait()
                with stage.read_attributes(query, [attr], OrdinalRange.latest(4)) as read:
                    for group in read.groups():
                        values = np.from_dlpack(group.dlpack(0))
                        rows = np.array([values[group.data_row_index(i)] for i in range(group.prim_count)])
                        print("dlpack read back ordinal", group.ordinal, rows)


if __name__ == "__main__":
    main()
