"""Writes Parquet files with modular encryption (pyarrow.parquet.encryption, an in-memory KMS)
for lethe-scan's tests: `python write_encrypted_parquet.py OUT_DIR EMAIL ID`.

- encrypted_footer.parquet: footer encrypted with master key `footer_key` (magic `PARE`),
  column `email` encrypted with `email_key`;
- plaintext_footer.parquet: the footer in the clear (magic `PAR1`, signed with `footer_key`),
  columns `email` and `learner_id` encrypted with `email_key`;
- single_wrapped.parquet: as encrypted_footer.parquet, data keys wrapped by the master keys
  directly (double_wrapping=False; the others use PyArrow's default, double wrapping);
- keys.txt: the master keys as lethe's file KMS reads them (`id:base64key`).

Key material is stored inside the files (pyarrow's default), as parquet-java does. The KMS
wraps as parquet-java's InMemoryKMS does: AES-GCM under the master key, the master key's ID as
associated data, base64 of nonce + ciphertext + tag. Each file is read back by pyarrow.
"""

import base64
import os
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe

KEYS = {"footer_key": "0123456789012345", "email_key": "1234567890123450"}


class InMemoryKms(pe.KmsClient):
    def __init__(self, config):
        pe.KmsClient.__init__(self)
        self.keys = config.custom_kms_conf

    def wrap_key(self, key_bytes, master_key_identifier):
        nonce = os.urandom(12)
        master = AESGCM(self.keys[master_key_identifier].encode())
        sealed = master.encrypt(nonce, key_bytes, master_key_identifier.encode())
        return base64.b64encode(nonce + sealed)

    def unwrap_key(self, wrapped_key, master_key_identifier):
        sealed = base64.b64decode(wrapped_key)
        master = AESGCM(self.keys[master_key_identifier].encode())
        return master.decrypt(sealed[:12], sealed[12:], master_key_identifier.encode())


def main():
    out, email, learner_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
    table = pa.table(
        {
            "learner_id": pa.array([1, learner_id, 3], pa.int64()),
            "email": pa.array(["a@b.example", email, "c@d.example"]),
        }
    )
    kms = pe.KmsConnectionConfig(custom_kms_conf=KEYS)
    factory = pe.CryptoFactory(lambda config: InMemoryKms(config))
    for name, plaintext, columns, double in [
        ("encrypted_footer", False, ["email"], True),
        ("plaintext_footer", True, ["email", "learner_id"], True),
        ("single_wrapped", False, ["email"], False),
    ]:
        config = pe.EncryptionConfiguration(
            footer_key="footer_key",
            column_keys={"email_key": columns},
            plaintext_footer=plaintext,
            double_wrapping=double,
        )
        props = factory.file_encryption_properties(kms, config)
        path = f"{out}/{name}.parquet"
        with pq.ParquetWriter(path, table.schema, encryption_properties=props) as w:
            w.write_table(table)
        read = factory.file_decryption_properties(kms, pe.DecryptionConfiguration())
        assert pq.read_table(path, decryption_properties=read).equals(table), name
    with open(f"{out}/keys.txt", "w") as f:
        for key_id, key in KEYS.items():
            f.write(f"{key_id}:{base64.b64encode(key.encode()).decode()}\n")


if __name__ == "__main__":
    main()
