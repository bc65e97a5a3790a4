"""Horovod v0.28.1's TF2 synthetic benchmarks, kept byte for byte as upstream wrote them (Apache-2.0; their headers
say so): github.com/horovod/horovod, tag v0.28.1, examples/tensorflow2/tensorflow2_synthetic_benchmark.py (the
tape) and tensorflow2_keras_synthetic_benchmark.py (model.fit). They are no code of this project: the test runs a
copy of each with only its Horovod import line changed, as docs/guides/horovod.md tells a user to
(tests/horovod/test_horovod_local.py), and ruff leaves this folder alone (pyproject.toml)."""
