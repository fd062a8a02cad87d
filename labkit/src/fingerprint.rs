//! Fingerprints of build inputs: an image is rebuilt only when its inputs'
//! fingerprint changes.

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes))
}

/// SHA-512, as release indexes pin archives (envtest's).
pub fn sha512_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA512, bytes))
}

fn hex(digest: ring::digest::Digest) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha256_of_a_known_input() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
