//! Keys for Parquet modular encryption: with them the proof scan decrypts an encrypted Parquet
//! file and reads it as any other; without them the file is unreadable, "encrypted; no key
//! configured for <master key id>".
//!
//! Files are decrypted as the Parquet key-management tools (parquet-java's
//! `PropertiesDrivenCryptoFactory`, PyArrow's `CryptoFactory`) write them: each footer and
//! column key's metadata is key material (`PKMT1` JSON, stored in the file), naming a master
//! key; the data key is unwrapped by the master key (single wrapping), or by a key-encryption
//! key the master key unwraps (double wrapping, PyArrow's default). The unwrapping runs in
//! the `parquet-key-management` crate; the master keys come from a [`Kms`].
//!
//! [`KeyFile`] is the file-based KMS: master keys listed as `id:base64key` (the format of
//! parquet-java's `parquet.encryption.key.list`), wrapping with AES-GCM under the master key
//! and the master key ID as associated data — as parquet-java's `InMemoryKMS` and Arrow's
//! local-wrap test KMS do, so files they and PyArrow (with such a client) write are read.
//! Another KMS (a cloud one, Vault) implements [`Kms`].
//!
//! Does not: read key material stored outside the file (parquet-java's external key
//! material), or decrypt with a KMS on the cluster engine's executors (they have no keys).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use parquet::encryption::decrypt::FileDecryptionProperties;
use parquet_key_management::crypto_factory::{CryptoFactory, DecryptionConfiguration};
use parquet_key_management::errors::Error as KmError;
use parquet_key_management::kms::{KmsClient, KmsClientRef, KmsConnectionConfig};
use ring::aead;
use secrecy::{ExposeSecret, SecretBox};

/// A key-management service holding master keys: unwraps a data key (or key-encryption key)
/// as the file's key material holds it.
pub trait Kms: Send + Sync {
    /// Unwraps `wrapped` with the master key `master_key_id`; `Ok(None)` when this KMS has no
    /// such key. Errors say why without showing key bytes.
    fn unwrap_key(
        &self,
        wrapped: &str,
        master_key_id: &str,
    ) -> Result<Option<SecretBox<[u8]>>, String>;
}

/// The master keys a scan may decrypt Parquet files with (none by default). Its `Debug` says
/// whether keys are configured, never which.
#[derive(Clone, Default)]
pub struct ParquetKeys(Option<Arc<dyn Kms>>);

impl fmt::Debug for ParquetKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if self.0.is_some() {
            "configured"
        } else {
            "none"
        };
        f.debug_tuple("ParquetKeys").field(&shown).finish()
    }
}

impl ParquetKeys {
    /// Keys from `kms`.
    pub fn new(kms: Arc<dyn Kms>) -> Self {
        ParquetKeys(Some(kms))
    }

    /// True when a KMS is configured.
    pub fn is_configured(&self) -> bool {
        self.0.is_some()
    }

    /// Decryption for one file, or None when no KMS is configured.
    pub(crate) fn for_file(&self) -> Option<FileKeys> {
        let kms = Arc::clone(self.0.as_ref()?);
        Some(FileKeys {
            kms,
            missing: Arc::new(Mutex::new(Vec::new())),
        })
    }
}

/// One file's decryption: which master keys it asked for that the KMS doesn't have.
pub(crate) struct FileKeys {
    kms: Arc<dyn Kms>,
    missing: Arc<Mutex<Vec<String>>>,
}

impl FileKeys {
    /// parquet-rs's decryption properties: key metadata resolved through the KMS.
    pub(crate) fn properties(&self) -> Result<Arc<FileDecryptionProperties>, String> {
        let client: KmsClientRef = Arc::new(Client {
            kms: Arc::clone(&self.kms),
            missing: Arc::clone(&self.missing),
        });
        let factory = CryptoFactory::new(move |_: &_| Ok(Arc::clone(&client)));
        factory
            .file_decryption_properties(
                Arc::new(KmsConnectionConfig::default()),
                DecryptionConfiguration::default(),
            )
            .map_err(|e| format!("encrypted: {e}"))
    }

    /// The reason a file is unreadable after a failed decryption: the master keys the KMS
    /// lacked, when that is why; else `error`.
    pub(crate) fn reason(&self, error: String) -> String {
        let missing = self.missing.lock().map(|m| m.clone()).unwrap_or_default();
        if missing.is_empty() {
            error
        } else {
            format!("encrypted; no key configured for {}", missing.join(", "))
        }
    }
}

/// A [`Kms`] as parquet-key-management calls it, noting the master keys it lacks.
struct Client {
    kms: Arc<dyn Kms>,
    missing: Arc<Mutex<Vec<String>>>,
}

type KmResult<T> = parquet_key_management::errors::Result<T>;

impl KmsClient for Client {
    fn wrap_key(&self, _key: &[u8], _master_key_id: &str) -> KmResult<String> {
        Err(KmError::NotYetImplemented(
            "the proof scan only reads encrypted files".into(),
        ))
    }

    fn unwrap_key(&self, wrapped: &str, master_key_id: &str) -> KmResult<Vec<u8>> {
        match self.kms.unwrap_key(wrapped, master_key_id) {
            Ok(Some(key)) => Ok(key.expose_secret().to_vec()),
            Ok(None) => {
                if let Ok(mut m) = self.missing.lock()
                    && !m.iter().any(|k| k == master_key_id)
                {
                    m.push(master_key_id.to_string());
                }
                Err(KmError::General(format!(
                    "no key configured for {master_key_id}"
                )))
            }
            Err(e) => Err(KmError::General(format!("master key {master_key_id}: {e}"))),
        }
    }
}

/// The file-based [`Kms`]: master keys by ID, each 16 or 32 bytes (AES-128 or AES-256).
pub struct KeyFile {
    keys: HashMap<String, SecretBox<[u8]>>,
}

impl fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFile")
            .field("master_keys", &self.keys.len())
            .finish()
    }
}

impl KeyFile {
    /// Parses `text`: entries `id:base64key` separated by newlines or commas (blank lines and
    /// lines starting with `#` are skipped). Errors name `source` and the entry's line, never
    /// a key's bytes.
    pub fn parse(text: &str, source: &str) -> Result<KeyFile, String> {
        let mut keys = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            for entry in line.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let at = || format!("{source}, line {}", n + 1);
                let Some((id, key)) = entry.split_once(':') else {
                    return Err(format!("{}: an entry is not `id:base64key` (no `:`)", at()));
                };
                let id = id.trim();
                if id.is_empty() {
                    return Err(format!("{}: an entry has an empty key ID", at()));
                }
                let bytes = BASE64
                    .decode(key.trim())
                    .map_err(|_| format!("{}: the key of `{id}` is not base64", at()))?;
                if bytes.len() != 16 && bytes.len() != 32 {
                    return Err(format!(
                        "{}: the key of `{id}` is {} bytes; AES master keys are 16 or 32",
                        at(),
                        bytes.len()
                    ));
                }
                if keys
                    .insert(id.to_string(), SecretBox::from(bytes.into_boxed_slice()))
                    .is_some()
                {
                    return Err(format!("{}: key `{id}` is listed twice", at()));
                }
            }
        }
        if keys.is_empty() {
            return Err(format!("{source}: no master key is listed"));
        }
        Ok(KeyFile { keys })
    }

    /// The master key IDs, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

impl Kms for KeyFile {
    fn unwrap_key(
        &self,
        wrapped: &str,
        master_key_id: &str,
    ) -> Result<Option<SecretBox<[u8]>>, String> {
        let Some(master) = self.keys.get(master_key_id) else {
            return Ok(None);
        };
        open(master.expose_secret(), wrapped, master_key_id.as_bytes()).map(Some)
    }
}

/// Opens `wrapped` (base64 of a 12-byte nonce, the ciphertext and the 16-byte tag) with
/// AES-GCM under `key` and associated data `aad`.
fn open(key: &[u8], wrapped: &str, aad: &[u8]) -> Result<SecretBox<[u8]>, String> {
    let algorithm = match key.len() {
        16 => &aead::AES_128_GCM,
        32 => &aead::AES_256_GCM,
        n => return Err(format!("a {n}-byte master key is not AES-128 or AES-256")),
    };
    let mut sealed = BASE64
        .decode(wrapped.trim())
        .map_err(|_| "the wrapped key is not base64".to_string())?;
    if sealed.len() < aead::NONCE_LEN + aead::MAX_TAG_LEN {
        return Err("the wrapped key is too short for AES-GCM".into());
    }
    let nonce = aead::Nonce::try_assume_unique_for_key(&sealed[..aead::NONCE_LEN])
        .map_err(|_| "the wrapped key's nonce is unreadable".to_string())?;
    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(algorithm, key).map_err(|_| "the master key is unusable")?,
    );
    let body = &mut sealed[aead::NONCE_LEN..];
    let plain = key
        .open_in_place(nonce, aead::Aad::from(aad), body)
        .map_err(|_| "the wrapped key does not open with this master key (wrong key or ID)")?;
    let out = SecretBox::from(plain.to_vec().into_boxed_slice());
    sealed.iter_mut().for_each(|b| *b = 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wraps as parquet-java's `InMemoryKMS` does (the test's counterpart of [`open`]).
    fn seal(key: &[u8], plain: &[u8], aad: &[u8], nonce: [u8; 12]) -> String {
        let alg = if key.len() == 16 {
            &aead::AES_128_GCM
        } else {
            &aead::AES_256_GCM
        };
        let k = aead::LessSafeKey::new(aead::UnboundKey::new(alg, key).unwrap());
        let mut body = plain.to_vec();
        k.seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(aad),
            &mut body,
        )
        .unwrap();
        let mut out = nonce.to_vec();
        out.extend(body);
        BASE64.encode(out)
    }

    #[test]
    fn a_key_file_unwraps_what_its_master_key_wrapped_and_nothing_else() {
        let k16 = [7u8; 16];
        let k32 = [9u8; 32];
        let text = format!(
            "# master keys\nkf:{}\n\n kc1 : {} , kc2:{}\n",
            BASE64.encode(k16),
            BASE64.encode(k32),
            BASE64.encode([1u8; 16])
        );
        let file = KeyFile::parse(&text, "keys.txt").unwrap();
        assert_eq!(file.ids(), vec!["kc1", "kc2", "kf"]);
        let dek = [42u8; 16];
        let wrapped = seal(&k16, &dek, b"kf", [3; 12]);
        let got = file.unwrap_key(&wrapped, "kf").unwrap().unwrap();
        assert_eq!(got.expose_secret(), &dek);
        let wrapped32 = seal(&k32, &dek, b"kc1", [4; 12]);
        assert_eq!(
            file.unwrap_key(&wrapped32, "kc1")
                .unwrap()
                .unwrap()
                .expose_secret(),
            &dek
        );
        // Another master key, or the right key under another ID (the AAD), doesn't open it.
        assert!(file.unwrap_key(&wrapped, "kc2").is_err());
        assert!(
            file.unwrap_key(&seal(&k16, &dek, b"kc2", [3; 12]), "kf")
                .is_err()
        );
        assert!(file.unwrap_key("not base64!", "kf").is_err());
        assert!(file.unwrap_key("AAAA", "kf").is_err());
        assert!(file.unwrap_key(&wrapped, "nobody").unwrap().is_none());
        assert_eq!(format!("{file:?}"), "KeyFile { master_keys: 3 }");
    }

    #[test]
    fn a_malformed_key_file_names_the_line_never_the_key() {
        let secret = BASE64.encode([5u8; 24]);
        let cases = [
            ("a:b:c\n", "keys.txt, line 1: the key of `a` is not base64"),
            (
                "\n\nnocolon\n",
                "keys.txt, line 3: an entry is not `id:base64key` (no `:`)",
            ),
            (":AAAA\n", "keys.txt, line 1: an entry has an empty key ID"),
            ("# only comments\n", "keys.txt: no master key is listed"),
        ];
        for (text, want) in cases {
            assert_eq!(KeyFile::parse(text, "keys.txt").unwrap_err(), want);
        }
        let e = KeyFile::parse(&format!("k:{secret}"), "keys.txt").unwrap_err();
        assert_eq!(
            e,
            "keys.txt, line 1: the key of `k` is 24 bytes; AES master keys are 16 or 32"
        );
        assert!(!e.contains(&secret));
        let k = BASE64.encode([1u8; 16]);
        assert_eq!(
            KeyFile::parse(&format!("k:{k}\nk:{k}"), "f").unwrap_err(),
            "f, line 2: key `k` is listed twice"
        );
        assert_eq!(
            format!("{:?}", ParquetKeys::default()),
            "ParquetKeys(\"none\")"
        );
    }
}
