//! One reader per file format. Each `scan_*` reads its whole input, records hits, and
//! returns `Err(reason)` when the input cannot be read completely (the reason names
//! positions, never values; the caller still redacts it).

pub(crate) mod archive;
pub(crate) mod avro;
pub(crate) mod avro_cache;
pub(crate) mod avro_guard;
pub(crate) mod csv;
pub(crate) mod deletion_vector;
pub(crate) mod delta_guard;
pub(crate) mod encoding;
pub(crate) mod json;
pub(crate) mod orc;
pub(crate) mod orc_guard;
pub(crate) mod parquet;
pub(crate) mod parquet_chunk;
pub(crate) mod parquet_crypto;
pub(crate) mod parquet_pages;
pub(crate) mod puffin;
pub(crate) mod text;
pub(crate) mod thrift_guard;
