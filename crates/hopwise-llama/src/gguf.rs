//! GGUF validation before handing a file to llama.cpp.
//!
//! llama.cpp reports a bad file only as "failed to load", so we read the header ourselves: the magic, the
//! metadata, and the tensor table, and from that the size the file must at least have. This catches
//! non-GGUF files and interrupted downloads with a message that says which.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::error::{LlamaError, Result};

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Bounds that no real model reaches; beyond them the header is garbage, not a model.
const MAX_COUNT: u64 = 1 << 24;
const MAX_STRING: u64 = 1 << 26;
const MAX_DIMS: u32 = 8;

/// What the header says about the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufSummary {
    pub version: u32,
    pub tensor_count: u64,
    pub metadata_count: u64,
    /// The smallest file size that holds every tensor the header lists.
    pub required_size: u64,
    pub file_size: u64,
    pub architecture: Option<String>,
}

/// Checks that `path` exists, is a GGUF file and is not truncated.
pub fn validate(path: &Path) -> Result<GgufSummary> {
    let file = File::open(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => LlamaError::MissingFile { path: path.to_path_buf() },
        _ => LlamaError::io(format!("opening {}", path.display()), err),
    })?;
    let file_size =
        file.metadata().map_err(|err| LlamaError::io(format!("reading metadata of {}", path.display()), err))?.len();
    let mut reader = HeaderReader { inner: BufReader::with_capacity(1 << 16, file), position: 0 };
    let not_gguf = |reason: String| LlamaError::NotGguf { path: path.to_path_buf(), reason };
    let truncated = |needed: u64| LlamaError::Truncated { path: path.to_path_buf(), actual: file_size, needed };

    let mut magic = [0u8; 4];
    if reader.read_exact(&mut magic).is_err() || &magic != MAGIC {
        return Err(not_gguf("the file does not start with the GGUF magic bytes".into()));
    }
    let header = parse_header(&mut reader).map_err(|failure| match failure {
        HeaderFailure::Eof => truncated(reader.position + 1),
        HeaderFailure::Corrupt(reason) => not_gguf(reason),
    })?;
    if file_size < header.required_size {
        return Err(truncated(header.required_size));
    }
    Ok(GgufSummary {
        version: header.version,
        tensor_count: header.tensor_count,
        metadata_count: header.metadata_count,
        required_size: header.required_size,
        file_size,
        architecture: header.architecture,
    })
}

struct ParsedHeader {
    version: u32,
    tensor_count: u64,
    metadata_count: u64,
    required_size: u64,
    architecture: Option<String>,
}

enum HeaderFailure {
    Eof,
    Corrupt(String),
}

type HeaderResult<T> = std::result::Result<T, HeaderFailure>;

struct HeaderReader<R> {
    inner: R,
    position: u64,
}

impl<R: Read> HeaderReader<R> {
    fn read_exact(&mut self, buf: &mut [u8]) -> HeaderResult<()> {
        self.inner.read_exact(buf).map_err(|_| HeaderFailure::Eof)?;
        self.position += buf.len() as u64;
        Ok(())
    }
    fn skip(&mut self, mut count: u64) -> HeaderResult<()> {
        let mut scratch = [0u8; 4096];
        while count > 0 {
            let step = count.min(scratch.len() as u64) as usize;
            self.read_exact(&mut scratch[..step])?;
            count -= step as u64;
        }
        Ok(())
    }
    fn u32(&mut self) -> HeaderResult<u32> {
        let mut bytes = [0u8; 4];
        self.read_exact(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }
    fn u64(&mut self) -> HeaderResult<u64> {
        let mut bytes = [0u8; 8];
        self.read_exact(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }
    fn count(&mut self, what: &str) -> HeaderResult<u64> {
        let value = self.u64()?;
        if value > MAX_COUNT {
            return Err(HeaderFailure::Corrupt(format!("implausible {what} count {value}")));
        }
        Ok(value)
    }
    fn string(&mut self) -> HeaderResult<String> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(HeaderFailure::Corrupt(format!("implausible string length {len}")));
        }
        let mut bytes = vec![0u8; len as usize];
        self.read_exact(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// GGUF metadata value types, by their numeric tag.
const TYPE_STRING: u32 = 8;
const TYPE_ARRAY: u32 = 9;

fn scalar_width(value_type: u32) -> Option<u64> {
    match value_type {
        0 | 1 | 7 => Some(1), // u8, i8, bool
        2 | 3 => Some(2),     // u16, i16
        4..=6 => Some(4),     // u32, i32, f32
        10..=12 => Some(8),   // u64, i64, f64
        _ => None,
    }
}

enum MetaValue {
    Text(String),
    Integer(u64),
    Other,
}

fn read_value<R: Read>(reader: &mut HeaderReader<R>, value_type: u32) -> HeaderResult<MetaValue> {
    match value_type {
        TYPE_STRING => Ok(MetaValue::Text(reader.string()?)),
        TYPE_ARRAY => {
            let item_type = reader.u32()?;
            let len = reader.count("array item")?;
            if let Some(width) = scalar_width(item_type) {
                reader.skip(width * len)?;
            } else if item_type == TYPE_STRING {
                for _ in 0..len {
                    let item_len = reader.u64()?;
                    if item_len > MAX_STRING {
                        return Err(HeaderFailure::Corrupt("implausible string in array".into()));
                    }
                    reader.skip(item_len)?;
                }
            } else {
                return Err(HeaderFailure::Corrupt(format!("unsupported array item type {item_type}")));
            }
            Ok(MetaValue::Other)
        }
        4 => Ok(MetaValue::Integer(u64::from(reader.u32()?))),
        10 => Ok(MetaValue::Integer(reader.u64()?)),
        other => match scalar_width(other) {
            Some(width) => reader.skip(width).map(|_| MetaValue::Other),
            None => Err(HeaderFailure::Corrupt(format!("unknown metadata type {other}"))),
        },
    }
}

fn parse_header<R: Read>(reader: &mut HeaderReader<R>) -> HeaderResult<ParsedHeader> {
    let version = reader.u32()?;
    if !(2..=3).contains(&version) {
        return Err(HeaderFailure::Corrupt(format!("unsupported GGUF version {version}")));
    }
    let tensor_count = reader.count("tensor")?;
    let metadata_count = reader.count("metadata")?;
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut architecture = None;
    for _ in 0..metadata_count {
        let key = reader.string()?;
        let value_type = reader.u32()?;
        match (key.as_str(), read_value(reader, value_type)?) {
            ("general.alignment", MetaValue::Integer(value)) if value > 0 => alignment = value,
            ("general.architecture", MetaValue::Text(value)) => architecture = Some(value),
            _ => {}
        }
    }
    let mut data_end = 0u64;
    for _ in 0..tensor_count {
        let _name = reader.string()?;
        let n_dims = reader.u32()?;
        if n_dims > MAX_DIMS {
            return Err(HeaderFailure::Corrupt(format!("tensor with {n_dims} dimensions")));
        }
        let mut elements = 1u64;
        for _ in 0..n_dims {
            elements = elements.saturating_mul(reader.u64()?);
        }
        let tensor_type = reader.u32()?;
        let offset = reader.u64()?;
        // Unknown (newer) tensor types: only the offset is certain, which is still a lower bound.
        let size = tensor_bytes(tensor_type, elements).unwrap_or(0);
        data_end = data_end.max(offset.saturating_add(size));
    }
    let data_start = reader.position.div_ceil(alignment).saturating_mul(alignment);
    Ok(ParsedHeader {
        version,
        tensor_count,
        metadata_count,
        required_size: data_start.saturating_add(data_end),
        architecture,
    })
}

/// Bytes taken by `elements` values of a ggml tensor type: (elements per block, bytes per block).
fn tensor_bytes(tensor_type: u32, elements: u64) -> Option<u64> {
    let (block, bytes) = match tensor_type {
        0 => (1, 4),       // F32
        1 | 30 => (1, 2),  // F16, BF16
        2 => (32, 18),     // Q4_0
        3 => (32, 20),     // Q4_1
        6 => (32, 22),     // Q5_0
        7 => (32, 24),     // Q5_1
        8 => (32, 34),     // Q8_0
        9 => (32, 36),     // Q8_1
        10 => (256, 84),   // Q2_K
        11 => (256, 110),  // Q3_K
        12 => (256, 144),  // Q4_K
        13 => (256, 176),  // Q5_K
        14 => (256, 210),  // Q6_K
        15 => (256, 292),  // Q8_K
        20 => (32, 18),    // IQ4_NL
        23 => (256, 136),  // IQ4_XS
        24 => (1, 1),      // I8
        25 => (1, 2),      // I16
        26 => (1, 4),      // I32
        27 | 28 => (1, 8), // I64, F64
        _ => return None,
    };
    Some(elements.div_ceil(block).saturating_mul(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn put_string(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }

    /// A minimal GGUF: one string key, one u32 key, one F32 tensor of `elements` values.
    fn tiny_gguf(elements: u64) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&1u64.to_le_bytes()); // tensors
        out.extend_from_slice(&2u64.to_le_bytes()); // metadata
        put_string(&mut out, "general.architecture");
        out.extend_from_slice(&TYPE_STRING.to_le_bytes());
        put_string(&mut out, "llama");
        put_string(&mut out, "general.alignment");
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&64u32.to_le_bytes());
        put_string(&mut out, "weight");
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&elements.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // F32
        out.extend_from_slice(&0u64.to_le_bytes()); // offset
        let data_start = (out.len() as u64).div_ceil(64) * 64;
        out.resize(data_start as usize, 0);
        out.resize((data_start + elements * 4) as usize, 7);
        out
    }

    fn write_temp(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    #[test]
    fn accepts_a_complete_file_and_reads_its_header() {
        let bytes = tiny_gguf(10);
        let file = write_temp(&bytes);
        let summary = validate(file.path()).unwrap();
        assert_eq!(summary.tensor_count, 1);
        assert_eq!(summary.required_size, bytes.len() as u64);
        assert_eq!(summary.architecture.as_deref(), Some("llama"));
    }

    #[test]
    fn reports_truncated_tensor_data() {
        let bytes = tiny_gguf(10);
        let file = write_temp(&bytes[..bytes.len() - 3]);
        match validate(file.path()) {
            Err(LlamaError::Truncated { needed, actual, .. }) => {
                assert_eq!(needed, bytes.len() as u64);
                assert_eq!(actual, bytes.len() as u64 - 3);
            }
            other => panic!("expected truncation, got {other:?}"),
        }
    }

    #[test]
    fn reports_a_file_cut_inside_the_header() {
        let bytes = tiny_gguf(10);
        let file = write_temp(&bytes[..30]);
        assert!(matches!(validate(file.path()), Err(LlamaError::Truncated { .. })));
    }

    #[test]
    fn rejects_other_files_and_missing_ones() {
        let file = write_temp(b"<html>not a model</html>");
        assert!(matches!(validate(file.path()), Err(LlamaError::NotGguf { .. })));
        let mut garbage = tiny_gguf(1);
        garbage[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let file = write_temp(&garbage);
        assert!(matches!(validate(file.path()), Err(LlamaError::NotGguf { .. })));
        let missing = Path::new("/nonexistent/hopwise/model.gguf");
        assert!(matches!(validate(missing), Err(LlamaError::MissingFile { .. })));
    }
}
