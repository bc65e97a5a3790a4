"""The local backend: a CustomJob run as real processes on 127.0.0.1, exactly as Vertex AI would
start its replicas. `vtrain local`, `vtrain emulator --run-jobs` and the SDK's `run_local` use it.

- :mod:`.env`       pure: the CustomJob body → one plan per replica (argv, TF_CONFIG, CLUSTER_SPEC, AIP_*)
- :mod:`.envcache`  the packaged trainer installed into a cached environment, keyed by content hash
- :mod:`.job`       the supervisor: processes, log streaming, Vertex's rules for ending a job (a JobHandle)
- :mod:`.policy`    pure: Vertex's restart policy (restart in place, retry the job, permanent errors)
- :mod:`.faults`    pure: `--fault REPLICA:KIND@WHEN` specs and the scheduler that says when to signal
- :mod:`.restarts`  the restart supervisor the job holds: carries out the policy and the faults on the processes
- :mod:`.rundir`    each run's own folder under the output dir, and the output dir's lock
- :mod:`.ports`     the replicas' 127.0.0.1 ports
- :mod:`.cacheadmin` `vtrain cache info|clear`
- :mod:`.cachefolders` the cache's folders as runs use them: made, locked, held while a job reads them
- :mod:`.bundle`     pure: the OCI runtime config (config.json) a replica's container runs from
- :mod:`.containers` image replicas in runc/crun containers, the runtime's choice, its start failures
- :mod:`.options`   RunOptions: a run's options as one value, from the CLI or the SDK to the supervisor
- :mod:`.runner`    job file or body → plan → environment → supervisor; `run_local`
- :mod:`.studies`   `vtrain local` on a tuning job: each trial a local job, several at a time
- :mod:`.study_run` a tuning job file → a local study; `run_local_tuning`
"""
