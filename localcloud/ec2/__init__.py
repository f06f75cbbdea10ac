"""Local EC2: moto's server plus the capacity, pricing, idempotency and interruption realism
daiku depends on. See `Ec2Emulator`."""

from localcloud.ec2.app import ADMIN_PREFIX, CreateFleetCall
from localcloud.ec2.capacity import PoolKey
from localcloud.ec2.emulator import Ec2Emulator, eks_ami_name

__all__ = ["ADMIN_PREFIX", "CreateFleetCall", "Ec2Emulator", "PoolKey", "eks_ami_name"]
