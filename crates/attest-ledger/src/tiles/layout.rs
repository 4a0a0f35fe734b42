//! Paths and encodings of a published log (C2SP `tlog-tiles`, height 8).

use crate::canonical::Hash;

/// Tile height: every tile spans 2⁸ hashes (C2SP `tlog-tiles` fixes it).
pub const TILE_HEIGHT: u8 = 8;

/// Hashes (or entries) in a full tile or bundle.
pub const TILE_WIDTH: u64 = 1 << TILE_HEIGHT;

/// `<N>[.p/<W>]`: `N` in groups of three digits, all but the last prefixed with `x`, and
/// the partial suffix when `width < 256`.
fn index_path(n: u64, width: u64) -> String {
    let mut groups = vec![format!("{:03}", n % 1000)];
    let mut rest = n / 1000;
    while rest > 0 {
        groups.push(format!("x{:03}", rest % 1000));
        rest /= 1000;
    }
    groups.reverse();
    let mut path = groups.join("/");
    if width < TILE_WIDTH {
        path.push_str(&format!(".p/{width}"));
    }
    path
}

/// The hash tile at level `level`, index `n`, holding `width` hashes:
/// `tile/<L>/<N>[.p/<W>]`.
pub fn tile_path(level: u8, n: u64, width: u64) -> String {
    format!("tile/{level}/{}", index_path(n, width))
}

/// The entry bundle `n` holding `width` entries: `tile/entries/<N>[.p/<W>]`.
pub fn bundle_path(n: u64, width: u64) -> String {
    format!("tile/entries/{}", index_path(n, width))
}

/// The bodies beside entry bundle `n`: `bodies/<N>[.p/<W>]`.
pub fn bodies_path(n: u64, width: u64) -> String {
    format!("bodies/{}", index_path(n, width))
}

/// The width of tile `n` at a level holding `len` hashes (0 if the tile is beyond it).
pub(crate) fn width_at(len: u64, n: u64) -> u64 {
    len.saturating_sub(n.saturating_mul(TILE_WIDTH))
        .min(TILE_WIDTH)
}

/// Encodes entry hashes as an entry bundle: each a big-endian u16 length (32) and the hash.
pub(crate) fn encode_bundle(records: &[Hash]) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len() * 34);
    for record in records {
        out.extend_from_slice(&32u16.to_be_bytes());
        out.extend_from_slice(record);
    }
    out
}

/// Parses an entry bundle that must hold exactly `width` 32-byte records; anything else
/// (another length, a short record, trailing bytes) is an error naming the record.
pub fn parse_bundle(bytes: &[u8], width: u64) -> Result<Vec<Hash>, String> {
    let mut records = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let index = records.len();
        let (len, tail) = rest
            .split_first_chunk::<2>()
            .ok_or_else(|| format!("record {index}: truncated length"))?;
        let len = u16::from_be_bytes(*len);
        if len != 32 {
            return Err(format!(
                "record {index} is {len} bytes; an Attest record is a 32-byte entry hash"
            ));
        }
        let (hash, tail) = tail
            .split_first_chunk::<32>()
            .ok_or_else(|| format!("record {index}: truncated"))?;
        records.push(*hash);
        rest = tail;
    }
    if records.len() as u64 != width {
        return Err(format!(
            "holds {} records, its path says {width}",
            records.len()
        ));
    }
    Ok(records)
}

/// Splits a bodies file into its `\n`-terminated lines (without the newline).
pub(crate) fn split_bodies(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Err("the last body is not newline-terminated".to_owned());
    };
    Ok(body.split(|b| *b == b'\n').collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_c2sp_tlog_tiles() {
        assert_eq!(tile_path(0, 0, 256), "tile/0/000");
        assert_eq!(tile_path(1, 1_234_067, 256), "tile/1/x001/x234/067");
        assert_eq!(tile_path(2, 7, 3), "tile/2/007.p/3");
        assert_eq!(bundle_path(1000, 255), "tile/entries/x001/000.p/255");
        assert_eq!(bodies_path(5, 256), "bodies/005");
        // The same N encoding as Go's tlog (whose paths add the height).
        let go = tlog_tiles::Tile::new(8, 1, 1_234_067, 256, false).path();
        assert_eq!(
            go.replacen("tile/8/", "tile/", 1),
            tile_path(1, 1_234_067, 256)
        );
    }

    #[test]
    fn bundles_round_trip_and_refuse_other_shapes() {
        let records = [[1u8; 32], [2u8; 32]];
        let bytes = encode_bundle(&records);
        assert_eq!(bytes.len(), 68);
        assert_eq!(parse_bundle(&bytes, 2).unwrap(), records.to_vec());
        assert!(parse_bundle(&bytes, 3).is_err());
        assert!(parse_bundle(&bytes[..67], 2).is_err());
        let mut other = bytes.clone();
        other[1] = 31;
        assert!(parse_bundle(&other, 2).is_err());
    }

    #[test]
    fn widths() {
        assert_eq!(width_at(0, 0), 0);
        assert_eq!(width_at(300, 0), 256);
        assert_eq!(width_at(300, 1), 44);
        assert_eq!(width_at(300, 2), 0);
    }
}
