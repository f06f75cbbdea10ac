"""How daiku reads EC2 error codes: which mean "this offering has no capacity now"."""

from __future__ import annotations

from typing import Final

# Codes in a CreateFleet response's Errors[] (or raised by the call) that say the offering
# cannot be launched right now; the offering goes to the unavailable-offerings cache and the
# launch moves on to the next offerings at once. Karpenter's list, plus SpotMaxPriceTooLow.
UNAVAILABLE_OFFERING_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientFreeAddressesInSubnet",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "ReservationCapacityExceeded",
        "SpotMaxPriceTooLow",
    }
)

# Codes that exhaust a whole capacity type, not one pool: every offering of that capacity type
# in the launch is skipped (spot falls back to on-demand at once).
CAPACITY_TYPE_WIDE_CODES: Final = frozenset({"MaxSpotInstanceCountExceeded", "VcpuLimitExceeded"})

# A ClientToken already used with other parameters: another replica made this launch step with
# what its own caches chose (offerings, subnets, template); the step is that replica's.
IDEMPOTENT_PARAMETER_MISMATCH: Final = "IdempotentParameterMismatch"

# Transient service-side conditions: retried with jittered exponential backoff.
RETRYABLE_CODES: Final = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
    }
)


def is_unavailable_offering(code: str) -> bool:
    """True when `code` means the offering has no capacity now (cache it, try the next)."""
    return code in UNAVAILABLE_OFFERING_CODES


def is_capacity_type_wide(code: str) -> bool:
    """True when `code` rules out every offering of the same capacity type."""
    return code in CAPACITY_TYPE_WIDE_CODES


def is_retryable(code: str, http_status: int = 0) -> bool:
    """True for throttling and server-side errors, which a bounded backoff may outlast."""
    return code in RETRYABLE_CODES or http_status >= 500
