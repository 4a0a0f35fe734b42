"""Check an Attest audit bundle offline: python3 verify_bundle.py BUNDLE.tar VKEY (exit 0 ok, 1 failed)."""
import base64, hashlib, json, sys, tarfile
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
H = lambda *parts: hashlib.sha256(b"".join(parts)).digest()
def fail(what): sys.exit(print("FAILED: " + what) or 1)
def open_note(text, vkey):  # C2SP signed-note: the body, then a signature line per signer
    name, keyhash, key = vkey.split("+", 2); key = base64.b64decode(key)
    body, _, sigs = text.rpartition("\n\n"); body += "\n"
    for line in sigs.splitlines():
        if line.startswith("\u2014 " + name + " "):
            sig = base64.b64decode(line.split(" ")[2])
            if sig[:4].hex() == keyhash and H(name.encode(), b"\n", key)[:4] == sig[:4]:
                Ed25519PublicKey.from_public_bytes(key[1:]).verify(sig[4:], body.encode()); lines = body.split("\n")
                return lines[0], int(lines[1]), base64.b64decode(lines[2])
    raise ValueError("no signature by " + name)
def included(i, n, leaf, path, root):  # RFC 9162 section 2.1.3.2
    fn, sn, r = i, n - 1, leaf
    for p in path:
        if sn == 0: return False
        if fn & 1 or fn == sn:
            r = H(b"\1", p, r)
            while not fn & 1 and fn: fn, sn = fn >> 1, sn >> 1
        else: r = H(b"\1", r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root
def consistent(m, n, path, old, new):  # RFC 9162 section 2.1.4.2
    path = ([old] if m & (m - 1) == 0 else []) + path; fn, sn = m - 1, n - 1
    while fn & 1: fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0: return False
        if fn & 1 or fn == sn:
            fr, sr = H(b"\1", c, fr), H(b"\1", c, sr)
            while not fn & 1 and fn: fn, sn = fn >> 1, sn >> 1
        else: sr = H(b"\1", sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old and sr == new and sn == 0
with tarfile.open(sys.argv[1]) as tar: files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
try: origin, size, root = open_note(files["checkpoint.note"].decode(), sys.argv[2])
except Exception as e: fail("checkpoint.note: %r" % e)
rows, proofs = files["rows.jsonl"].splitlines(), files["proofs.jsonl"].splitlines()
if not rows or len(rows) != len(proofs): fail("rows.jsonl and proofs.jsonl differ in length")
for n, (row, proof) in enumerate(zip(rows, proofs), 1):
    p, seq = json.loads(proof), json.loads(row)["seq"]; path = [base64.b64decode(h) for h in p["proof"]]
    if p["seq"] != seq or p["entry_hash"] != H(row).hex() or p["tree_size"] != size or not included(seq - 1, size, H(b"\0", H(row)), path, root):
        fail("rows.jsonl line %d (seq %d): not in the signed tree of %d entries" % (n, seq, size))
for name in (f for f in files if f.startswith("checkpoints/")):
    c = json.loads(files["consistency/" + name[12:-5] + ".json"])
    try: _, old_size, old_root = open_note(files[name].decode(), sys.argv[2])
    except Exception as e: fail("%s: %r" % (name, e))
    if old_size != c["old_size"] or not consistent(old_size, size, [base64.b64decode(h) for h in c["proof"]], old_root, root):
        fail("consistency/%d.json: %s is not a prefix of checkpoint.note" % (old_size, name))
print("ok: %d rows of %s in the signed tree of %d entries" % (len(rows), origin, size))
