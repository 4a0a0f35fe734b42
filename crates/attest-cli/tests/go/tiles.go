// An independent check of a log published by `attest publish` with Go's
// golang.org/x/mod/sumdb/note and sumdb/tlog, from the published files alone: it opens
// the checkpoint with the log's key and a witness's cosignature/v1 key, reads the tree
// through tlog.TileHashReader over the C2SP tile paths, checks the root, an inclusion
// proof for every entry (the record is the entry bundle's 32-byte hash), and a
// consistency proof from an older checkpoint.
//
// Usage: go run tiles.go LOG_VKEY WITNESS_VKEY DIR OLD_NOTE
// Prints "ok ..." and exits 0, or names what failed and exits 1.
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// cosigV1 verifies C2SP tlog-cosignature/v1 (Ed25519, key type 0x04) signatures.
type cosigV1 struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (c *cosigV1) Name() string    { return c.name }
func (c *cosigV1) KeyHash() uint32 { return c.hash }
func (c *cosigV1) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	m := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
	return ed25519.Verify(c.key, m, sig[8:])
}

func newCosigV1(vkey string) *cosigV1 {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		fail("witness key %q", vkey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		fail("witness key %q is not a cosignature/v1 key", vkey)
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	hash := binary.BigEndian.Uint32(h[:4])
	if fmt.Sprintf("%08x", hash) != parts[1] {
		fail("witness key %q: key hash mismatch", vkey)
	}
	return &cosigV1{name: parts[0], hash: hash, key: ed25519.PublicKey(raw[1:])}
}

// tiles reads C2SP tlog-tiles paths (tile/<L>/<N>, no height element) from a directory.
type tiles struct{ dir string }

func (t tiles) Height() int { return 8 }
func (t tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, tile := range ts {
		p := strings.Replace(tile.Path(), "tile/8/", "tile/", 1)
		data, err := os.ReadFile(filepath.Join(t.dir, p))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}
func (t tiles) SaveTiles([]tlog.Tile, [][]byte) {}

func parseCheckpoint(text string) (string, int64, tlog.Hash) {
	lines := strings.Split(text, "\n")
	if len(lines) < 4 {
		fail("checkpoint text %q", text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size %q", lines[1])
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		fail("checkpoint root %q", lines[2])
	}
	return lines[0], size, root
}

func main() {
	if len(os.Args) != 5 {
		fail("usage: tiles LOG_VKEY WITNESS_VKEY DIR OLD_NOTE")
	}
	logV, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fail("log key: %v", err)
	}
	witness := newCosigV1(os.Args[2])
	dir := os.Args[3]
	msg, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		fail("%v", err)
	}
	n, err := note.Open(msg, note.VerifierList(logV, witness))
	if err != nil {
		fail("note.Open: %v", err)
	}
	signers := map[string]bool{}
	for _, s := range n.Sigs {
		signers[s.Name] = true
	}
	if !signers[logV.Name()] || !signers[witness.Name()] {
		fail("the checkpoint is not signed by both the log and the witness: %v", signers)
	}
	_, size, root := parseCheckpoint(n.Text)
	tree := tlog.Tree{N: size, Hash: root}
	thr := tlog.TileHashReader(tree, tiles{dir})
	got, err := tlog.TreeHash(size, thr)
	if err != nil || got != root {
		fail("TreeHash: %v (%v, want %v)", err, got, root)
	}
	for i := int64(0); i < size; i++ {
		bundle := tlog.Tile{H: 8, L: -1, N: i / 256, W: int(min(256, size-i/256*256))}
		p := strings.Replace(bundle.Path(), "tile/8/data/", "tile/entries/", 1)
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			fail("%v", err)
		}
		off := (i % 256) * 34
		if int64(len(data)) < off+34 || data[off] != 0 || data[off+1] != 32 {
			fail("%s: record %d is not a 32-byte hash", p, i%256)
		}
		leaf := tlog.RecordHash(data[off+2 : off+34])
		proof, err := tlog.ProveRecord(size, i, thr)
		if err != nil {
			fail("ProveRecord(%d): %v", i, err)
		}
		if err := tlog.CheckRecord(proof, size, root, i, leaf); err != nil {
			fail("CheckRecord(%d): %v", i, err)
		}
	}
	oldMsg, err := os.ReadFile(os.Args[4])
	if err != nil {
		fail("%v", err)
	}
	old, err := note.Open(oldMsg, note.VerifierList(logV))
	if err != nil {
		fail("note.Open(old): %v", err)
	}
	_, oldSize, oldRoot := parseCheckpoint(old.Text)
	proof, err := tlog.ProveTree(size, oldSize, thr)
	if err != nil {
		fail("ProveTree: %v", err)
	}
	if err := tlog.CheckTree(proof, size, root, oldSize, oldRoot); err != nil {
		fail("CheckTree: %v", err)
	}
	fmt.Printf("ok: %d records proved from the tiles, consistent with size %d, cosigned by %s\n", size, oldSize, witness.Name())
}

func min(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}
