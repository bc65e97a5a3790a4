"""A checked JobConfig → the exact Vertex AI request, with no I/O.

- :mod:`.custom_job`  the CustomJob body (REST-shaped plain data, equal to the proto) and the proto
- :mod:`.tuning_job`  the HyperparameterTuningJob body around it
- :mod:`.render`      REST JSON and `gcloud --config` YAML
- :mod:`.redact`      secrets out of everything printed
"""
