"""Test peer: an MCP server (PyPI `mcp==2.3.0`, .peers/venv) protected by the
oidc-provider authorization server in tests/peers/oidc/server.mjs.

Usage:
    .peers/venv/bin/python tests/peers/oidc/protected_mcp.py <port> <issuer>
e.g.
    .peers/venv/bin/python tests/peers/oidc/protected_mcp.py 9401 http://127.0.0.1:9400

Serves streamable HTTP on http://127.0.0.1:<port>/mcp. Resource identifier
(RFC 8707 / RFC 9728): http://127.0.0.1:<port>/mcp; protected resource metadata
at /.well-known/oauth-protected-resource/mcp naming <issuer> as the
authorization server. Unauthenticated requests get 401 with
`WWW-Authenticate: Bearer ... resource_metadata="..."` (mcp's own middleware).

Token check: the access token must be a JWT (RFC 9068) signed by a key from
the issuer's jwks_uri, with iss == <issuer>, aud containing the resource URL,
and a valid exp. The issuer issues JWTs only for requests that carried
`resource=<that URL>`; opaque tokens are refused (oidc-provider cannot
introspect its JWTs, so no introspection is used).

DPoP (RFC 9449): `Authorization: DPoP <token>` plus a `DPoP` proof header is
accepted; the proof (typ dpop+jwt, htm, htu, iat within 300 s, ath) is checked
and its key thumbprint must equal the token's cnf.jkt. A DPoP-bound token sent
as `Bearer` is refused. (jti replay is not tracked.)

Tool: whoami() -> {"sub", "client_id", "scopes", "aud", "dpop_jkt"}.
Prints READY on stdout once listening.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import json
import sys
import time
import warnings

import anyio
import jwt
import uvicorn

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

warnings.filterwarnings("ignore", category=DeprecationWarning)

if len(sys.argv) != 3:
    print("usage: protected_mcp.py <port> <issuer>", file=sys.stderr)
    sys.exit(2)
PORT = int(sys.argv[1])
ISSUER = sys.argv[2].rstrip("/")
RESOURCE = f"http://127.0.0.1:{PORT}/mcp"

# jkt of a verified DPoP proof on the current request (None: no DPoP)
_dpop_jkt: contextvars.ContextVar[str | None] = contextvars.ContextVar("dpop_jkt", default=None)
_jwks_client: jwt.PyJWKClient | None = None


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwk_thumbprint(jwk: dict) -> str:
    members = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}[jwk["kty"]]
    canon = json.dumps({k: jwk[k] for k in members}, separators=(",", ":"), sort_keys=True)
    return _b64u(hashlib.sha256(canon.encode()).digest())


def _jwks() -> jwt.PyJWKClient:
    global _jwks_client
    if _jwks_client is None:
        import urllib.request

        with urllib.request.urlopen(f"{ISSUER}/.well-known/openid-configuration", timeout=5) as r:
            meta = json.load(r)
        _jwks_client = jwt.PyJWKClient(meta["jwks_uri"], cache_keys=True)
    return _jwks_client


class JwtTokenVerifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = await anyio.to_thread.run_sync(lambda: _jwks().get_signing_key_from_jwt(token))
            header = jwt.get_unverified_header(token)
            if header.get("typ", "").lower() not in ("at+jwt", "application/at+jwt"):
                return None
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["ES256", "RS256", "PS256", "EdDSA"],
                audience=RESOURCE,
                issuer=ISSUER,
                options={"require": ["exp", "iss", "aud", "client_id"]},
            )
        except Exception as exc:  # noqa: BLE001
            print(f"[protected_mcp] token rejected: {exc!r}", file=sys.stderr)
            return None
        bound = (claims.get("cnf") or {}).get("jkt")
        if bound != _dpop_jkt.get():
            # bound token without matching proof, or a proof for an unbound token
            print(f"[protected_mcp] DPoP binding mismatch: cnf.jkt={bound} proof={_dpop_jkt.get()}", file=sys.stderr)
            return None
        return AccessToken(
            token=token,
            client_id=claims["client_id"],
            scopes=(claims.get("scope") or "").split(),
            expires_at=claims["exp"],
            resource=RESOURCE,
            subject=claims.get("sub"),
            claims=claims,
        )


class DPoPMiddleware:
    """Turns `Authorization: DPoP <at>` + valid `DPoP` proof into a Bearer header
    for mcp's BearerAuthBackend and records the proof key's thumbprint."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = [(k, v) for k, v in scope["headers"]]
        auth = next((v.decode() for k, v in headers if k == b"authorization"), "")
        proofs = [v.decode() for k, v in headers if k == b"dpop"]
        token = _dpop_jkt.set(None)
        try:
            if auth[:5].lower() == "dpop ":
                at = auth[5:].strip()
                jkt = self._check_proof(scope, proofs, at)
                if jkt is None:
                    headers = [(k, v) for k, v in headers if k != b"authorization"]
                else:
                    _dpop_jkt.set(jkt)
                    headers = [(k, v) for k, v in headers if k != b"authorization"]
                    headers.append((b"authorization", f"Bearer {at}".encode()))
                scope = dict(scope, headers=headers)
            return await self.app(scope, receive, send)
        finally:
            _dpop_jkt.reset(token)

    @staticmethod
    def _check_proof(scope, proofs: list[str], at: str) -> str | None:
        try:
            if len(proofs) != 1:
                raise ValueError("exactly one DPoP header required")
            proof = proofs[0]
            header = jwt.get_unverified_header(proof)
            if header.get("typ") != "dpop+jwt" or "jwk" not in header or "d" in header["jwk"]:
                raise ValueError("bad DPoP header")
            key = jwt.PyJWK(header["jwk"], algorithm=header.get("alg"))
            claims = jwt.decode(proof, key.key, algorithms=["ES256", "RS256", "PS256", "EdDSA"],
                                options={"verify_aud": False})
            host = next((v.decode() for k, v in scope["headers"] if k == b"host"), f"127.0.0.1:{PORT}")
            htu = f"{scope.get('scheme', 'http')}://{host}{scope['path']}"
            if claims.get("htm") != scope["method"]:
                raise ValueError(f"htm {claims.get('htm')} != {scope['method']}")
            if claims.get("htu", "").split("?")[0].split("#")[0] != htu:
                raise ValueError(f"htu {claims.get('htu')} != {htu}")
            if abs(time.time() - int(claims["iat"])) > 300 or not claims.get("jti"):
                raise ValueError("iat/jti")
            if claims.get("ath") != _b64u(hashlib.sha256(at.encode()).digest()):
                raise ValueError("ath mismatch")
            return _jwk_thumbprint(header["jwk"])
        except Exception as exc:  # noqa: BLE001
            print(f"[protected_mcp] DPoP proof rejected: {exc!r}", file=sys.stderr)
            return None


server = MCPServer(
    name="protected-mcp",
    version="1.0.0",
    log_level="WARNING",
    token_verifier=JwtTokenVerifier(),
    auth=AuthSettings(
        issuer_url=ISSUER,
        resource_server_url=RESOURCE,
        required_scopes=["mcp:read"],
        validate_token_resource=True,
    ),
)


@server.tool()
def whoami() -> dict:
    """Who the presented access token belongs to."""
    at = get_access_token()
    claims = (at.claims or {}) if at else {}
    return {
        "sub": at.subject if at else None,
        "client_id": at.client_id if at else None,
        "scopes": at.scopes if at else [],
        "aud": claims.get("aud"),
        "dpop_jkt": (claims.get("cnf") or {}).get("jkt"),
    }


async def main() -> None:
    app = DPoPMiddleware(server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1"))
    config = uvicorn.Config(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
    srv = uvicorn.Server(config)

    async def announce():
        while not srv.started:
            await anyio.sleep(0.02)
        print("READY", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await srv.serve()


if __name__ == "__main__":
    anyio.run(main)
