"""Bearer tokens against a control plane with auth.tokens configured, and TLS."""

import shutil
import tempfile
import unittest

import grpc

import controlplane
from agentplane import TLS, AgentplaneError, Client
from agentplane.aio import AsyncClient


class TokenTest(unittest.TestCase):
    def test_token_is_sent_and_required(self):
        token, entry = controlplane.new_token("acme", "user")
        cp = controlplane.ControlPlane(config_yaml="auth:\n  require_principal: true\n  tokens:\n" + entry)
        self.addCleanup(cp.stop)
        with Client(cp.address) as anonymous:
            with self.assertRaises(AgentplaneError) as cm:
                anonymous.tasks.list_tasks()
            self.assertEqual(cm.exception.code, grpc.StatusCode.UNAUTHENTICATED)
            self.assertTrue(cm.exception.reason)
        with Client(cp.address, token=token) as c:
            self.assertEqual(c.capabilities.get_capabilities().capabilities.principal.tenant, "acme")
            with self.assertRaises(AgentplaneError) as cm:
                c.admin.get_stats()  # a user is not an admin
            self.assertEqual(cm.exception.code, grpc.StatusCode.PERMISSION_DENIED)

    def test_no_plaintext_token_off_loopback(self):
        with self.assertRaises(ValueError):
            Client("cp.example.com:7233", token="apt_x")
        Client("cp.example.com:7233", token="apt_x", plaintext_token=True).close()
        Client("cp.example.com:7233", token="apt_x", tls=True).close()
        for addr in ("127.0.0.1:1", "[::1]:1", "localhost:1"):
            Client(addr, token="apt_x").close()


class TLSTest(unittest.IsolatedAsyncioTestCase):
    async def test_ca_file_verifies_the_server(self):
        certs = tempfile.mkdtemp(prefix="agentplane-pytls-")
        self.addCleanup(shutil.rmtree, certs, True)
        cert, key = controlplane.tls_files(certs)
        token, entry = controlplane.new_token("acme", "user")
        cp = controlplane.ControlPlane(config_yaml=f"tls:\n  cert_file: {cert}\n  key_file: {key}\n"
                                       "auth:\n  require_principal: true\n  tokens:\n" + entry)
        self.addCleanup(cp.stop)
        with Client(cp.address, token=token, tls=TLS(ca_file=cert)) as c:
            self.assertEqual(c.capabilities.get_capabilities().capabilities.principal.tenant, "acme")
        async with AsyncClient(cp.address, token=token, tls=TLS(ca_file=cert)) as ac:
            caps = await ac.capabilities.get_capabilities()
            self.assertEqual(caps.capabilities.principal.tenant, "acme")
        # The system roots do not know the certificate; plaintext is not TLS.
        for tls in (True, None):
            with Client(cp.address, token=token, tls=tls) as c:
                with self.assertRaises(AgentplaneError) as cm:
                    c.capabilities.get_capabilities(timeout=10)
                self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE, tls)


if __name__ == "__main__":
    unittest.main()
