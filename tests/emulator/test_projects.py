"""Issue 21 item 6: names carry the project number, as Vertex returns them; the ID is still taken on
input; a project that does not exist is IAM's 403, not a 404 (vtrain/emulator/projects.py)."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1

from vtrain.emulator import Emulator, sleep_runner
from vtrain.emulator.projects import canonical, project_number

POOL = v1.WorkerPoolSpec(machine_spec=v1.MachineSpec(machine_type="n1-standard-4"), replica_count=1,
                         container_spec=v1.ContainerSpec(image_uri="gcr.io/p/t:1"))
JOB = v1.CustomJob(display_name="p", job_spec=v1.CustomJobSpec(worker_pool_specs=[POOL]))


pytestmark = pytest.mark.emulator(runner=sleep_runner(5), pending_seconds=0, cancel_seconds=0,
                                  projects={"test-project"})


def test_numbers_are_stable_and_twelve_digits() -> None:
    assert project_number("test-project") == project_number("test-project") != project_number("other-project")
    assert len(project_number("test-project")) == 12 and project_number("123") == "123"
    assert canonical("projects/test-project/locations/l/customJobs/1") == \
        f"projects/{project_number('test-project')}/locations/l/customJobs/1"


def test_names_carry_the_number_and_either_form_is_taken(emu: Emulator) -> None:
    client = emu.client()
    number = project_number("test-project")
    created = client.create_custom_job(parent=emu.parent("test-project"), custom_job=JOB)
    assert created.name.startswith(f"projects/{number}/locations/us-central1/customJobs/")
    job_id = created.name.rsplit("/", 1)[1]
    by_id = client.get_custom_job(name=f"projects/test-project/locations/us-central1/customJobs/{job_id}")
    assert by_id.name == created.name == client.get_custom_job(name=created.name).name
    assert [j.name for j in client.list_custom_jobs(parent=emu.parent(number))] == [created.name]
    assert [j.name for j in client.list_custom_jobs(parent=emu.parent("test-project"))] == [created.name]
    client.cancel_custom_job(name=f"projects/test-project/locations/us-central1/customJobs/{job_id}")


@pytest.mark.parametrize("call", ["create", "list", "get", "cancel", "tuning-list"])
def test_a_project_that_does_not_exist_is_a_403(emu: Emulator, call: str) -> None:
    client = emu.client()
    parent = emu.parent("no-such-project")
    with pytest.raises(gexc.Forbidden) as raised:  # the REST client maps 403 to Forbidden
        if call == "create":
            client.create_custom_job(parent=parent, custom_job=JOB)
        elif call == "list":
            list(client.list_custom_jobs(parent=parent))
        elif call == "get":
            client.get_custom_job(name=f"{parent}/customJobs/123")
        elif call == "cancel":
            client.cancel_custom_job(name=f"{parent}/customJobs/123")
        else:
            list(client.list_hyperparameter_tuning_jobs(parent=parent))
    assert "(or it may not exist)" in raised.value.message
    assert raised.value.reason == "IAM_PERMISSION_DENIED"


def test_without_a_project_list_every_project_exists() -> None:
    with Emulator(runner=sleep_runner(0.1), pending_seconds=0) as emu:
        assert list(emu.client().list_custom_jobs(parent=emu.parent("any-project"))) == []
        with pytest.raises(gexc.NotFound):  # the project exists, the job does not
            emu.client().get_custom_job(name=f"{emu.parent('any-project')}/customJobs/123")


def test_vtrain_takes_a_returned_name_with_the_project_id_flag(emu: Emulator) -> None:
    """`vtrain status projects/NUMBER/... --project ID`: the number Vertex returned is no conflict with the ID."""
    from click.testing import CliRunner

    from vtrain.cli import cli

    created = emu.client().create_custom_job(parent=emu.parent("test-project"), custom_job=JOB)
    result = CliRunner().invoke(cli, ["status", created.name, "-o", "json", "--api-endpoint", emu.url,
                                      "--project", "test-project"])
    assert result.exit_code == 0, result.output
    other = CliRunner().invoke(cli, ["status", created.name, "--api-endpoint", emu.url, "--project", "123"])
    assert other.exit_code != 0 and "is in project" in other.output  # two numbers still disagree
