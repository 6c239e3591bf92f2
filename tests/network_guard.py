"""The outside-network guard behind the ``no_outside_network`` fixture (tests/conftest.py)."""


class OutsideConnection(AssertionError):
    pass


def loopback(address) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    return isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost"))
