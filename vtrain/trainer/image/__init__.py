"""Daemonless trainer images (issue 23): a base image + the trainer + its requirements, as layers,
pushed over the OCI distribution API with no Docker daemon.

    reference     image references, and http for loopback registries / https for the rest
    layers        reproducible tar+gzip layers: the trainer's files, vtrain's runtime
    requirements  the requirement list: job-file entries and files (read as foreign text), the trainer's
                  declared dependencies
    libc          the base's C library as manylinux/musllinux tags (prebuilt, build.platform, or read)
    wheels        the requirements layer: wheels for the image's Python and platform, the base's stack
                  left out, cached
    config        the image config and manifest on the base's, and the offline tag
    registry      the v2 client: token auth, HEAD/mount/upload/copy, manifests
    auth          credentials: an access token for Google's registries (oauth2accesstoken)
    build         planned_image (offline), build_image, push_image, build_and_push

The image's layout: ``/opt/vtrain/trainer`` (the trainer's files exactly as its sdist holds them,
one selection: :func:`vtrain.trainer.packaging.scan_package`; ``src/`` on ``PYTHONPATH`` instead for
a src layout) and ``/opt/vtrain/runtime`` (vtrain's runtime) are plain directories on ``PYTHONPATH``,
ahead of the base's own packages. A directory rather than an installed wheel, so that no build
backend runs (the layer is exactly the files the content hash covers, built the same on every
machine). What installing the trainer would bring besides its files, its declared dependencies,
goes into ``/opt/vtrain/deps/lib/pythonX.Y/site-packages`` with the job's requirements: a real site
dir (``PYTHONUSERBASE=/opt/vtrain/deps``), so their ``.pth`` files run, listed on ``PYTHONPATH`` as
well for a base whose user site is off.
"""
