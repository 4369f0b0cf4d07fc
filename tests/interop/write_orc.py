"""Writes ORC files with pyarrow's ORC writer (the Apache ORC C++ library) for lethe-scan's
ORC tests: `python write_orc.py OUT_DIR EMAIL ID`.

- nested.orc: an int64 `learner_id` column holding ID, a struct column `contact` whose
  `email` field holds EMAIL, a list<string> `aliases` and a map<string,string> `attrs`
  (the value in neither), with zstd compression and small stripes;
- listed.orc: EMAIL only inside a list element and a map value (learner_id never ID);
- clean.orc: the same shape without EMAIL or ID;
- nested-{zlib,lz4,snappy,uncompressed}.orc: nested.orc's table in the other compressions;
- metadata.orc: a clean file whose user metadata holds EMAIL (pyarrow has no API for
  user metadata, so this one is skipped when unsupported; the test then checks nothing).
"""

import sys

import pyarrow as pa
import pyarrow.orc as orc


def table(email, learner_id, hide_in_lists=False):
    rows = 50
    ids = [1000 + i for i in range(rows)]
    emails = [f"person{i}@example.net" for i in range(rows)]
    aliases = [[f"alias{i}", f"nick{i}"] for i in range(rows)]
    attrs = [[("k", f"v{i}")] for i in range(rows)]
    if email is not None:
        if hide_in_lists:
            aliases[17] = ["first", email.upper()]
            attrs[33] = [("contact", email)]
        else:
            ids[17] = learner_id
            emails[17] = email
    contact = pa.StructArray.from_arrays(
        [pa.array(emails), pa.array([f"+1-555-{i:04}" for i in range(rows)])],
        names=["email", "phone"],
    )
    return pa.table(
        {
            "learner_id": pa.array(ids, pa.int64()),
            "contact": contact,
            "aliases": pa.array(aliases, pa.list_(pa.string())),
            "attrs": pa.array(attrs, pa.map_(pa.string(), pa.string())),
        }
    )


def main():
    out, email, learner_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
    orc.write_table(table(email, learner_id), f"{out}/nested.orc", compression="zstd", stripe_size=4096)
    orc.write_table(table(email, learner_id, hide_in_lists=True), f"{out}/listed.orc")
    orc.write_table(table(None, learner_id), f"{out}/clean.orc", compression="snappy")
    for compression in ("zlib", "lz4", "snappy", "uncompressed"):
        orc.write_table(table(email, learner_id), f"{out}/nested-{compression}.orc", compression=compression)


if __name__ == "__main__":
    main()
