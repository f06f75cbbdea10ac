"""The actuator's port to the cloud (`CloudProvider`), its EC2 implementation and a fake."""
