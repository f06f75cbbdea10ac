"""`Ec2Emulator`: moto's server on loopback, seeded for a cluster, with controllable realism.

The server runs werkzeug's threaded WSGI server on a background thread (as moto's
ThreadedMotoServer does), so code under test talks real HTTP to it from the same process.
moto keeps its state in process-wide backends, so one emulator at a time may run per process;
starting one resets that state.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

import structlog
from werkzeug.serving import BaseWSGIServer, make_server

from localcloud.ec2 import events, impairment, moto_fast_paths
from localcloud.ec2.app import (
    DEFAULT_ACCOUNT_ID,
    CreateFleetCall,
    Ec2EmulatorApp,
    EmulatorState,
    fleet_context_for_region,
)
from localcloud.ec2.capacity import (
    INSUFFICIENT_CAPACITY,
    InjectedFault,
    InjectedFleetAnswer,
    PoolKey,
)
from localcloud.ec2.reservations import DEFAULT, CapacityReservation

log = structlog.get_logger(__name__)

DISCOVERY_TAG = "karpenter.sh/discovery"
EKS_KUBERNETES_VERSION = "1.32"
EKS_AMI_RELEASE = "v20260101"
# The account that publishes the EKS-optimized AMIs.
EKS_AMI_OWNER_ID = "602401143452"
EKS_AMI_ARCHITECTURES = ("x86_64", "arm64")


class _RunningEmulator:
    """The one emulator running in this process (moto's backends are process-wide)."""

    lock = threading.Lock()
    current: Ec2Emulator | None = None


def eks_ami_name(architecture: str) -> str:
    """Name of the seeded EKS AL2023 AMI for `architecture` (`x86_64` or `arm64`)."""
    return (
        f"amazon-eks-node-al2023-{architecture}-standard-{EKS_KUBERNETES_VERSION}-{EKS_AMI_RELEASE}"
    )


class Ec2Emulator:
    """EC2 (with capacity pools, faults, idempotent CreateFleet), SQS and Pricing on one port."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        region: str = "us-east-1",
        cluster_name: str = "daiku",
        *,
        emit_state_changes: bool = False,
        fast_describe_instances: bool = True,
    ) -> None:
        """`emit_state_changes`: send shutting-down/terminated state-change notifications to the
        interruption queue when instances are terminated (as an EventBridge rule would).
        `fast_describe_instances=False` lets moto answer DescribeInstances itself (seconds for a
        thousand instances; see `localcloud.ec2.describe_instances`), for comparison."""
        self.host = host
        self.port = port
        self.region = region
        self.cluster_name = cluster_name
        self.account_id = DEFAULT_ACCOUNT_ID
        self._state = EmulatorState(
            region=region, cluster_name=cluster_name, context=fleet_context_for_region(region)
        )
        self._state.fast_describe_instances = fast_describe_instances
        self._state.send_event = self._send_event_from_admin
        self._state.impair = lambda payload: self.impair_instance(
            str(payload["instance_id"]), impaired=bool(payload.get("impaired", True))
        )
        if emit_state_changes:
            self._state.on_instances_terminated = self._notify_terminated
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.subnet_ids: dict[str, str] = {}
        self.security_group_id = ""
        self.image_ids: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Reset moto, seed the cluster's resources and serve on a background thread."""
        with _RunningEmulator.lock:
            running = _RunningEmulator.current
            if running is not None:
                raise RuntimeError(
                    f"an Ec2Emulator is already running in this process at "
                    f"{running.endpoint_url}; moto's state is process-wide, stop it first"
                )
            _RunningEmulator.current = self
        try:
            from moto.moto_api._internal.models import moto_api_backend
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )

            moto_api_backend.reset()
            moto_fast_paths.install()
            impairment.install()

            class QuietRequestHandler(MotoRequestHandler):
                # werkzeug logs every request to stderr; the emulator logs what matters itself.
                def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                    return

            app = Ec2EmulatorApp(DomainDispatcherApplication(create_backend_app), self._state)
            self._server = make_server(
                self.host, self.port, app, threaded=True, request_handler=QuietRequestHandler
            )
            self.port = int(self._server.server_address[1])
            self._state.endpoint_url = f"http://{self.host}:{self.port}"
            self._seed()
            server = self._server
            self._thread = threading.Thread(
                # A short poll interval keeps stop() fast; idle polling costs next to nothing.
                target=lambda: server.serve_forever(poll_interval=0.05),
                name=f"ec2-emulator-{self.port}",
                daemon=True,
            )
            self._thread.start()
        except BaseException:
            self._release()
            raise
        log.info(
            "ec2_emulator_started",
            endpoint_url=self.endpoint_url,
            region=self.region,
            cluster_name=self.cluster_name,
        )

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None
        self._release()

    def _release(self) -> None:
        with _RunningEmulator.lock:
            if _RunningEmulator.current is self:
                _RunningEmulator.current = None

    def __enter__(self) -> Ec2Emulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Ec2Emulator:
        import asyncio

        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)

    # -- what clients need -----------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """`http://HOST:PORT`, serving EC2, SQS and Pricing (set once started)."""
        if not self._state.endpoint_url:
            raise RuntimeError("the emulator has not been started")
        return self._state.endpoint_url

    @property
    def interruption_queue_url(self) -> str:
        """URL of the seeded SQS queue `<cluster>-interruption`."""
        return self._state.interruption_queue_url

    @property
    def interruption_queue_name(self) -> str:
        return f"{self.cluster_name}-interruption"

    # -- controls --------------------------------------------------------------------------

    def set_capacity(
        self,
        *,
        instance_type: str,
        zone: str,
        capacity_type: str,
        available: bool,
        error_code: str = INSUFFICIENT_CAPACITY,
    ) -> None:
        """Mark a pool as having capacity or not (launches into it then fail with `error_code`)."""
        self._state.pools.set(
            PoolKey(instance_type, zone, capacity_type), available=available, error_code=error_code
        )

    def create_capacity_reservation(
        self,
        *,
        instance_type: str,
        zone: str,
        count: int,
        reservation_type: str = DEFAULT,
        end_date: datetime | None = None,
        tags: dict[str, str] | None = None,
    ) -> CapacityReservation:
        """An On-Demand Capacity Reservation, or (`reservation_type="capacity-block"`, with
        `end_date`) a Capacity Block, owned by the emulator's account."""
        return self._state.reservations.create(
            instance_type=instance_type,
            zone=zone,
            count=count,
            owner_id=self.account_id,
            reservation_type=reservation_type,
            end_date=end_date,
            tags=tags,
        )

    def exhaust_subnet(self, subnet_id: str) -> None:
        """Use up the subnet's free addresses: DescribeSubnets reports 0 available and a launch
        into it fails with InsufficientFreeAddressesInSubnet."""
        from moto.ec2.models import ec2_backends

        with self._state.ec2_lock:
            subnet = ec2_backends[self.account_id][self.region].get_subnet(subnet_id)
            subnet._available_ip_addresses -= subnet.available_ip_address_count

    def reset_capacity(self) -> None:
        """Give every pool capacity again."""
        self._state.pools.reset()

    def inject_fault(
        self,
        *,
        action: str,
        error_code: str,
        count: int = 1,
        http_status: int | None = None,
        message: str | None = None,
    ) -> InjectedFault:
        """Make the next `count` calls of EC2 `action` (`*`: any) fail with `error_code`."""
        return self._state.faults.inject(
            action=action,
            error_code=error_code,
            count=count,
            http_status=http_status,
            message=message,
        )

    @property
    def fast_describe_instances(self) -> bool:
        """Whether the emulator answers DescribeInstances (True) or moto does (False)."""
        return self._state.fast_describe_instances

    @fast_describe_instances.setter
    def fast_describe_instances(self, enabled: bool) -> None:
        with self._state.ec2_lock:
            self._state.fast_describe_instances = enabled
            self._state.instance_responses.invalidate()

    @property
    def describe_instances_rendered(self) -> int:
        """Reservation items the fast path has serialized so far (each is then reused)."""
        return self._state.instance_responses.rendered_count

    def inject_fleet_answer(
        self, *, kind: str, count: int = 1, error_code: str | None = None
    ) -> InjectedFleetAnswer:
        """Make the next `count` instant CreateFleet calls answer `kind`: `empty` (no instance,
        no error) or `unattributed-error` (one error, `error_code`, naming no override)."""
        return self._state.fleet_answers.inject(kind=kind, count=count, error_code=error_code)

    def clear_faults(self) -> None:
        """Disarm injected faults and injected CreateFleet answers."""
        self._state.faults.reset()
        self._state.fleet_answers.reset()

    @property
    def create_fleet_calls(self) -> list[CreateFleetCall]:
        """Every CreateFleet request received so far, in arrival order."""
        return self._state.create_fleet_calls()

    def clear_create_fleet_calls(self) -> None:
        self._state.clear_create_fleet_calls()

    def send_spot_interruption(
        self, instance_id: str, queue_url: str | None = None, *, terminate: bool = False
    ) -> str:
        """Send an EC2 Spot Instance Interruption Warning for `instance_id`; returns its id.

        `terminate=True` also reclaims the instance at once (the two-minute notice collapsed),
        sending state-change notifications when the emulator emits them.
        """
        body = events.spot_interruption_warning(
            instance_id, region=self.region, account_id=self.account_id, now=datetime.now(UTC)
        )
        message_id = self._send(body, queue_url)
        if terminate:
            self.terminate_instance(instance_id)
        return message_id

    def terminate_instance(self, instance_id: str) -> None:
        """Terminate an instance as EC2 would on its own (spot reclaim, hardware failure)."""
        from moto.ec2.models import ec2_backends

        with self._state.ec2_lock:
            ec2_backends[self.account_id][self.region].terminate_instances([instance_id])
        self._state.reservations.release([instance_id])
        if self._state.on_instances_terminated is not None:
            self._state.on_instances_terminated([instance_id])

    def impair_instance(self, instance_id: str, *, impaired: bool = True) -> None:
        """Fail (or, `impaired=False`, pass again) the instance's status checks: it keeps
        running, DescribeInstanceStatus says `impaired`, and localcloud's kubelet on it stops
        posting node status (a hardware or kernel failure). Unknown ids raise moto's
        InvalidInstanceID error."""
        from moto.ec2.models import ec2_backends

        with self._state.ec2_lock:
            instance = ec2_backends[self.account_id][self.region].get_instance(instance_id)
            impairment.mark(instance, impaired=impaired)

    def _notify_terminated(self, instance_ids: list[str]) -> None:
        for instance_id in instance_ids:
            for state in ("shutting-down", "terminated"):
                self.send_instance_state_change(instance_id, state)

    def send_rebalance_recommendation(self, instance_id: str, queue_url: str | None = None) -> str:
        """Send an EC2 Instance Rebalance Recommendation for `instance_id`."""
        body = events.rebalance_recommendation(
            instance_id, region=self.region, account_id=self.account_id, now=datetime.now(UTC)
        )
        return self._send(body, queue_url)

    def send_instance_state_change(
        self, instance_id: str, state: str, queue_url: str | None = None
    ) -> str:
        """Send an EC2 Instance State-change Notification (`state`, e.g. `terminated`)."""
        body = events.instance_state_change(
            instance_id,
            state,
            region=self.region,
            account_id=self.account_id,
            now=datetime.now(UTC),
        )
        return self._send(body, queue_url)

    def _send(self, body: str, queue_url: str | None) -> str:
        from moto.sqs.models import sqs_backends

        url = queue_url or self.interruption_queue_url
        parts = urlparse(url).path.strip("/").split("/")
        if len(parts) != 2:
            raise ValueError(f"queue_url {url!r} is not of the form http://host/<account>/<name>")
        account, name = parts
        message = sqs_backends[account][self.region].send_message(name, body)
        return str(message.id)

    def _send_event_from_admin(self, payload: Any) -> dict[str, Any]:
        instance_id = str(payload["instance_id"])
        queue_url = payload.get("queue_url")
        kind = str(payload.get("kind", "spot-interruption"))
        if kind == "spot-interruption":
            terminate = bool(payload.get("terminate", False))
            message_id = self.send_spot_interruption(instance_id, queue_url, terminate=terminate)
        elif kind == "rebalance-recommendation":
            message_id = self.send_rebalance_recommendation(instance_id, queue_url)
        elif kind == "state-change":
            message_id = self.send_instance_state_change(
                instance_id, str(payload["state"]), queue_url
            )
        else:
            raise ValueError(
                f"kind must be spot-interruption, rebalance-recommendation or state-change, "
                f"got {kind!r}"
            )
        return {"message_id": message_id}

    # -- seeding ---------------------------------------------------------------------------

    def _seed(self) -> None:
        """Create what a cluster's EC2NodeClass and interruption handling discover."""
        from moto.ec2.models import ec2_backends
        from moto.ec2.models.amis import Ami
        from moto.ec2.utils import random_ami_id
        from moto.sqs.models import sqs_backends

        backend = ec2_backends[self.account_id][self.region]
        discovery = {DISCOVERY_TAG: self.cluster_name}
        for zone, subnet in sorted(backend.get_default_subnets().items()):
            backend.create_tags([subnet.id], {**discovery, "Name": f"{self.cluster_name}-{zone}"})
            self.subnet_ids[str(zone)] = str(subnet.id)
        group = backend.create_security_group(
            name=f"{self.cluster_name}-nodes",
            description=f"nodes of cluster {self.cluster_name}",
            tags={**discovery, "Name": f"{self.cluster_name}-nodes"},
        )
        self.security_group_id = str(group.id)
        for architecture in EKS_AMI_ARCHITECTURES:
            ami = Ami(
                backend,
                random_ami_id(),
                name=eks_ami_name(architecture),
                description=f"EKS-optimized AL2023 node image for Kubernetes "
                f"{EKS_KUBERNETES_VERSION} ({architecture})",
                owner_id=EKS_AMI_OWNER_ID,
                owner_alias="amazon",
                public=True,
                virtualization_type="hvm",
                architecture=architecture,
                creation_date=datetime(2026, 1, 1, tzinfo=UTC),
                hypervisor="xen",
                root_device_type="ebs",
                root_device_name="/dev/xvda",
                region_name=f"{self.region}a",
                boot_mode="uefi-preferred",
            )
            backend.amis[ami.id] = ami
            self.image_ids[architecture] = str(ami.id)
        sqs_backends[self.account_id][self.region].create_queue(self.interruption_queue_name)
        self._state.interruption_queue_url = (
            f"{self._state.endpoint_url}/{self.account_id}/{self.interruption_queue_name}"
        )
