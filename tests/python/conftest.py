"""Shared fixtures of the libattn Python tests (run by tests/python/run.sh)."""

import json
import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def case_files():
    """Selection case files: tests/data/*cases*.json in the tree, else the
    reference set named by ATTN_REFERENCE_DIR (what test_select_cases reads)."""
    files = sorted((ROOT / "tests" / "data").glob("*cases*.json"))
    ref = os.environ.get("ATTN_REFERENCE_DIR")
    if not files and ref and os.path.isfile(os.path.join(ref, "selection-cases.json")):
        files = [pathlib.Path(ref) / "selection-cases.json"]
    return files


def load_cases():
    out = []
    for f in case_files():
        data = json.loads(f.read_text())
        cases = data["cases"] if isinstance(data, dict) else data
        out += [(f.name, c) for c in cases]
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
