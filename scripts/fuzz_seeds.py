"""Seed corpus for the `scan_bytes` fuzz target (fuzz/fuzz_targets/scan_bytes.rs).

Usage: python scripts/fuzz_seeds.py DEMO_DIR CORPUS_DIR

Each seed is one selector byte (which file name the target gives the content, so which reader
runs; 0x40 = the crowd of 300 subjects, 0x80 = values only) followed by a file's bytes. Seeds:
the small files of a demo built by `lethe demo init` (Parquet, Avro manifests, metadata JSON,
JSON lines), and Parquet files written here with pyarrow in every encoding the byte search
treats differently (PLAIN and dictionary pages, DELTA_BYTE_ARRAY, DELTA_LENGTH_BYTE_ARRAY, data
page v1 and v2, each codec, many small pages, page indexes), holding the target's traces
(learner 3590, the e-mail, the accented name, the review id) in other cases, inside longer
text, split across two adjacent values (not a hit), and inside lists.
"""

import hashlib
import io
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

NAMES = {".parquet": 0, ".avro": 1, ".json": 2, ".puffin": 3, ".gz": 4, ".csv": 5, ".txt": 6, ".jsonl": 7}
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


def main():
    demo, corpus = sys.argv[1], sys.argv[2]
    os.makedirs(corpus, exist_ok=True)
    n = demo_files(demo, corpus) + parquet_files(corpus)
    print(f"{n} seeds in {corpus}")


if __name__ == "__main__":
    main()
