"""Writes Parquet files with modular encryption (pyarrow.parquet.encryption, an in-memory KMS)
for lethe-scan's tests: `python write_encrypted_parquet.py OUT_DIR EMAIL ID`.

- encrypted_footer.parquet: footer encrypted with master key `footer_key` (magic `PARE`),
  column `email` encrypted with `email_key`;
- plaintext_footer.parquet: the footer in the clear (magic `PAR1`, signed with `footer_key`),
  columns `email` and `learner_id` encrypted with `email_key`.

Key material is stored inside the files (pyarrow's default), as parquet-java does.
"""

import base64
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe

KEYS = {"footer_key": "0123456789012345", "email_key": "1234567890123450"}


class InMemoryKms(pe.KmsClient):
    def __init__(self, config):
        pe.KmsClient.__init__(self)
        self.keys = config.custom_kms_conf

    def wrap_key(self, key_bytes, master_key_identifier):
        return base64.b64encode(self.keys[master_key_identifier].encode() + key_bytes)

    def unwrap_key(self, wrapped_key, master_key_identifier):
        joint = base64.b64decode(wrapped_key)
        return joint[len(self.keys[master_key_identifier]):]


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
    for name, plaintext, columns in [
        ("encrypted_footer", False, ["email"]),
        ("plaintext_footer", True, ["email", "learner_id"]),
    ]:
        config = pe.EncryptionConfiguration(
            footer_key="footer_key",
            column_keys={"email_key": columns},
            plaintext_footer=plaintext,
        )
        props = factory.file_encryption_properties(kms, config)
        with pq.ParquetWriter(f"{out}/{name}.parquet", table.schema, encryption_properties=props) as w:
            w.write_table(table)


if __name__ == "__main__":
    main()
