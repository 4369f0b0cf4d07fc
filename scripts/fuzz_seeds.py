"""Seed corpus for the `scan_bytes` fuzz target (fuzz/fuzz_targets/scan_bytes.rs).

Usage: python scripts/fuzz_seeds.py DEMO_DIR CORPUS_DIR

Each seed is one selector byte (which file name the target gives the content, so which reader
runs; 0x40 = the crowd of 300 subjects, 0x80 = values only) followed by a file's bytes. Seeds:
the small files of a demo built by `lethe demo init` (Parquet, Avro manifests, metadata JSON,
JSON lines), and Parquet files written here with pyarrow in every encoding the byte search
treats differently (PLAIN and dictionary pages, DELTA_BYTE_ARRAY, DELTA_LENGTH_BYTE_ARRAY, data
page v1 and v2, each codec, many small pages, page indexes), holding the target's traces
(learner 3590, the e-mail, the accented name, the review id) in other cases, inside longer
text, split across two adjacent values (not a hit), and inside lists. Then the formats issue 48
added: UTF-16 CSV and text (with and without a byte-order mark), zip and tar archives (plain,
gzip, xz, zstd; a zip nested in a tar.gz) of CSV, JSON lines and Parquet members, ORC files
(flat and nested, each compression) and Parquet with modular encryption (both footer modes).
"""

import base64
import hashlib
import io
import lzma
import os
import sys
import tarfile
import zipfile

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe

NAMES = {".parquet": 0, ".avro": 1, ".json": 2, ".puffin": 3, ".gz": 4, ".csv": 5, ".txt": 6, ".jsonl": 7,
         ".zip": 8, ".tar": 9, ".orc": 10, ".zst": 11}
MAX_SEED = 256 * 1024


def put(corpus, selector, content):
    if len(content) > MAX_SEED:
        return 0
    n = 0
    for flags in (0x00, 0x40, 0x80):
        data = bytes([selector | flags]) + content
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)
        n += 1
    return n


def demo_files(demo, corpus):
    n = 0
    for root, _, files in os.walk(demo):
        if "/.git" in root:
            continue
        for file in files:
            ext = os.path.splitext(file)[1]
            if ext in NAMES:
                with open(os.path.join(root, file), "rb") as f:
                    n += put(corpus, NAMES[ext], f.read())
    return n


def table():
    ids = [1, 2, 3590, 35900, 359, 7, 3590, 42]
    emails = [
        "someone@post.example",
        "ALEXA590@POST.EXAMPLE",
        "reply to alexa590@post.example today",
        "alexa590@",
        "post.example",
        None,
        "alexa590@post.example",
        "x",
    ]
    names = ["Ana", "zoë çelik", "ZOË ÇELIK", "Zoë Çelik", None, "Zo", "ë Çelik", "Bob"]
    reviews = ["CGB0000112", "CGB0000113", "cgb0000113", None, "CGB", "0000113", "A", "B"]
    notes = [["a", "alexa590@post.example"], [], None, ["Zoë Çelik"], ["b"], ["c"], [], ["d"]]
    return pa.table(
        {
            "learner_id": pa.array(ids, pa.int64()),
            "learner_id32": pa.array(ids, pa.int32()),
            "email": pa.array(emails, pa.string()),
            "full_name": pa.array(names, pa.string()),
            "review_id": pa.array(reviews, pa.string()),
            "notes": pa.array(notes, pa.list_(pa.string())),
            "blob": pa.array([e.encode() if e else None for e in emails], pa.binary()),
        }
    )


def parquet_files(corpus):
    t = table()
    n = 0
    for compression in ("NONE", "SNAPPY", "ZSTD", "GZIP", "LZ4"):
        for version in ("1.0", "2.0"):
            for dictionary in (True, False):
                for page_size in (64, 1 << 20):
                    buf = io.BytesIO()
                    pq.write_table(
                        t,
                        buf,
                        compression=compression,
                        data_page_version=version,
                        use_dictionary=dictionary,
                        data_page_size=page_size,
                        write_page_index=page_size == 64,
                        row_group_size=4 if page_size == 64 else None,
                    )
                    n += put(corpus, 0, buf.getvalue())
    for encoding in ("DELTA_BYTE_ARRAY", "DELTA_LENGTH_BYTE_ARRAY", "PLAIN"):
        buf = io.BytesIO()
        pq.write_table(
            t.select(["email", "full_name", "review_id"]),
            buf,
            use_dictionary=False,
            column_encoding=encoding,
            compression="NONE",
        )
        n += put(corpus, 0, buf.getvalue())
    buf = io.BytesIO()
    pq.write_table(
        t.select(["learner_id", "learner_id32"]),
        buf,
        use_dictionary=False,
        column_encoding="DELTA_BINARY_PACKED",
        compression="NONE",
    )
    n += put(corpus, 0, buf.getvalue())
    return n


def zip_of(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


def tar_of(members, mode="w"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class InMemoryKms(pe.KmsClient):
    def __init__(self, config):
        pe.KmsClient.__init__(self)
        self.keys = config.custom_kms_conf

    def wrap_key(self, key_bytes, master_key_identifier):
        return base64.b64encode(self.keys[master_key_identifier].encode() + key_bytes)

    def unwrap_key(self, wrapped_key, master_key_identifier):
        return base64.b64decode(wrapped_key)[len(self.keys[master_key_identifier]):]


def new_format_files(corpus):
    n = 0
    csv = "learner_id,email,full_name\n1,someone@post.example,Ana\n3590,alexa590@post.example,Zoë Çelik\n"
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):
        n += put(corpus, NAMES[".csv"], csv.encode(encoding))
        n += put(corpus, NAMES[".txt"], ("note: " + csv).encode(encoding))
    n += put(corpus, NAMES[".csv"], b"\xef\xbb\xbf" + csv.encode())
    t = table()
    pbuf = io.BytesIO()
    pq.write_table(t.select(["learner_id", "email"]), pbuf, compression="NONE")
    jsonl = b'{"learner_id": 3590, "contact": {"email": "alexa590@post.example"}}\n'
    members = [("people.csv", csv.encode()), ("rows.jsonl", jsonl), ("part.parquet", pbuf.getvalue())]
    z = zip_of(members)
    n += put(corpus, NAMES[".zip"], z)
    plain = tar_of(members + [("inner.zip", zip_of(members[:2]))])
    n += put(corpus, NAMES[".tar"], plain)
    n += put(corpus, NAMES[".gz"], tar_of(members[:2] + [("inner.zip", zip_of(members[:1]))], "w:gz"))
    n += put(corpus, NAMES[".tar"], lzma.compress(tar_of(members[:2])))
    n += put(corpus, NAMES[".zst"], pa.compress(tar_of(members[:2]), codec="zstd", asbytes=True))
    n += put(corpus, NAMES[".zst"], pa.compress(csv.encode(), codec="zstd", asbytes=True))
    contact = pa.StructArray.from_arrays(
        [t.column("email").combine_chunks(), t.column("full_name").combine_chunks()], names=["email", "name"]
    )
    nested = pa.table(
        {
            "learner_id": t.column("learner_id"),
            "contact": contact,
            "tags": pa.array([["a", "alexa590@post.example"]] * t.num_rows, pa.list_(pa.string())),
            "attrs": pa.array([[("k", "Zoë Çelik")]] * t.num_rows, pa.map_(pa.string(), pa.string())),
        }
    )
    for compression in ("UNCOMPRESSED", "ZLIB", "SNAPPY", "ZSTD", "LZ4"):
        for data in (nested, t.select(["learner_id", "email"])):
            buf = io.BytesIO()
            orc.write_table(data, buf, compression=compression)
            n += put(corpus, NAMES[".orc"], buf.getvalue())
    kms = pe.KmsConnectionConfig(custom_kms_conf={"footer_key": "0123456789012345", "email_key": "1234567890123450"})
    factory = pe.CryptoFactory(lambda config: InMemoryKms(config))
    for plaintext in (False, True):
        config = pe.EncryptionConfiguration(
            footer_key="footer_key", column_keys={"email_key": ["email"]}, plaintext_footer=plaintext
        )
        buf = io.BytesIO()
        small = t.select(["learner_id", "email"])
        with pq.ParquetWriter(buf, small.schema, encryption_properties=factory.file_encryption_properties(kms, config)) as w:
            w.write_table(small)
        n += put(corpus, NAMES[".parquet"], buf.getvalue())
    return n


def main():
    demo, corpus = sys.argv[1], sys.argv[2]
    os.makedirs(corpus, exist_ok=True)
    n = demo_files(demo, corpus) + parquet_files(corpus) + new_format_files(corpus)
    print(f"{n} seeds in {corpus}")


if __name__ == "__main__":
    main()
