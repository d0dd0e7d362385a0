"""The official Python MCP SDK over HTTPS with an OAuth bearer token (issue 16).

`memstrata-mcp http` serves TLS with a certificate made in the test by a throwaway
CA (trustme), accepts JWTs from a local issuer whose key set is a JWKS file, and
keeps its store encrypted at rest (key file given through the environment). The
SDK's streamable HTTP client connects over https with an httpx client that trusts
the test CA and sends the token; a missing or expired token gets 401 with
WWW-Authenticate."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
import trustme
from conftest import HttpServer, start_http, stop
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

ISSUER = "https://idp.test.example/"
RESOURCE = "https://mem.test.example/mcp"
SCOPE = "memstrata:write:team-* memstrata:read:shared memstrata:global:read"
TIMEOUT = 120  # generous for a debug build on a loaded machine; not a performance check


@dataclass
class Tls:
    server: HttpServer
    url: str
    ca: trustme.CA
    signing_key: ec.EllipticCurvePrivateKey
    ssl_context: ssl.SSLContext


def mint(key: ec.EllipticCurvePrivateKey, *, exp_in: int = 600, scope: str = SCOPE, kid: str = "ec-1") -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "py-client", "iat": now, "exp": now + exp_in, "scope": scope}
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid})


@pytest.fixture
def tls_server(binary: str, tmp_path: Path) -> Iterator[Tls]:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_pem.write_to_path(str(key_file))
    cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    signing_key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(signing_key.public_key()))
    jwk.update({"kid": "ec-1", "alg": "ES256", "use": "sig"})
    jwks_file = tmp_path / "jwks.json"
    jwks_file.write_text(json.dumps({"keys": [jwk]}))
    enc_key = tmp_path / "store.key"
    enc_key.write_text("0f" * 32 + "\n")
    server = start_http(
        binary,
        tmp_path / "tls.mem",
        "--tls-cert", str(cert_file),
        "--tls-key", str(key_file),
        "--oauth-issuer", ISSUER,
        "--oauth-resource", RESOURCE,
        "--jwks-file", str(jwks_file),
        env={"MEMSTRATA_ENCRYPTION_KEY_FILE": str(enc_key)},
    )
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    yield Tls(server, f"https://localhost:{server.port}", ca, signing_key, ctx)
    stop(server)


def connect(tls: Tls, token: str) -> Client:
    client = httpx2.AsyncClient(
        verify=tls.ssl_context,
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=300),
    )
    return Client(streamable_http_client(f"{tls.url}/mcp", http_client=client), mode="legacy")


async def ok(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await c.call_tool(name, args)
    assert not r.is_error, f"{name}: {r.content}"
    return r.structured_content  # type: ignore[return-value]


async def test_sdk_over_https_with_a_bearer_token(tls_server: Tls) -> None:
    token = mint(tls_server.signing_key)
    async with connect(tls_server, token) as c:
        tools = await c.list_tools()
        names = {t.name for t in tools.tools}
        assert {"context_store", "context_retrieve", "knowledge_store", "system_status"} <= names
        await ok(c, "context_store", {"key": "k", "value": {"over": "tls"}, "namespace": "team-a"})
        got = await ok(c, "context_retrieve", {"key": "k", "namespace": "team-a"})
        assert got["value"] == {"over": "tls"}
        assert (await ok(c, "system_status", {}))["status"] == "healthy"
        # The token's scopes are enforced: `shared` is read-only, global data read-only.
        r = await c.call_tool("context_store", {"key": "k", "value": 1, "namespace": "shared"})
        assert r.is_error and r.content[0].text.startswith("FORBIDDEN")  # type: ignore[union-attr]
        r = await c.call_tool("session_create", {"name": "nope"})
        assert r.is_error and r.content[0].text.startswith("FORBIDDEN")  # type: ignore[union-attr]


def test_missing_expired_or_forged_tokens_get_401_with_www_authenticate(tls_server: Tls) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "execute",
            "params": {"tool": "context_retrieve", "parameters": {"key": "k", "namespace": "team-a"}}}
    url = f"{tls_server.url}/mcp/v1/execute"
    with httpx.Client(verify=tls_server.ssl_context, timeout=TIMEOUT) as h:
        r = h.post(url, json=body)
        assert r.status_code == 401
        www = r.headers["www-authenticate"]
        assert www.startswith("Bearer ") and "resource_metadata=" in www
        meta = h.get(f"{tls_server.url}/.well-known/oauth-protected-resource/mcp")
        assert meta.status_code == 200
        assert meta.json()["resource"] == RESOURCE
        assert meta.json()["authorization_servers"] == [ISSUER]
        other = ec.generate_private_key(ec.SECP256R1())
        for what, token in [
            ("expired", mint(tls_server.signing_key, exp_in=-3600)),
            ("forged", mint(other)),
            ("unknown kid", mint(tls_server.signing_key, kid="ec-404")),
        ]:
            r = h.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 401, what
            assert 'error="invalid_token"' in r.headers["www-authenticate"], what
            assert token not in r.text, what
        # A valid token on the same raw endpoint works.
        r = h.post(url, json=body, headers={"Authorization": f"Bearer {mint(tls_server.signing_key)}"})
        assert r.status_code == 200, r.text
    # Plain HTTP to the TLS port gets no answer (TLS only), and an untrusted client refuses the server.
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"http://127.0.0.1:{tls_server.server.port}/mcp/v1/execute", json=body, timeout=10)
    with pytest.raises(httpx.HTTPError):
        httpx.post(url, json=body, timeout=10)


def test_the_store_behind_it_is_encrypted(binary: str, tls_server: Tls) -> None:
    token = mint(tls_server.signing_key)
    with httpx.Client(verify=tls_server.ssl_context, timeout=TIMEOUT) as h:
        body = {"jsonrpc": "2.0", "id": 1, "method": "execute",
                "params": {"tool": "context_store",
                           "parameters": {"key": "k", "value": "SealedMarkerValue", "namespace": "team-a"}}}
        r = h.post(f"{tls_server.url}/mcp/v1/execute", json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
    stop(tls_server.server)
    store = tls_server.server.store
    for f in (store / "db").rglob("*"):
        if f.is_file():
            assert b"SealedMarkerValue" not in f.read_bytes(), f
    # Without the key the store does not open.
    out = subprocess.run([binary, "--store", str(store), "status"], capture_output=True, text=True, timeout=TIMEOUT)
    assert "is encrypted" in out.stdout + out.stderr
