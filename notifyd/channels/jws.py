"""Compact JWS (RFC 7515) signing for the tokens providers ask for: FCM's service-account
assertion (RS256), the APNs provider token (ES256) and Vonage's application token (RS256).

Written on `cryptography` alone: each token is a header, claims and one signature, and the
tests verify them with PyJWT, an implementation of their own. ES256's signature is r || s, 32
bytes each (RFC 7518 section 3.4), not the DER that cryptography returns.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

P256_BYTES = 32


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _compact(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def rs256(key: rsa.RSAPrivateKey, header: dict[str, Any], claims: dict[str, Any]) -> str:
    """header.claims.signature, signed RSASSA-PKCS1-v1_5 with SHA-256."""
    signing_input = f"{b64url(_compact({**header, 'alg': 'RS256'}))}.{b64url(_compact(claims))}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def es256(key: ec.EllipticCurvePrivateKey, header: dict[str, Any], claims: dict[str, Any]) -> str:
    """header.claims.signature, signed ECDSA P-256 with SHA-256, the signature as r || s."""
    signing_input = f"{b64url(_compact({**header, 'alg': 'ES256'}))}.{b64url(_compact(claims))}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    raw = r.to_bytes(P256_BYTES, "big") + s.to_bytes(P256_BYTES, "big")
    return f"{signing_input}.{b64url(raw)}"
