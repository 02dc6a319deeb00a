"""Copies a GGUF keeping its first L blocks (llama.block_count = L): python3 gguf_trunc.py IN OUT L"""
import struct, sys
src, dst, L = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = open(src, 'rb'); d = f.read()
o = 0
def rd(fmt):
    global o; v = struct.unpack_from('<' + fmt, d, o); o += struct.calcsize('<' + fmt); return v[0]
def rstr():
    global o; n = rd('Q'); s = d[o:o + n]; o += n; return s
SIZES = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
def rval(t):
    global o
    if t in SIZES: return rd(SIZES[t])
    if t == 8: return rstr()
    if t == 9:
        et = rd('I'); n = rd('Q'); return (et, [rval(et) for _ in range(n)])
    raise ValueError(t)
assert d[:4] == b'GGUF'; o = 4
ver = rd('I'); nt = rd('Q'); nkv = rd('Q')
kv_start = o; kvs = []
for _ in range(nkv):
    ks = o; k = rstr(); t = rd('I'); v = rval(t); kvs.append((k, t, v, d[ks:o]))
infos = []
for _ in range(nt):
    name = rstr(); nd = rd('I'); dims = [rd('Q') for _ in range(nd)]; ty = rd('I'); off = rd('Q'); infos.append((name, dims, ty, off))
align = dict((k, v) for k, t, v, _ in kvs).get(b'general.alignment', 32)
data0 = (o + align - 1) // align * align
offs = sorted(set(i[3] for i in infos)) + [len(d) - data0]
size = {off: offs[offs.index(off) + 1] - off for off in offs[:-1]}
keep = [i for i in infos if not (i[0].startswith(b'blk.') and int(i[0].split(b'.')[1]) >= L)]
out = bytearray(b'GGUF' + struct.pack('<IQQ', ver, len(keep), nkv))
for k, t, v, raw in kvs:
    out += struct.pack('<Q', len(k)) + k + struct.pack('<II', 4, L) if k.endswith(b'.block_count') and t == 4 else raw
blobs, pos = [], 0
for name, dims, ty, off in keep:
    out += struct.pack('<Q', len(name)) + name + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', x) for x in dims) + struct.pack('<IQ', ty, pos)
    blob = d[data0 + off: data0 + off + size[off]]; blobs.append(blob); pos += len(blob)
out += b'\0' * ((-len(out)) % align)
for b in blobs: out += b
open(dst, 'wb').write(out)
print(f"{src}: {nt} tensors -> {len(keep)}, {len(d)/1e6:.1f} MB -> {len(out)/1e6:.1f} MB, {L} blocks")
