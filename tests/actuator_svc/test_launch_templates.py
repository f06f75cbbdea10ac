"""Launch template garbage collection: idle templates go, used and young ones stay, and a
CreateFleet naming a template deleted under it (by another replica) still launches."""

from __future__ import annotations

import time
from dataclasses import replace

from actuator_svc.cloud.ec2 import AwsEndpoints, Ec2Cloud
from actuator_svc.cloud.provider import FleetOverride, FleetRequest, FleetTemplate
from actuator_svc.core.launch_template import LaunchTemplateConfig
from actuator_svc.core.tags import CLUSTER_TAG
from actuator_svc.launch_templates import LaunchTemplateCollector
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import CLUSTER
from tests.actuator_svc.test_launcher import Clock, make_cloud, make_launcher, od, request

HOUR = 3600.0


async def test_templates_idle_for_an_hour_are_deleted_and_used_ones_kept() -> None:
    """Of three configurations, the one neither created nor used in the last hour is deleted;
    one created long ago but used a minute ago, and one created a minute ago, stay."""
    cloud = make_cloud()
    clock = Clock()
    cloud.now = clock
    collector = LaunchTemplateCollector(cloud, cluster_name="demo", clock=clock)
    launcher, _ = make_launcher(cloud, clock, templates=collector)
    claim = request("lt-old", od("m5.large"))
    await launcher.launch(replace(claim, labels={"v": "1"}))
    await launcher.launch(replace(claim, nodeclaim_name="lt-used", labels={"v": "2"}))
    clock.now += 2 * HOUR
    await launcher.launch(replace(claim, nodeclaim_name="lt-used-again", labels={"v": "2"}))
    await launcher.launch(replace(claim, nodeclaim_name="lt-new", labels={"v": "3"}))
    clock.now += 60
    deleted = await collector.collect()
    assert len(deleted) == 1
    left = sorted(
        label
        for config in cloud.launch_templates.values()
        for label in ("v=1", "v=2", "v=3")
        if label in config.user_data
    )
    assert left == ["v=2", "v=3"]


async def test_templates_are_listed_deleted_and_recreated_on_the_emulator(
    emulator: Ec2Emulator,
) -> None:
    """Over EC2's API: a replica's template is listed by the cluster tag with its creation
    time; after another replica deletes it, the first replica's CreateFleet naming it
    re-creates it and launches."""
    config = LaunchTemplateConfig(
        cluster_name=CLUSTER,
        image_id=emulator.image_ids["x86_64"],
        user_data="#!/bin/bash\n",
        security_group_ids=(emulator.security_group_id,),
        tags={CLUSTER_TAG: CLUSTER},
    )
    endpoints = AwsEndpoints(ec2=emulator.endpoint_url)
    async with (
        Ec2Cloud(region="us-east-1", endpoints=endpoints) as first,
        Ec2Cloud(region="us-east-1", endpoints=endpoints) as second,
    ):
        await first.ensure_launch_template(config)
        listed = {t.name: t for t in await second.find_launch_templates({CLUSTER_TAG: CLUSTER})}
        assert abs(listed[config.name].created_seconds - time.time()) < 600
        await second.delete_launch_template(config.name)
        await second.delete_launch_template(config.name)  # already gone: fine
        assert config.name not in {
            t.name for t in await second.find_launch_templates({CLUSTER_TAG: CLUSTER})
        }
        zone = "us-east-1a"
        result = await first.create_fleet(
            FleetRequest(
                client_token="lt-recreate-1",
                capacity_type="on-demand",
                allocation_strategy="prioritized",
                templates=(
                    FleetTemplate(
                        config.name,
                        (FleetOverride("m5.large", emulator.subnet_ids[zone], zone, 0.0),),
                    ),
                ),
                tags={CLUSTER_TAG: CLUSTER},
            )
        )
        assert result.instance_id is not None
