//! The iceberg crate's FileIO over lethe's own object-storage client.
//!
//! The iceberg crate reads manifests and data files through a `FileIO` whose `Storage` is
//! pluggable. For an [`super::s3::S3Store`] that `Storage` is this one: it calls the same
//! OpenDAL operator (and vended-credential operators) as the store's own methods, on the same
//! I/O runtime, so there is one I/O stack for the warehouse's files.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::s3::S3Core;

fn to_iceberg(e: crate::Error) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string())
}

/// The `Storage` of an S3 warehouse's FileIO.
#[derive(Debug, Clone)]
pub(crate) struct ObjectStorage {
    core: Arc<S3Core>,
}

// The iceberg crate can serialise a Storage to ship it to another process; this one holds a
// live client and credentials, so it refuses (and never writes a secret).
impl Serialize for ObjectStorage {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "lethe's object storage is not serialisable",
        ))
    }
}

impl<'de> Deserialize<'de> for ObjectStorage {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "lethe's object storage is not deserialisable",
        ))
    }
}

#[derive(Debug)]
struct Factory(Arc<dyn Storage>);

impl Serialize for Factory {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "lethe's object storage is not serialisable",
        ))
    }
}

impl<'de> Deserialize<'de> for Factory {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "lethe's object storage is not deserialisable",
        ))
    }
}

#[typetag::serde(name = "lethe-object-storage-factory")]
impl StorageFactory for Factory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(self.0.clone())
    }
}

/// A FileIO reading and writing through `core`.
pub(crate) fn file_io(core: Arc<S3Core>) -> FileIO {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStorage { core });
    FileIOBuilder::new(Arc::new(Factory(storage))).build()
}

struct Reader {
    core: Arc<S3Core>,
    path: String,
}

#[async_trait]
impl FileRead for Reader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        self.core
            .read(&self.path, Some(range))
            .await
            .map_err(to_iceberg)
    }
}

struct Writer {
    core: Arc<S3Core>,
    path: String,
    buf: Vec<u8>,
    closed: bool,
}

#[async_trait]
impl FileWrite for Writer {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buf.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if self.closed {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                format!("{} was already closed", self.path),
            ));
        }
        self.closed = true;
        let bytes = Bytes::from(std::mem::take(&mut self.buf));
        self.core.write(&self.path, bytes).await.map_err(to_iceberg)
    }
}

#[async_trait]
#[typetag::serde(name = "lethe-object-storage")]
impl Storage for ObjectStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        self.core.exists(path).await.map_err(to_iceberg)
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        Ok(FileMetadata {
            size: self.core.size(path).await.map_err(to_iceberg)?,
        })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.core.read(path, None).await.map_err(to_iceberg)
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(Reader {
            core: self.core.clone(),
            path: path.to_string(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.core.write(path, bs).await.map_err(to_iceberg)
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        Ok(Box::new(Writer {
            core: self.core.clone(),
            path: path.to_string(),
            buf: Vec::new(),
            closed: false,
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        self.core.delete(path, None).await.map_err(to_iceberg)
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        Err(iceberg::Error::new(
            iceberg::ErrorKind::FeatureUnsupported,
            format!("lethe does not delete whole prefixes ({path})"),
        ))
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(p) = paths.next().await {
            self.core.delete(&p, None).await.map_err(to_iceberg)?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}
