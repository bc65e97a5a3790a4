"""`python -m trainer.task --steps N`: print what Vertex AI told this replica, count N steps, succeed."""

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    task = json.loads(os.environ.get("CLUSTER_SPEC", "{}")).get("task", {})
    print(f"replica {task.get('type', '?')}-{task.get('index', 0)} of job {os.environ.get('CLOUD_ML_JOB_ID', '?')}")
    for step in range(1, args.steps + 1):
        print(f"step {step}/{args.steps}")
    print("done")


if __name__ == "__main__":
    main()
