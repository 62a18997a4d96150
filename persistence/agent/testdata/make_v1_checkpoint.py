"""Writes testdata/v1/ (manifest.json + chunks/): a checkpoint made by the agent of the time it was ONE
module, carryover_agent.py, so its pickles name the rebuild functions as carryover_agent.<name>.
test_compat.py restores it with the package. Kept to regenerate the fixture, not run by the tests:

    mkdir -p /tmp/agent-v1 && git show c454a1a:persistence/agent/carryover_agent.py > /tmp/agent-v1/carryover_agent.py
    /usr/bin/python3 persistence/agent/testdata/make_v1_checkpoint.py /tmp/agent-v1
"""

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The files the checkpoint's open file and memmap are on (absolute paths are saved): the test makes
# them again, with this content, before it restores.
FIXDIR = "/tmp/carryover-v1-fixture"

CELL = r'''
import enum, os, random
import numpy as np
os.makedirs(FIXDIR, exist_ok=True)
with open(FIXDIR + "/notes.txt", "w") as f:
    f.write("hello world")
closed_f = f
reader = open(FIXDIR + "/notes.txt")
reader.read(6)
np.arange(8, dtype=np.int32).tofile(FIXDIR + "/mm.bin")
mm = np.memmap(FIXDIR + "/mm.bin", dtype=np.int32, mode="r+", shape=(8,))
blob = bytes(range(256)) * 8
buf = bytearray(b"xy" * 1024)
big = np.arange(20.0)
view = big[5:10]
i16 = np.zeros(3, dtype=np.int16)
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return self.x ** 2 + self.y ** 2
p = Point(3, 4)
class Color(enum.Enum):
    RED = 1
    GREEN = 2
fav = Color.GREEN
random.seed(7)
np.random.seed(7)
try:
    import torch
    w = torch.ones(3, requires_grad=True)
    (w * 3).sum().backward()
    gen = torch.Generator().manual_seed(5)
except ImportError:
    pass
'''


def main():
    old = sys.argv[1]
    sys.path.insert(0, old)
    import carryover_agent  # the single-module agent

    assert os.path.basename(carryover_agent.__file__) == "carryover_agent.py", carryover_agent.__file__
    sys.path.insert(0, os.path.dirname(HERE))
    import agent_harness  # reuses the module already imported

    carryover_agent.BIG_BYTES = 1024  # small blob/buf go out-of-band, through _bytes_from
    root = tempfile.mkdtemp()
    spool, store = os.path.join(root, "spool"), os.path.join(root, "store")
    os.makedirs(spool)
    os.makedirs(store)
    sh, agent = agent_harness.new_shell(spool)
    res = sh.run_cell(CELL.replace("FIXDIR", repr(FIXDIR)))
    assert res.success, res
    r, manifest, _ = agent_harness.checkpoint(agent, spool, store, "t1")
    assert not r["skipped"], r["skipped"]
    manifest["cwd"], manifest["env"] = None, {}
    out = os.path.join(HERE, "v1")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(store, os.path.join(out, "chunks"))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
