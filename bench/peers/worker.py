#!/usr/bin/env python3
"""One system of bench/peers/peers.py in its own process.

The driver starts one worker per system with the thread settings in the
environment (OMP_NUM_THREADS, OMP_WAIT_POLICY=passive, KMP_BLOCKTIME=0,
ATTN_NUM_THREADS) and talks to it in JSON lines on stdin/stdout; between
commands the worker blocks on its pipe, so its threads sleep while another
system runs. Commands:

  {"cmd": "prepare", "spec": {...}}   map the shape's data, set the system up
  {"cmd": "output", "path": P}        one call on the first block table, its
                                      output saved to P (torch.save)
  {"cmd": "time", "calls": N}         one untimed call, then N timed calls,
                                      each on the next block table: seconds
  {"cmd": "release"}                  drop the shape
  {"cmd": "quit"}

Every reply is one line: {"ok": true, ...} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import systems  # noqa: E402


def reply(out, **kw):
    out.write(json.dumps(kw) + "\n")
    out.flush()


def main(argv):
    name = argv[0]
    # the protocol owns stdout: anything a library prints goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    try:
        system = systems.SYSTEMS[name](torch)
    except Exception as e:
        reply(out, ok=False, error=f"{type(e).__name__}: {e}")
        return 1
    reply(out, ok=True, name=system.name, torch=torch.__version__)
    sh = None
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.get("cmd")
        try:
            if cmd == "quit":
                reply(out, ok=True)
                return 0
            if cmd == "release":
                sh = None
                for a in ("kv", "out", "key_cache", "value_cache", "md", "k", "v", "qp"):
                    if hasattr(system, a):
                        setattr(system, a, None)
                reply(out, ok=True)
            elif cmd == "prepare":
                sh = systems.ShapeData(torch, msg["spec"])
                system.prepare(sh)
                reply(out, ok=True, variant=system.variant())
            elif cmd == "output":
                o = system.run(sh, sh.bts[0])
                torch.save(o.clone(), msg["path"])
                reply(out, ok=True)
            elif cmd == "time":
                system.run(sh, sh.take_bt())
                ts = []
                for _ in range(int(msg["calls"])):
                    bt = sh.take_bt()
                    t0 = time.perf_counter()
                    system.run(sh, bt)
                    ts.append(time.perf_counter() - t0)
                reply(out, ok=True, seconds=ts)
            else:
                reply(out, ok=False, error=f"unknown command {cmd!r}")
        except Exception as e:
            if not isinstance(e, NotImplementedError):  # a system's refusal is a reply
                traceback.print_exc(file=sys.stderr)
            reply(out, ok=False, error=f"{type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
