#!/usr/bin/env python3
"""Each chain's last draw of a run, written as that chain's "ensemble member" of a new run
directory, so that `bnn sample` there starts chain c where the old run's chain c ended.

The prototype of an MCLMC burn-in before NUTS (issue: DEI-MCMC whose chains are stationary);
`bench/mclmc_burn_in.sh` calls it. No numpy: the safetensors files are the old members' with
their tensors' bytes replaced.

    python3 bench/chain_ends_as_members.py RUN_DIR NEW_RUN_DIR
"""

import csv
import json
import os
import shutil
import struct
import sys


def main(src, dst):
    layout = json.load(open(os.path.join(src, "layout.json")))
    members = os.path.join(src, "ensemble")
    os.makedirs(os.path.join(dst, "ensemble"), exist_ok=True)
    shutil.copy(os.path.join(members, "members.json"), os.path.join(dst, "ensemble"))
    template = open(os.path.join(members, "member_00.safetensors"), "rb").read()
    header_len = struct.unpack("<Q", template[:8])[0]
    header = json.loads(template[8 : 8 + header_len])
    chain = 0
    while os.path.isfile(os.path.join(src, f"draws_chain_{chain}.csv")):
        with open(os.path.join(src, f"draws_chain_{chain}.csv")) as f:
            rows = list(csv.reader(f))
        last = dict(zip(rows[0], rows[-1]))
        theta = [float(last[column]) for column in layout["columns"]]
        data = bytearray(template[8 + header_len :])
        for entry in layout["entries"]:
            lo, hi = header[entry["name"]]["data_offsets"]
            size = (hi - lo) // 4
            values = theta[entry["offset"] : entry["offset"] + size]
            data[lo:hi] = struct.pack(f"<{size}f", *values)
        with open(os.path.join(dst, "ensemble", f"member_{chain:02d}.safetensors"), "wb") as f:
            f.write(template[: 8 + header_len])
            f.write(bytes(data))
        chain += 1
    if chain == 0:
        sys.exit(f"error: {src} has no draws_chain_0.csv")
    print(f"wrote {chain} chain ends of {src} as the members of {dst}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
