"""A trainer for tuning tests, without TensorFlow: score = -(x - 3)^2 (+1 when y is b), per step.

--fail-if-y V   exit 1 when y == V (a failing trial)
--sleep S       sleep S seconds between steps (a trial to stop early, or to cancel)
--steps N       how many reports; --no-report reports nothing
"""

import argparse
import os
import time

from vtrain import runtime

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, default=0.0)
p.add_argument("--y", default="a")
p.add_argument("--steps", type=int, default=3)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--fail-if-y", default=None)
p.add_argument("--slow-if-x-below", type=float, default=None)
p.add_argument("--no-report", action="store_true")
a = p.parse_args()
print(f"trial {runtime.trial_id()} x={a.x} y={a.y} model_dir={os.environ.get('AIP_MODEL_DIR')}", flush=True)
if a.fail_if_y is not None and a.y == a.fail_if_y:
    raise SystemExit(f"failing on purpose: y={a.y}")
for step in range(1, a.steps + 1):
    if not a.no_report:
        runtime.report_metric("score", -((a.x - 3) ** 2) + (1 if a.y == "b" else 0) + 0.01 * step, step=step)
    slow = a.slow_if_x_below is not None and a.x < a.slow_if_x_below
    time.sleep(a.sleep * (20 if slow else 1))
print("done", flush=True)
