"""The Python examples (examples/python) run and print what the C examples print (spec section 7)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(name, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / name), *args], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_minimal():
    out = run("minimal.py")
    assert out[1:] == ["read back ordinal 1 [1. 2. 3.]", "cloned /World/A -> A_env0, A_env1",
                       "dlpack read back ordinal 4 [7. 8. 9.]"]


def test_producer_consumer():
    out = run("producer_consumer.py")
    assert "consumer: floor 3, last_seen 0 -> reading delta [1, 3]" in out
    assert "  value group (ordinal 3): S0 = 30.0, S1 = 21.0, S2 = 32.0" in out
    assert "  value group (ordinal 6): S0 = 40.0, S1 = 61.0, S3 = 63.0" in out
    assert "  tombstone group (ordinal 6): S2 deleted" in out
    assert "  delta batch: 4 prim changes" in out
    assert out[-1] == "consumer: last_seen -> 6"


def test_producer_consumer_threads():
    out = run("producer_consumer.py", "--threads")
    assert out[-1] == "consumer: last_seen -> 6"
    assert sum(1 for line in out if line.startswith("producer tick")) == 6


def test_write_flavors():
    out = run("write_flavors.py")
    assert out[:5] == ["heat: 7.0 8.0", "tint: (0.1 0.2 0.3) (0.4 0.5 0.6)", "mass /World/Env0/Rig = 5.0",
                       "mass /World/Env1/Rig = 5.0", "latest sample after the pipeline: 400 401 402"]
    assert out[5].startswith("gpu-samples")
