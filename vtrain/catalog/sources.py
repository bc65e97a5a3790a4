"""Where each row of the catalog comes from: a Google page (or the API's own Discovery document) and the day
it was read for that row.

A :class:`Source` is *verified* when the fact was read on the page that day. A row whose page could not be
read (the fact is an older reading, or Google's page was out of reach when the row was checked again) is
*unverified*: the rules then warn where they would refuse, and the emulator, which answers as the table
does, accepts. ``vtrain catalog --json`` prints every row with its ``source`` and ``checked`` date.

The Discovery documents are the ones google-api-python-client ships (``googleapiclient/discovery_cache/
documents/aiplatform.v1.json`` and ``compute.v1.json``, revision 20261106: the aiplatform one is now titled
"Agent Platform API"); ``tests/ground/test_catalog_sources.py`` reads them, and the installed aiplatform_v1
protos, and fails when Google lists a value the catalog neither has nor refuses with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """A page and the day a row was checked on it (YYYY-MM-DD). `verified` False: the fact could not be read
    there that day (`note` says what is known and from where); the rules warn instead of refusing on it."""

    url: str
    checked: str
    verified: bool = True
    note: str = ""

    def doubt(self) -> str:
        """The clause a warning ends with when it rests on this source: '' when verified."""
        if self.verified:
            return ""
        return f" (not confirmed: {self.url} could not be read for it on {self.checked})"

    def as_dict(self) -> dict[str, object]:
        return {"source": self.url, "checked": self.checked, "verified": self.verified, "note": self.note}


@dataclass(frozen=True)
class Fact:
    """One more thing a row says, from a page of its own (a machine's CPU architecture, its boot disks)."""

    what: str
    source: Source

    def as_dict(self) -> dict[str, object]:
        return {"fact": self.what, **self.source.as_dict()}


_DOCS = "https://cloud.google.com/vertex-ai/docs"
_COMPUTE = "https://cloud.google.com/compute/docs"
_TODAY = "2026-12-05"  # the day issue 44's pass read the pages (the Discovery documents: revision 20261106)
_TABLES = "2026-11-29"  # the pass that checked the machine, GPU and image tables against Vertex's pages

# --- the API itself: the Discovery document and the installed protos -------------------------------------------
DISCOVERY = Source("https://aiplatform.googleapis.com/$discovery/rest?version=v1", _TODAY,
                   note="revision 20261106 (\"Agent Platform API\"), as google-api-python-client ships it")
ACCELERATOR_ENUM = Source(f"{_DOCS}/reference/rest/v1/MachineSpec#acceleratortype", _TODAY,
                          note="every value of AcceleratorType; NVIDIA_TESLA_K80 marked deprecated (end of support)")
DISK_SPEC = Source(f"{_DOCS}/reference/rest/v1/DiskSpec", _TODAY,
                   note="valid bootDiskType values pd-ssd, pd-standard, hyperdisk-balanced; default pd-ssd, "
                        "hyperdisk-balanced for A3U machines; 100 GB by default")
SCHEDULING = Source(f"{_DOCS}/reference/rest/v1/CustomJobSpec#scheduling", _TODAY,
                    note="Scheduling.strategy (ON_DEMAND and LOW_COST deprecated); maxWaitDuration: 0 waits "
                         "indefinitely, 24 hours by default")
RESERVATION_AFFINITY = Source(f"{_DOCS}/reference/rest/v1/MachineSpec#reservationaffinity", _TODAY,
                              note="values: the resource name of the reservation, reservation block, or "
                                   "reservation sub-block")
COMPUTE_DISCOVERY = Source("https://compute.googleapis.com/$discovery/rest?version=v1", _TODAY,
                           note="revision 20261106: reservationBlocks and reservationSubBlocks resource paths")
K80_EOL = Source(f"{_COMPUTE}/eol/k80-eol", _TODAY, note="named by AcceleratorType's own description of K80")

# --- Vertex AI's training pages ------------------------------------------------------------------------------
MACHINE_TYPES = Source(f"{_DOCS}/training/configure-compute#machine-types", _TABLES,
                       note="re-read 2026-12-05: only the opening of the list could be read (a4x-highgpu-4g, "
                            "a4-highgpu-8g, a3-ultragpu-8g, a3-megagpu-8g, ...)")
GPU_TABLE = Source(f"{_DOCS}/training/configure-compute#gpu-compatibility-table", _TABLES,
                   note="N1 GPU counts and the most vCPUs each count allows; fixed GPUs of A2/A3/A4/G2")
BOOT_DISK_RANGE = Source(f"{_DOCS}/training/configure-compute#boot_disk_options", _TABLES,
                         note="100 to 64,000 GB")
TPU_CONFIG = Source(f"{_DOCS}/training/configure-compute#tpu", "2026-12-01",
                    note="cloud-tpu with 8 TPU_V2/TPU_V3 cores; TPU VMs ct4p/ct5p/ct5lp/ct6e with tpuTopology")
TPU_TRAINING = Source(f"{_DOCS}/training/training-with-tpu-vm", _TODAY,
                      note="TPU v2, v3 and v5e VMs; v5e: JAX, TensorFlow 2.15+, PyTorch; v6e: JAX and PyTorch "
                           "(no TensorFlow named)")
A4X_ARM = Source(f"{_DOCS}/training/training-clusters/compute-resources", _TODAY,
                 note="A4X (a4x-highgpu-4g): ARM CPUs, 4 GPUs a node; A3/A4: x86; jobs on A4X must use images "
                      "built for ARM")
DWS = Source(f"{_DOCS}/training/schedule-jobs-dws#requirements", _TABLES,
             note="flex-start: L4, A100, H100, H200, B200 GPUs; timeout at most 7 days")
PREBUILT_TRAINING = Source(f"{_DOCS}/training/pre-built-containers#tensorflow", _TABLES,
                           note="tf-cpu/tf-gpu 2.12-2.17 .py310; tf-tpu 2.12 (Python 3.8) and 2.15 .cp310; "
                                "x86_64 images (no Arm variant is listed)")
PREBUILT_PREDICTION = Source(f"{_DOCS}/predictions/pre-built-containers#tensorflow", _TODAY, verified=False,
                             note="read 2026-12-02: tf2-cpu/tf2-gpu 2.1-2.15, none after; checked again "
                                  "2026-12-05, when the page's table could not be read")
REDUCTION_SERVER = Source(f"{_DOCS}/training/distributed-training#reduction-server", _TABLES,
                          note="image per multi-region; n1-highcpu-16 recommended")
REGIONS = Source(f"{_DOCS}/general/locations#available-regions", _TODAY, verified=False,
                 note="the list was written from this page and not re-checked; used for did-you-mean only")
QUOTAS = Source(f"{_DOCS}/quotas#serverless_training", _TODAY, verified=False,
                note="the custom_model_training_* metric names were read from quota errors and the console, "
                     "not from this page")

# --- Compute Engine and Cloud TPU pages ----------------------------------------------------------------------
ACCELERATOR_MACHINES = Source(f"{_COMPUTE}/accelerator-optimized-machines", _TODAY,
                              note="series A4X, A4, A3 (High, Mega, Ultra), A2, G4, G2; A3 High 1g/2g/4g for Spot "
                                   "and flex-start only")
HYPERDISK_ONLY = Source(f"{_COMPUTE}/accelerator-optimized-machines#supported_disk_types", _TODAY,
                        note="A3 Ultra and A4 take Hyperdisk only (as issue 44's filer read it; the DiskSpec "
                             "reference makes A3U's default hyperdisk-balanced)")
HYPERDISK_UNREAD = Source(f"{_COMPUTE}/accelerator-optimized-machines#supported_disk_types", _TODAY, verified=False,
                          note="A4X: Hyperdisk only as A4 is; the disk table could not be read")
N4_LISTED = Source(f"{_DOCS}/training/configure-compute#machine-types", _TODAY, verified=False,
                   note="added 2026-11-29; the emulator's table, written from the same page, lacked it; the page's "
                        "N-series part could not be read 2026-12-05")
N4_DISKS = Source(f"{_COMPUTE}/general-purpose-machines#n4_disks", _TODAY, verified=False,
                  note="N4 takes Hyperdisk only (Red Hat's GCP PD CSI notes say so too); the page could not be read")
G4_LISTED = Source(f"{_DOCS}/training/configure-compute#machine-types", _TODAY, verified=False,
                   note="G4 (RTX PRO 6000) is in the v1 AcceleratorType enum; its training-page entry was not read")
GPU_NETWORK = Source(f"{_COMPUTE}/gpus/gpu-network-bandwidth", _TABLES,
                     note="series maxima A4X 2000, A4/A3 Ultra 3600, A3 Mega 1800, A3 High 1000, A2/G2 100, G4 400 "
                          "Gbps; per-type figures below a series maximum not re-checked")
CPU_NETWORK = Source(f"{_COMPUTE}/network-bandwidth", _TABLES, verified=False,
                     note="2 Gbps per vCPU up to 32 (E2 16); N2 small shapes 10 (cluster-director/docs/compute); "
                          "N4's 10 floor and 50 cap from memory")
GENERAL_PURPOSE = Source(f"{_COMPUTE}/general-purpose-machines", _TABLES,
                         note="memory per vCPU: N1 3.75/6.5/0.9, N2 and E2 4/8/1, N4 4/8/2, C2 4 GB")
MEMORY_OPTIMIZED = Source(f"{_COMPUTE}/memory-optimized-machines", _TABLES, note="M1 totals")
GPUS = Source(f"{_COMPUTE}/gpus", _TABLES,
              note="GPU memory: H100 80, A100 40/80, L4 24, T4 16, V100 16, P4 8 checked; H200 141, B200 180, "
                   "GB200 186, RTX PRO 6000 96, P100 16 from the same page, not re-checked")
CUDA_GPUS = Source("https://developer.nvidia.com/cuda-gpus", _TABLES, note="compute capability (NVIDIA's table)")
MIG = Source("https://cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi", _TABLES,
             note="MIG partition sizes per GPU, from NVIDIA's MIG user guide, which this page points to")
TPU_V2 = Source("https://cloud.google.com/tpu/docs/v2", _TABLES, verified=False, note="16 GiB HBM, 2 TensorCores")
TPU_V3 = Source("https://cloud.google.com/tpu/docs/v3", _TABLES, note="32 GiB HBM, 2 TensorCores a chip")
TPU_V4 = Source("https://cloud.google.com/tpu/docs/v4", _TABLES, verified=False,
                note="32 GiB HBM, 4 chips a host, the slice shapes: the page was not returned by the search tool")
TPU_V5P = Source("https://cloud.google.com/tpu/docs/v5p", "2026-12-01",
                 note="95 GiB HBM, 4 chips a host, the most common single-slice shapes 2x2x1 to 16x16x24")
TPU_V5E = Source("https://cloud.google.com/tpu/docs/v5e", _TODAY, note="16 GB HBM2, one TensorCore a chip, 2D slices")
TPU_V6E = Source("https://cloud.google.com/tpu/docs/v6e", _TABLES, note="32 GB HBM, one TensorCore a chip")
TPU_NETWORK = Source("https://cloud.google.com/tpu/docs/system-architecture-tpu-vm", _TABLES, verified=False,
                     note="TPU VM NIC figures are not re-checked, except v5p's 50 Gbps of data-center network a chip")

#: Python's own documents, for the standard library each minor has (what a trainer may import on an image).
PYTHON_WHATSNEW = Source("https://docs.python.org/3/whatsnew/index.html", _TODAY,
                         note="modules added and removed by each release, as each 'What's New' page lists them")

__all__ = ["Fact", "Source"]
