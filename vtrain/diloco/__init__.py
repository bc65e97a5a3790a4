"""DiLoCo (`distribution_strategy: diloco`): learners train alone for H steps, a CPU syncer merges.

Pool 0 of the CustomJob runs the syncer (``python -m vtrain.diloco``, :mod:`.syncer`); every
replica of the worker pool(s) is a standalone learner that talks to it over one gRPC stream
(:mod:`.wire`, :mod:`.learner`); :mod:`vtrain.runtime.diloco` is the trainer-facing side (a Keras
callback and a custom-loop helper). :mod:`.traffic` says what this implementation sends per step,
for `vtrain estimate`. Importing this package imports nothing heavy: numpy and grpc load with the
modules that need them. It ships to replicas with :mod:`vtrain.runtime`.
"""
