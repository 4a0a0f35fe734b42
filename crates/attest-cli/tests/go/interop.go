// An independent check of Attest's evidence with Go's golang.org/x/mod/sumdb/note and
// sumdb/tlog: it opens a checkpoint note under a verifier key, then checks an inclusion
// proof and a consistency proof made by `attest prove --json` against the signed root.
//
// Usage: go run interop.go VKEY CHECKPOINT_NOTE INCLUSION_JSON CONSISTENCY_JSON
// Prints "ok ..." and exits 0, or names what failed and exits 1.
package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Seq       int64    `json:"seq"`
	Index     int64    `json:"index"`
	TreeSize  int64    `json:"tree_size"`
	EntryHash string   `json:"entry_hash"`
	Proof     []string `json:"proof"`
	Root      string   `json:"root"`
}

type consistency struct {
	OldSize int64    `json:"old_size"`
	NewSize int64    `json:"new_size"`
	OldRoot string   `json:"old_root"`
	NewRoot string   `json:"new_root"`
	Proof   []string `json:"proof"`
}

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func hashes(texts []string) []tlog.Hash {
	out := make([]tlog.Hash, len(texts))
	for i, t := range texts {
		h, err := tlog.ParseHash(t)
		if err != nil {
			fail("proof element %d: %v", i, err)
		}
		out[i] = h
	}
	return out
}

func readJSON(path string, v interface{}) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		fail("%s: %v", path, err)
	}
}

func main() {
	if len(os.Args) != 5 {
		fail("usage: interop VKEY NOTE INCLUSION CONSISTENCY")
	}
	verifier, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fail("verifier key: %v", err)
	}
	msg, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail("%v", err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		fail("note.Open: %v", err)
	}
	// A C2SP tlog-checkpoint: origin, size, base64 root (tlog.ParseTree wants the
	// sumdb's own origin line, so the three lines are read here).
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 || lines[0] != verifier.Name() {
		fail("checkpoint origin %q is not the key name %q", lines[0], verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		fail("checkpoint root: %v", err)
	}

	var inc inclusion
	readJSON(os.Args[3], &inc)
	if inc.TreeSize != size || inc.Root != base64.StdEncoding.EncodeToString(root[:]) {
		fail("inclusion proof is for size %d, checkpoint for %d", inc.TreeSize, size)
	}
	entry, err := hex.DecodeString(inc.EntryHash)
	if err != nil || len(entry) != 32 {
		fail("entry hash %q", inc.EntryHash)
	}
	if err := tlog.CheckRecord(hashes(inc.Proof), size, root, inc.Index, tlog.RecordHash(entry)); err != nil {
		fail("tlog.CheckRecord: %v", err)
	}

	var con consistency
	readJSON(os.Args[4], &con)
	if con.NewSize != size {
		fail("consistency proof ends at %d, checkpoint at %d", con.NewSize, size)
	}
	oldRoot, err := tlog.ParseHash(con.OldRoot)
	if err != nil {
		fail("old root: %v", err)
	}
	if err := tlog.CheckTree(hashes(con.Proof), size, root, con.OldSize, oldRoot); err != nil {
		fail("tlog.CheckTree: %v", err)
	}
	fmt.Printf("ok: note signed by %s; seq %d in tree %d; tree %d is a prefix of %d\n",
		verifier.Name(), inc.Seq, size, con.OldSize, size)
}
