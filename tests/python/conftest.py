"""Shared fixtures of the libattn Python tests (run by tests/python/run.sh)."""

import json
import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def case_files():
    """Selection case files of vLLM's answers: tests/data/*-cases.json (what
    test_select_cases reads)."""
    return sorted((ROOT / "tests" / "data").glob("*-cases.json"))


def known_diffs(case_file):
    """Ids of the cases where libattn's outcome is known to differ from
    vLLM's (NAME-known-diffs.txt beside NAME-cases.json); test_select_cases
    checks that they still differ, so they are left out here."""
    f = case_file.with_name(case_file.name.replace("-cases.json", "-known-diffs.txt"))
    if not f.is_file():
        return set()
    return {ln.split()[0] for ln in f.read_text().splitlines() if ln.strip() and ln[0] != "#"}


def load_cases():
    out = []
    for f in case_files():
        data = json.loads(f.read_text())
        cases = data["cases"] if isinstance(data, dict) else data
        skip = known_diffs(f)
        out += [(f.name, c) for c in cases if c.get("id") not in skip]
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
