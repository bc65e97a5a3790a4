"""What a model's directory (`Model.artifact_uri`) holds, looked at as Vertex looks at it at upload: a model
served by a prebuilt prediction image must have, directly in that directory, exactly one of the files the
image loads ("Export model artifacts for prediction",
https://cloud.google.com/vertex-ai/docs/training/exporting-model-artifacts):

    TensorFlow (tf2-*, tf-*, tf_opt-*)  saved_model.pb or saved_model.pbtxt
    XGBoost (xgboost-*)                 model.bst, model.joblib or model.pkl
    scikit-learn (sklearn-*)            model.joblib or model.pkl
    PyTorch (pytorch-*)                 model.mar

A custom serving image loads what it wants: nothing is checked for it. The directory is read where it really
is: for a job this emulator ran (`--run-jobs`) whose gs:// baseOutputDirectory it wrote on this machine
instead, in that folder (:meth:`vtrain.emulator.store.JobStore.local_outputs`); otherwise on the GCS emulator
when STORAGE_EMULATOR_HOST is set (google-cloud-storage, anonymous: never real Cloud Storage). With neither,
the emulator cannot see the directory and takes the upload unchecked, as the emulator guide says.
"""

from __future__ import annotations

import os
import re
from itertools import islice
from typing import Any

from vtrain.emulator.errors import invalid_argument

#: A Vertex prebuilt prediction image: its name says what it loads.
PREBUILT = re.compile(r"^(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai(?:-restricted)?/prediction/(?P<name>[^/:@]+)")
#: The files each prebuilt family loads, by the image name's prefix.
MODEL_FILES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("tf2-", "tf-", "tf_opt-"), ("saved_model.pb", "saved_model.pbtxt")),
    (("xgboost-",), ("model.bst", "model.joblib", "model.pkl")),
    (("sklearn-",), ("model.joblib", "model.pkl")),
    (("pytorch-",), ("model.mar",)),
)
#: Entries of a directory looked at, at most (the files sought are at its top).
MAX_ENTRIES = 10_000


def model_files(image_uri: str) -> tuple[str, ...] | None:
    """The files a prebuilt prediction image loads (one of them), or None for any other image."""
    found = PREBUILT.match(image_uri)
    if found is None:
        return None
    return next((files for prefixes, files in MODEL_FILES if found["name"].startswith(prefixes)), None)


def listing(uri: str, store: Any) -> set[str] | None:
    """The names directly in directory `uri`, or None when this emulator cannot see it (see the module)."""
    local = store.local_outputs(uri) if store is not None else None
    if local is not None:
        return {entry.name for entry in islice(local.iterdir(), MAX_ENTRIES)} if local.is_dir() else set()
    host = os.environ.get("STORAGE_EMULATOR_HOST")
    if not host or not uri.startswith("gs://"):
        return None
    from google.api_core.exceptions import GoogleAPICallError, NotFound
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    bucket, _, path = uri[len("gs://"):].partition("/")
    prefix = path.rstrip("/") + "/" if path.strip("/") else ""
    client = storage.Client(project="vtrain-emulator", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": host})
    try:
        blobs = client.list_blobs(bucket, prefix=prefix, delimiter="/", max_results=MAX_ENTRIES)
        return {blob.name[len(prefix):] for blob in blobs}
    except NotFound:
        return set()
    except (GoogleAPICallError, OSError) as err:
        raise invalid_argument(f"Model directory {uri} cannot be read: {str(err)[:300]}",
                               [("model.artifact_uri", "unreadable")]) from None


def check_model_dir(uri: str, image_uri: str, store: Any) -> None:
    """A 400 when the model directory lacks (or has more than one of) the files its prebuilt image loads."""
    wanted = model_files(image_uri)
    if wanted is None:
        return
    if not uri:
        raise invalid_argument(f"Model.artifact_uri is required: {image_uri} serves a model from its directory.",
                               [("model.artifact_uri", "required")])
    names = listing(uri, store)
    if names is None:
        return
    if len(names & set(wanted)) != 1:
        raise invalid_argument(f"Model directory {uri} is expected to contain exactly one of: [{', '.join(wanted)}].",
                               [("model.artifact_uri", f"exactly one of {', '.join(wanted)}")])


__all__ = ["MODEL_FILES", "check_model_dir", "listing", "model_files"]
