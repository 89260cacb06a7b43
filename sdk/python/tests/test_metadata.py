"""The package metadata: pyproject.toml declares bounded grpcio and protobuf ranges whose
lowest versions are the ones the suite is run with, and this run's versions are not below
them."""

import os
import re
import unittest

import google.protobuf
import grpc

import controlplane


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


class MetadataTest(unittest.TestCase):
    def test_declared_lowest_versions(self):
        with open(os.path.join(controlplane.HERE, "..", "pyproject.toml")) as f:
            deps = dict(re.findall(r'"(grpcio|protobuf)>=([\d.]+),<[\d.]+"', f.read()))
        self.assertEqual(set(deps), {"grpcio", "protobuf"},
                         "pyproject.toml must declare grpcio and protobuf as bounded ranges (>=lowest,<next major)")
        for name, installed in (("grpcio", grpc.__version__), ("protobuf", google.protobuf.__version__)):
            self.assertGreaterEqual(_version(installed), _version(deps[name]),
                                    f"{name} {installed} is older than the declared lowest {deps[name]}")
            if _version(installed) != _version(deps[name]):
                print(f"note: {name} {installed} runs this suite; pyproject.toml declares {deps[name]}")


if __name__ == "__main__":
    unittest.main()
