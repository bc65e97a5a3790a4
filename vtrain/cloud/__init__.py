"""Vertex AI: where calls go, submitting, recovering, preflight, diff, and the client behind them.

- :mod:`.target`    project, region and endpoint, resolved once per command
- :mod:`.submit`    the SDK behind submit/status/logs/cancel/list
- :mod:`.recover`   `submit --recover`: the next fallback after a stock-out
- :mod:`.failures`  what a failed job's error means (stock-out, quota, preemption, …)
- :mod:`.preflight` what can be checked before paying
- :mod:`.diff`      a job file against a saved request or a submitted job
- :mod:`.vertex`    the official `aiplatform_v1` client behind a JobHandle: client, retry, logs

Importing this package is cheap: Google libraries load on first use.
"""
