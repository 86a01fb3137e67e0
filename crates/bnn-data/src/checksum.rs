//! SHA-256 of a file, read in chunks so large files never sit in memory twice.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::DataError;

/// Lower-case hex SHA-256 of the file's bytes, as `sha256sum` prints it.
pub fn sha256_file(path: &Path) -> Result<String, DataError> {
    let io_error = |cause| DataError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let mut file = std::fs::File::open(path).map_err(io_error)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let read = file.read(&mut buffer).map_err(io_error)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_digest_of_abc() {
        // FIPS 180-2, appendix B.1: SHA-256("abc").
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), b"abc").unwrap();
        assert_eq!(
            sha256_file(tmp.path()).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
