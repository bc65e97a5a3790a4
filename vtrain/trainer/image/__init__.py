"""Daemonless trainer images (issue 23): a base image + the trainer + its requirements, as layers,
pushed over the OCI distribution API with no Docker daemon.

    reference  image references, and http for loopback registries / https for the rest
    layers     reproducible tar+gzip layers: the trainer's files, vtrain's runtime
    wheels     the requirements layer: wheels for the image's Python and platform, cached
    config     the image config and manifest on the base's, and the offline tag
    registry   the v2 client: token auth, HEAD/mount/upload/copy, manifests
    auth       credentials: an access token for Google's registries (oauth2accesstoken)
    build      planned_image (offline), build_image, push_image, build_and_push

The image's layout: every layer is a plain directory on ``PYTHONPATH``, ahead of the base's own
packages: ``/opt/vtrain/trainer`` (the trainer's files exactly as its sdist holds them, one
selection: :func:`vtrain.trainer.packaging.trainer_files`; ``src/`` on the
path instead for a src layout), ``/opt/vtrain/runtime`` (vtrain's runtime) and ``/opt/vtrain/deps``
(``pip install --target`` of the requirements). A directory rather than an installed wheel, so
that no build backend runs (the layer is exactly the files the content hash covers, built the
same on every machine); what that leaves out, the trainer's console scripts and its declared
dependencies, a trainer run with ``python -m`` does not need, and requirements are listed for
the image on their own.
"""
