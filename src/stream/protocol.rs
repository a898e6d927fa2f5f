//! The 0.4 binary stream protocol (spec-0.4 `wire.md` §5–6): the `WCSW` write frame, the
//! `WCSA` acknowledgement, the `WCSR` read answer, the limits, and the GET query parameters
//! with JavaScript `Number()` semantics. Pure functions over bytes; the router and the
//! StreamDO shell call them.
//!
//! Knows nothing of storage or of the platform.

use crate::wire::js;

/// Content type of every binary body (a POST must start with it, case-sensitively).
pub const CONTENT_TYPE: &str = "application/vnd.world-celld.stream-batch.v1";
pub const MAX_WRITE_CHUNKS: usize = 32;
pub const MAX_CHUNK_BYTES: usize = 1_048_576;
pub const MAX_BATCH_BYTES: usize = 8_388_608;
pub const MAX_READ_CHUNKS: u32 = 32;
pub const MIN_READ_BYTES: u32 = 1_048_576;
pub const MAX_READ_BYTES: u32 = 8_388_608;
pub const MAX_ERROR_BYTES: usize = 16_384;
pub const MAX_WAIT_MS: u32 = 20_000;
/// The router's body limit for a write: the batch limit plus 1 KiB of framing.
pub const MAX_WRITE_BODY_BYTES: u64 = 8_389_632;
/// Highest stream index (`2^31 − 1`); a batch may not go past it.
pub const MAX_STREAM_INDEX: u64 = 2_147_483_647;

const WRITE_MAGIC: &[u8; 4] = b"WCSW";
const ACK_MAGIC: &[u8; 4] = b"WCSA";
const READ_MAGIC: &[u8; 4] = b"WCSR";
const PREFIX: &str = "world-celld: invalid stream protocol: ";

/// A `StreamProtocolError` (HTTP 400): a bad frame, a bad batch or a bad read parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    TruncatedWriteHeader,
    BadWriteMagic,
    UnsupportedWriteVersion,
    TruncatedChunkLength,
    TruncatedChunkData,
    TrailingWriteData,
    EmptyBatch,
    TooManyChunks,
    ChunkTooLarge,
    BatchTooLarge,
    ReadTooLarge,
    /// A GET query parameter missing or out of range.
    Param(Param),
}

/// The GET query parameters, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    StartIndex,
    MaxChunks,
    MaxBytes,
    WaitMs,
}

impl Param {
    pub const ALL: [Param; 4] = [Param::StartIndex, Param::MaxChunks, Param::MaxBytes, Param::WaitMs];

    pub fn name(self) -> &'static str {
        match self {
            Param::StartIndex => "startIndex",
            Param::MaxChunks => "maxChunks",
            Param::MaxBytes => "maxBytes",
            Param::WaitMs => "waitMs",
        }
    }

    /// Inclusive bounds.
    pub fn range(self) -> (u32, u32) {
        match self {
            Param::StartIndex => (0, MAX_STREAM_INDEX as u32),
            Param::MaxChunks => (0, MAX_READ_CHUNKS),
            Param::MaxBytes => (MIN_READ_BYTES, MAX_READ_BYTES),
            Param::WaitMs => (0, MAX_WAIT_MS),
        }
    }
}

impl ProtocolError {
    pub const NAME: &'static str = "StreamProtocolError";

    pub fn message(self) -> String {
        let detail = match self {
            ProtocolError::TruncatedWriteHeader => "truncated write header",
            ProtocolError::BadWriteMagic => "bad write magic",
            ProtocolError::UnsupportedWriteVersion => "unsupported write version",
            ProtocolError::TruncatedChunkLength => "truncated chunk length",
            ProtocolError::TruncatedChunkData => "truncated chunk data",
            ProtocolError::TrailingWriteData => "trailing write data",
            ProtocolError::EmptyBatch => "batch must contain at least one chunk",
            ProtocolError::TooManyChunks => "batch exceeds 32 chunks",
            ProtocolError::ChunkTooLarge => "chunk exceeds 1048576 bytes",
            ProtocolError::BatchTooLarge => "batch exceeds 8388608 bytes",
            ProtocolError::ReadTooLarge => "read result exceeds configured bounds",
            ProtocolError::Param(p) => {
                let (min, max) = p.range();
                return format!("{} must be an integer between {min} and {max}", p.name());
            }
        };
        format!("{PREFIX}{detail}")
    }
}

/// Decode a `WCSW` frame into the byte ranges of its chunks (no copies), then validate the
/// batch. Errors in the order of `wire.md` §6.1.
pub fn decode_write(frame: &[u8]) -> Result<Vec<std::ops::Range<usize>>, ProtocolError> {
    if frame.len() < 8 {
        return Err(ProtocolError::TruncatedWriteHeader);
    }
    if &frame[0..4] != WRITE_MAGIC {
        return Err(ProtocolError::BadWriteMagic);
    }
    if u16::from_be_bytes([frame[4], frame[5]]) != 1 {
        return Err(ProtocolError::UnsupportedWriteVersion);
    }
    let count = usize::from(u16::from_be_bytes([frame[6], frame[7]]));
    let mut at = 8usize;
    let mut chunks = Vec::with_capacity(count.min(MAX_WRITE_CHUNKS + 1));
    for _ in 0..count {
        let Some(len_bytes) = frame.get(at..at + 4) else { return Err(ProtocolError::TruncatedChunkLength) };
        let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
        at += 4;
        if frame.len() - at < len {
            return Err(ProtocolError::TruncatedChunkData);
        }
        chunks.push(at..at + len);
        at += len;
    }
    if at != frame.len() {
        return Err(ProtocolError::TrailingWriteData);
    }
    validate_batch(chunks.iter().map(ExactSizeIterator::len))?;
    Ok(chunks)
}

/// The batch rules of a write (count 1..32, each ≤ 1 MiB, sum ≤ 8 MiB).
pub fn validate_batch(sizes: impl ExactSizeIterator<Item = usize>) -> Result<(), ProtocolError> {
    let n = sizes.len();
    if n == 0 {
        return Err(ProtocolError::EmptyBatch);
    }
    if n > MAX_WRITE_CHUNKS {
        return Err(ProtocolError::TooManyChunks);
    }
    let mut total = 0usize;
    for size in sizes {
        if size > MAX_CHUNK_BYTES {
            return Err(ProtocolError::ChunkTooLarge);
        }
        total += size;
    }
    if total > MAX_BATCH_BYTES {
        return Err(ProtocolError::BatchTooLarge);
    }
    Ok(())
}

/// Encode a `WCSW` frame (used by tests and the benchmark's expectations).
pub fn encode_write(chunks: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + chunks.iter().map(|c| 4 + c.len()).sum::<usize>());
    out.extend_from_slice(WRITE_MAGIC);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(chunks.len() as u16).to_be_bytes());
    for c in chunks {
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
    out
}

/// The 16-byte `WCSA` acknowledgement of `count` chunks appended at `start_index`.
pub fn encode_ack(start_index: u32, count: u16) -> [u8; 16] {
    let tail = (start_index + u32::from(count)).wrapping_sub(1);
    let mut out = [0u8; 16];
    out[0..4].copy_from_slice(ACK_MAGIC);
    out[4..6].copy_from_slice(&1u16.to_be_bytes());
    out[6..8].copy_from_slice(&count.to_be_bytes());
    out[8..12].copy_from_slice(&start_index.to_be_bytes());
    out[12..16].copy_from_slice(&tail.to_be_bytes());
    out
}

/// A stream's state as the read frame carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireState {
    Open = 0,
    Closed = 1,
    Errored = 2,
    Expired = 3,
}

/// What a `WCSR` frame carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFrame<'a> {
    pub state: WireState,
    pub timed_out: bool,
    pub start_index: u32,
    /// Last durable index, −1 when none.
    pub tail_index: i64,
    pub chunks: &'a [Vec<u8>],
    /// `(name, message)`, written whenever the stream holds an error.
    pub error: Option<(&'a str, &'a str)>,
}

/// Encode a `WCSR` frame. The chunks' framed size may not exceed 8 MiB + 128 bytes and the
/// error 16 KiB (`read result exceeds configured bounds`).
pub fn encode_read(frame: &ReadFrame) -> Result<Vec<u8>, ProtocolError> {
    let framed: usize = frame.chunks.iter().map(|c| 4 + c.len()).sum();
    let (name, message) = frame.error.unwrap_or(("", ""));
    if frame.chunks.len() > MAX_READ_CHUNKS as usize
        || framed > MAX_READ_BYTES as usize + 128
        || name.len() + message.len() > MAX_ERROR_BYTES
    {
        return Err(ProtocolError::ReadTooLarge);
    }
    let mut out = Vec::with_capacity(28 + framed + name.len() + message.len());
    out.extend_from_slice(READ_MAGIC);
    out.push(1);
    out.push(frame.state as u8);
    out.push(u8::from(frame.timed_out));
    out.push(0);
    out.extend_from_slice(&frame.start_index.to_be_bytes());
    out.extend_from_slice(&(frame.tail_index as i32).to_be_bytes());
    out.extend_from_slice(&(frame.chunks.len() as u32).to_be_bytes());
    out.extend_from_slice(&(name.len() as u32).to_be_bytes());
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    for c in frame.chunks {
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(message.as_bytes());
    Ok(out)
}

/// A validated read request (the query parameters of a GET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadParams {
    pub start_index: u32,
    pub max_chunks: u32,
    pub max_bytes: u32,
    pub wait_ms: u32,
}

/// Parse one query parameter: present, and `Number(raw)` a safe integer within range.
fn param(p: Param, raw: Option<&str>) -> Result<u32, ProtocolError> {
    let n = raw.map_or(f64::NAN, js::string_to_number);
    let (min, max) = p.range();
    if n.fract() == 0.0 && n >= f64::from(min) && n <= f64::from(max) {
        Ok(n as u32)
    } else {
        Err(ProtocolError::Param(p))
    }
}

/// Parse the four GET parameters in order (`startIndex, maxChunks, maxBytes, waitMs`); the
/// first bad one is reported.
pub fn parse_read_params(raw: [Option<&str>; 4]) -> Result<ReadParams, ProtocolError> {
    Ok(ReadParams {
        start_index: param(Param::StartIndex, raw[0])?,
        max_chunks: param(Param::MaxChunks, raw[1])?,
        max_bytes: param(Param::MaxBytes, raw[2])?,
        wait_ms: param(Param::WaitMs, raw[3])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
    }

    #[test]
    fn spec_examples() {
        let frame = hex("57 43 53 57 00 01 00 02 00 00 00 03 01 02 03 00 00 00 01 04");
        let ranges = decode_write(&frame).unwrap();
        assert_eq!(ranges.iter().map(|r| frame[r.clone()].to_vec()).collect::<Vec<_>>(), vec![vec![1, 2, 3], vec![4]]);
        assert_eq!(encode_write(&[&[1, 2, 3], &[4]]), frame);
        assert_eq!(encode_ack(0, 2).to_vec(), hex("57 43 53 41 00 01 00 02 00 00 00 00 00 00 00 01"));
        let read = ReadFrame { state: WireState::Open, timed_out: true, start_index: 0, tail_index: -1, chunks: &[], error: None };
        assert_eq!(encode_read(&read).unwrap(), hex("57 43 53 52 01 00 01 00 00 00 00 00 FF FF FF FF 00 00 00 00 00 00 00 00 00 00 00 00"));
    }

    #[test]
    fn read_frame_with_chunks_and_error() {
        let chunks = vec![b"a".to_vec(), b"b".to_vec()];
        let f = ReadFrame {
            state: WireState::Errored,
            timed_out: false,
            start_index: 0,
            tail_index: 1,
            chunks: &chunks,
            error: Some(("MyError", "went wrong é")),
        };
        // Golden streams-binary seq 40.
        let want = crate::wire::base64::decode("V0NTUgECAAAAAAAAAAAAAQAAAAIAAAAHAAAADQAAAAFhAAAAAWJNeUVycm9yd2VudCB3cm9uZyDDqQ==").unwrap();
        assert_eq!(encode_read(&f).unwrap(), want);
        let big = vec![vec![0u8; MAX_CHUNK_BYTES]; 9];
        assert_eq!(encode_read(&ReadFrame { chunks: &big, error: None, ..f }), Err(ProtocolError::ReadTooLarge));
    }

    #[test]
    fn write_errors_in_order() {
        let e = |b: &[u8]| decode_write(b).unwrap_err().message();
        assert_eq!(e(b""), "world-celld: invalid stream protocol: truncated write header");
        assert_eq!(e(&hex("57 43 53 57 00 01 00")), "world-celld: invalid stream protocol: truncated write header");
        assert_eq!(e(&hex("57 43 53 58 00 01 00 01 00 00 00 01 78")), "world-celld: invalid stream protocol: bad write magic");
        assert_eq!(e(&hex("57 43 53 57 00 02 00 01 00 00 00 01 78")), "world-celld: invalid stream protocol: unsupported write version");
        assert_eq!(e(&hex("57 43 53 57 00 00 00 01 00 00 00 01 78")), "world-celld: invalid stream protocol: unsupported write version");
        assert_eq!(e(&hex("57 43 53 57 00 01 00 02 00 00 00 01 78")), "world-celld: invalid stream protocol: truncated chunk length");
        assert_eq!(e(&hex("57 43 53 57 00 01 00 01 00 00")), "world-celld: invalid stream protocol: truncated chunk length");
        assert_eq!(e(&hex("57 43 53 57 00 01 00 01 00 00 00 05 61 62")), "world-celld: invalid stream protocol: truncated chunk data");
        assert_eq!(e(&hex("57 43 53 57 00 01 00 01 00 00 00 01 78 00")), "world-celld: invalid stream protocol: trailing write data");
        assert_eq!(e(&hex("57 43 53 57 00 01 00 00")), "world-celld: invalid stream protocol: batch must contain at least one chunk");
        let c: Vec<&[u8]> = vec![b"c"; 33];
        assert_eq!(e(&encode_write(&c)), "world-celld: invalid stream protocol: batch exceeds 32 chunks");
        let big = vec![b'a'; MAX_CHUNK_BYTES + 1];
        assert_eq!(e(&encode_write(&[&big])), "world-celld: invalid stream protocol: chunk exceeds 1048576 bytes");
        let mib = vec![b'b'; MAX_CHUNK_BYTES];
        let mut many: Vec<&[u8]> = vec![&mib; 8];
        many.push(b"c");
        assert_eq!(e(&encode_write(&many)), "world-celld: invalid stream protocol: batch exceeds 8388608 bytes");
        // A huge declared length is truncated data, not an overflow.
        assert_eq!(e(&hex("57 43 53 57 00 01 00 01 FF FF FF FF 61")), "world-celld: invalid stream protocol: truncated chunk data");
        // 32 chunks with one of exactly 1 MiB and empty ones are fine.
        let mut ok: Vec<&[u8]> = vec![b""; 31];
        ok.push(&mib);
        assert_eq!(decode_write(&encode_write(&ok)).unwrap().len(), 32);
    }

    #[test]
    fn read_params_use_number_semantics() {
        let p = |s: [Option<&str>; 4]| parse_read_params(s);
        let ok = |a: &str| p([Some(a), Some("32"), Some("8388608"), Some("0")]).map(|r| r.start_index);
        assert_eq!(ok(""), Ok(0));
        assert_eq!(ok("1e3"), Ok(1000));
        assert_eq!(ok(" 7 "), Ok(7));
        assert_eq!(ok("0x10"), Ok(16));
        assert_eq!(ok("2147483647"), Ok(2_147_483_647));
        for bad in ["1.5", "-1", "abc", "2147483648", "Infinity", "NaN"] {
            assert_eq!(ok(bad), Err(ProtocolError::Param(Param::StartIndex)), "{bad}");
        }
        assert_eq!(ok("-0"), Ok(0));
        let e = p([Some("-1"), Some("99"), Some("1"), Some("-1")]).unwrap_err();
        assert_eq!(e.message(), "startIndex must be an integer between 0 and 2147483647");
        let e = p([Some("0"), Some("99"), Some("1"), Some("0")]).unwrap_err();
        assert_eq!(e.message(), "maxChunks must be an integer between 0 and 32");
        let e = p([Some("0"), Some("1"), Some("1048575"), Some("0")]).unwrap_err();
        assert_eq!(e.message(), "maxBytes must be an integer between 1048576 and 8388608");
        let e = p([Some("0"), Some("1"), Some("1048576"), None]).unwrap_err();
        assert_eq!(e.message(), "waitMs must be an integer between 0 and 20000");
        assert_eq!(p([None, Some("1"), Some("1048576"), Some("0")]).unwrap_err(), ProtocolError::Param(Param::StartIndex));
    }

    /// Arbitrary bytes never panic the decoder; encoded batches decode to themselves, and
    /// every truncation of a valid frame is refused.
    #[test]
    fn decoder_is_total_and_roundtrips() {
        let mut rng = crate::testing::xorshift(0x2545_f491_4f6c_dd1d);
        let mut next = || rng(u64::MAX);
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if next() % 2 == 0 && bytes.len() >= 8 {
                bytes[..6].copy_from_slice(b"WCSW\0\x01");
            }
            let _ = decode_write(&bytes);
        }
        for _ in 0..500 {
            let n = 1 + (next() % 32) as usize;
            let chunks: Vec<Vec<u8>> = (0..n).map(|_| (0..(next() % 40) as usize).map(|_| next() as u8).collect()).collect();
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            let frame = encode_write(&refs);
            let ranges = decode_write(&frame).unwrap();
            assert_eq!(ranges.iter().map(|r| frame[r.clone()].to_vec()).collect::<Vec<_>>(), chunks);
            let cut = (next() as usize) % frame.len();
            assert!(decode_write(&frame[..cut]).is_err());
        }
    }
}
