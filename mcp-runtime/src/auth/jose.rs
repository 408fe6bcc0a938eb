//! JOSE: JWS signing (ES256, RS256, PS256), DPoP proofs (RFC 9449) and client
//! assertions (RFC 7523).

use serde_json::{json, Value};

use super::primitives::{b64url, now, random, sha256};
use crate::error::{Error, Result};

/// A DPoP key kept with credentials (PKCS#8 PEM).
pub(super) fn parse_dpop_key(pem: &str) -> Option<p256::ecdsa::SigningKey> {
    use p256::pkcs8::DecodePrivateKey as _;
    p256::ecdsa::SigningKey::from_pkcs8_pem(pem).ok()
}

/// A new P-256 key. A failed random draw is an error, and a draw that is not a valid
/// scalar (about one in 2^128) is drawn again a bounded number of times: never a loop.
pub(super) fn new_key() -> Result<p256::ecdsa::SigningKey> {
    for _ in 0..16 {
        let mut bytes = [0u8; 32];
        super::primitives::fill_random(&mut bytes)?;
        if let Ok(k) = p256::ecdsa::SigningKey::from_slice(&bytes) {
            return Ok(k);
        }
    }
    Err(Error::config(
        "no valid DPoP key could be drawn from the system's random number generator",
    ))
}

fn jws(key: &p256::ecdsa::SigningKey, header: Value, payload: Value) -> String {
    use p256::ecdsa::signature::Signer as _;
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(payload.to_string().as_bytes())
    );
    let sig: p256::ecdsa::Signature = key.sign(input.as_bytes());
    format!("{input}.{}", b64url(&sig.to_bytes()))
}

fn public_jwk(key: &p256::ecdsa::SigningKey) -> Value {
    let point = key.verifying_key().to_encoded_point(false);
    json!({
        "kty": "EC",
        "crv": "P-256",
        "x": point.x().map(|x| b64url(x)).unwrap_or_default(),
        "y": point.y().map(|y| b64url(y)).unwrap_or_default(),
    })
}

/// A DPoP proof (RFC 9449) for one request.
pub(super) fn dpop_proof(
    key: &p256::ecdsa::SigningKey,
    method: &str,
    url: &str,
    token: Option<&str>,
    nonce: Option<&str>,
) -> Result<String> {
    let htu = url.split(['?', '#']).next().unwrap_or(url);
    let mut payload = json!({"jti": random(16)?, "htm": method, "htu": htu, "iat": now()});
    if let Some(t) = token {
        payload["ath"] = Value::String(b64url(&sha256(t.as_bytes())));
    }
    if let Some(n) = nonce {
        payload["nonce"] = Value::String(n.to_owned());
    }
    Ok(jws(
        key,
        json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": public_jwk(key)}),
        payload,
    ))
}

/// A `private_key_jwt` client assertion (RFC 7523), ES256.
pub(super) fn client_assertion(
    pem: &str,
    client_id: &str,
    audience: &str,
    rsa_alg: &str,
) -> Result<String> {
    use p256::pkcs8::DecodePrivateKey as _;
    let iat = now();
    let claims = json!({"iss": client_id, "sub": client_id, "aud": audience, "iat": iat, "exp": iat + 300, "jti": random(16)?});
    if let Ok(key) = p256::ecdsa::SigningKey::from_pkcs8_pem(pem) {
        return Ok(jws(&key, json!({"alg": "ES256", "typ": "JWT"}), claims));
    }
    let key = rsa::RsaPrivateKey::from_pkcs8_pem(pem)
        .or_else(|_| {
            use rsa::pkcs1::DecodeRsaPrivateKey as _;
            rsa::RsaPrivateKey::from_pkcs1_pem(pem)
        })
        .map_err(|_| {
            Error::config(
                "the private key is neither a P-256 (ES256) nor an RSA (RS256/PS256) key in PEM",
            )
        })?;
    rsa_jws(key, rsa_alg, json!({"alg": rsa_alg, "typ": "JWT"}), claims)
}

/// The system's random source for a signer that cannot fail: a failed draw is
/// recorded (and its bytes made up, only so that the signer ends — never zeros, on
/// which blinding would loop), and what was signed with it is dropped.
#[derive(Default)]
struct CheckedRng {
    failed: Option<Error>,
    counter: u8,
}

impl rand_core::RngCore for CheckedRng {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        if let Err(e) = super::primitives::fill_random(dest) {
            self.failed.get_or_insert(e);
            for b in dest {
                self.counter = self.counter.wrapping_add(151);
                *b = self.counter | 1;
            }
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> std::result::Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for CheckedRng {}

/// Signs a JWS with an RSA key: RS256 (PKCS#1 v1.5) or PS256 (PSS), SHA-256.
pub(super) fn rsa_jws(
    key: rsa::RsaPrivateKey,
    alg: &str,
    header: Value,
    payload: Value,
) -> Result<String> {
    use rsa::signature::{RandomizedSigner as _, SignatureEncoding as _, Signer as _};
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(payload.to_string().as_bytes())
    );
    let sig = match alg {
        "RS256" => rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new(key)
            .sign(input.as_bytes())
            .to_vec(),
        "PS256" => {
            let mut rng = CheckedRng::default();
            let sig = rsa::pss::BlindedSigningKey::<sha2::Sha256>::new(key)
                .sign_with_rng(&mut rng, input.as_bytes())
                .to_vec();
            // A draw failed: the salt or the blinding was not random; the signature
            // is dropped.
            if let Some(e) = rng.failed {
                return Err(e);
            }
            sig
        }
        other => {
            return Err(Error::config(format!(
                "unsupported signing algorithm `{other}`; use RS256 or PS256 with an RSA key"
            )))
        }
    };
    Ok(format!("{input}.{}", b64url(&sig)))
}
