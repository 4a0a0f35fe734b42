//! The Merkle tree over entry hashes (RFC 6962 / RFC 9162 §2.1), stored the way Go's
//! `sumdb/tlog` stores it: every complete subtree's hash at its stored-hash index, so
//! any root, inclusion proof or consistency proof needs O(log n) reads.
//!
//! Leaf *i* (seq *i*+1) is `SHA-256(0x00 ‖ entry_hash)` (RFC 9162 §2.1.1, with the
//! 32-byte entry hash as the leaf data); a node is `SHA-256(0x01 ‖ left ‖ right)`.

use tlog_tiles::{node_hash, record_hash, stored_hash_index, HashReader, EMPTY_HASH};

use crate::canonical::Hash;

pub(crate) use tlog_tiles::Hash as TreeHash;

/// The leaf hash of an entry: `SHA-256(0x00 ‖ entry_hash)` (RFC 9162 §2.1.1).
pub fn leaf_hash(entry_hash: &Hash) -> Hash {
    record_hash(entry_hash).0
}

/// The root of the empty tree: SHA-256 of nothing (RFC 9162 §2.1.1).
pub const EMPTY_ROOT: Hash = EMPTY_HASH.0;

/// The roots of the perfect subtrees that make up a tree, left to right: enough to
/// compute its root and to keep appending leaves, in O(log n) memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    subtrees: Vec<Hash>,
}

impl CompactRange {
    /// The empty tree.
    pub fn new() -> Self {
        CompactRange::default()
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one leaf hash (already `SHA-256(0x00 ‖ …)`).
    pub fn push(&mut self, leaf: Hash) {
        self.push_with(leaf, |_| {});
    }

    /// Appends one leaf hash, calling `completed` with each hash the leaf completes:
    /// the leaf, then every subtree it closes, smallest first. These are exactly the
    /// hashes the ledger stores for that leaf, in stored-index order.
    pub fn push_with(&mut self, leaf: Hash, mut completed: impl FnMut(&Hash)) {
        let mut hash = leaf;
        completed(&hash);
        let mut size = self.size;
        while size & 1 == 1 {
            match self.subtrees.pop() {
                Some(left) => hash = node_hash(TreeHash(left), TreeHash(hash)).0,
                None => break,
            }
            completed(&hash);
            size >>= 1;
        }
        self.subtrees.push(hash);
        self.size += 1;
    }

    /// The tree's root hash (RFC 9162 §2.1.1).
    pub fn root(&self) -> Hash {
        let mut subtrees = self.subtrees.iter().rev();
        let Some(&last) = subtrees.next() else {
            return EMPTY_ROOT;
        };
        subtrees.fold(last, |right, &left| {
            node_hash(TreeHash(left), TreeHash(right)).0
        })
    }

    /// The compact range of the first `size` leaves, read from stored hashes.
    pub(crate) fn from_stored(
        size: u64,
        stored: &impl HashReader,
    ) -> Result<CompactRange, tlog_tiles::Error> {
        let mut indexes = Vec::new();
        let mut start = 0u64;
        for level in (0..64u8).rev() {
            let width = 1u64 << level;
            if size & width != 0 {
                indexes.push(stored_hash_index(level, start >> level));
                start += width;
            }
        }
        let subtrees = stored
            .read_hashes(&indexes)?
            .into_iter()
            .map(|h| h.0)
            .collect();
        Ok(CompactRange { size, subtrees })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962 reference root, computed the slow recursive way (RFC 9162 §2.1.1).
    fn reference_root(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => EMPTY_ROOT,
            1 => leaves[0],
            n => {
                let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
                let k = if k == n { k / 2 } else { k };
                node_hash(
                    TreeHash(reference_root(&leaves[..k])),
                    TreeHash(reference_root(&leaves[k..])),
                )
                .0
            }
        }
    }

    #[test]
    fn compact_range_root_matches_the_recursive_definition() {
        let mut range = CompactRange::new();
        let mut leaves = Vec::new();
        assert_eq!(range.root(), EMPTY_ROOT);
        for i in 0..70u8 {
            let leaf = leaf_hash(&[i; 32]);
            leaves.push(leaf);
            range.push(leaf);
            assert_eq!(range.root(), reference_root(&leaves), "size {}", i + 1);
        }
    }

    #[test]
    fn leaf_and_empty_hashes_follow_rfc9162() {
        use sha2::{Digest, Sha256};
        let entry = [7u8; 32];
        let mut expected = Sha256::new();
        expected.update([0u8]);
        expected.update(entry);
        assert_eq!(leaf_hash(&entry), <Hash>::from(expected.finalize()));
        assert_eq!(EMPTY_ROOT, <Hash>::from(Sha256::digest(b"")));
    }

    /// The leaves and roots of the RFC 6962 test data used by Go's `tlog` and the
    /// certificate-transparency reference tests.
    const RFC6962_LEAVES: [&[u8]; 8] = [
        b"",
        b"\x00",
        b"\x10",
        b"\x20\x21",
        b"\x30\x31",
        b"\x40\x41\x42\x43",
        b"\x50\x51\x52\x53\x54\x55\x56\x57",
        b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
    ];
    const RFC6962_ROOTS: [&str; 8] = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    #[test]
    fn roots_match_the_rfc6962_test_vectors() {
        let mut range = CompactRange::new();
        for (leaf, expected) in RFC6962_LEAVES.iter().zip(RFC6962_ROOTS) {
            range.push(record_hash(leaf).0);
            assert_eq!(hex::encode(range.root()), expected, "size {}", range.size());
        }
    }

    /// Stored hashes in memory, for proof tests without SQLite.
    #[derive(Default)]
    struct Memory(std::cell::RefCell<Vec<TreeHash>>);

    impl HashReader for Memory {
        fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
            let stored = self.0.borrow();
            indexes
                .iter()
                .map(|&i| {
                    stored
                        .get(i as usize)
                        .copied()
                        .ok_or(tlog_tiles::Error::IndexesNotInTree)
                })
                .collect()
        }
    }

    /// Go's `TestTree`, for our stored layout: every root, every inclusion and every
    /// consistency proof up to 40 leaves checks, and flipping any bit of any proof
    /// element makes it fail.
    #[test]
    fn every_proof_checks_and_every_flipped_bit_fails() {
        use tlog_tiles::{
            check_record, check_tree, prove_record, prove_tree, stored_hashes_for_record_hash,
            tree_hash,
        };
        let memory = Memory::default();
        let mut leaves = Vec::new();
        let mut roots = Vec::new();
        for n in 0..40u64 {
            let leaf = leaf_hash(&[n as u8; 32]);
            let new = stored_hashes_for_record_hash(n, TreeHash(leaf), &memory).unwrap();
            assert_eq!(memory.0.borrow().len() as u64, stored_hash_index(0, n));
            memory.0.borrow_mut().extend(new);
            leaves.push(leaf);
            let size = n + 1;
            let root = tree_hash(size, &memory).unwrap();
            assert_eq!(root.0, reference_root(&leaves));
            assert_eq!(
                CompactRange::from_stored(size, &memory).unwrap().root(),
                root.0
            );
            roots.push(root);
            for i in 0..size {
                let proof = prove_record(size, i, &memory).unwrap();
                let leaf = TreeHash(leaves[i as usize]);
                check_record(&proof, size, root, i, leaf).unwrap();
                for (k, element) in proof.iter().enumerate() {
                    for bit in [0usize, 77, 255] {
                        let mut bad = proof.clone();
                        bad[k] = flip(*element, bit);
                        assert!(check_record(&bad, size, root, i, leaf).is_err());
                    }
                }
            }
            for old in 1..=size {
                let proof = prove_tree(size, old, &memory).unwrap();
                let old_root = roots[old as usize - 1];
                check_tree(&proof, size, root, old, old_root).unwrap();
                for (k, element) in proof.iter().enumerate() {
                    let mut bad = proof.clone();
                    bad[k] = flip(*element, 3);
                    assert!(check_tree(&bad, size, root, old, old_root).is_err());
                }
            }
        }
    }

    fn flip(hash: TreeHash, bit: usize) -> TreeHash {
        let mut bytes = hash.0;
        bytes[bit / 8] ^= 1 << (bit % 8);
        TreeHash(bytes)
    }
}
