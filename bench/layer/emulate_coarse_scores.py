"""A lane-level emulation of the CUDA coarse stage's step 1 (src/cuda/layer/coarse_scores.cuh)
against the CPU rule, for checking the kernel's index math without a GPU.

It mirrors the kernel's quantization, byte packing and fragment indexing per lane, computes each
m16n8k32 product from the fragments by the PTX ISA's layouts (A: row g / g + 8, bytes 4t and
16 + 4t; B: column g, the same bytes; C: (g, 2t), (g, 2t + 1), (g + 8, ...)), and checks that
every stored order key equals the CPU rule's: the float32 rounding of the exact sum of the
block-floating-point integers (docs/layer.md, "Precision").

    python bench/layer/emulate_coarse_scores.py
"""
import numpy as np, struct, math
rng = np.random.default_rng(1)
KS = 21
def fbits(x): return struct.unpack('<I', struct.pack('<f', float(np.float32(x))))[0]
def bitsf(b): return np.float32(struct.unpack('<f', struct.pack('<I', b & 0xffffffff))[0])
def mag_exp(mag):
    if mag == 0: return 0
    f = mag >> 23
    return f - 127 if f else (mag.bit_length() - 1) - 149
def quantize_mean(x, E):
    b = fbits(x); mag = b & 0x7fffffff; f = mag >> 23
    sig = ((mag & 0x7fffff) | 0x800000) if f else mag
    shift = E + 23 - KS - (f - 127 if f else -126)
    if shift > 25: return 0
    if shift <= 0: q = sig << -shift
    else:
        q = sig >> shift; rest = sig & ((1 << shift) - 1); half = 1 << (shift - 1)
        if rest > half or (rest == half and (q & 1)): q += 1
    return -q if b >> 31 else q
def score_rank(total, EQ, EK):
    # RN(total) in float32, then times 2^(EQ + EK - 2 KS) (layer_arithmetic.hpp: one more rounding
    # for subnormal results; 0 below float32's range, inf past it)
    f = np.float32(total)
    if f == 0: return f
    scaled = math.ldexp(float(f), EQ + EK - 2 * KS)
    return np.float32(scaled) if abs(scaled) < 2.0 ** 128 else np.float32(math.copysign(np.inf, scaled))
def score_key(f):
    b = fbits(f)
    if b == 0x80000000: b = 0
    return (~b) & 0xffffffff if b & 0x80000000 else b | 0x80000000
def key_scale(E):
    total = KS - E; half = int(total / 2)
    return bitsf((half + 127) << 23), bitsf((total - half + 127) << 23)
def offset_quantized(x, s):
    y = np.float32(np.float32(x) * s[0])          # exact
    z = np.float32(np.float32(y * s[1]) + np.float32(12582912.0))  # y*s1 exact, one rounding
    return (fbits(z) - 0x4b000000) & 0xffffffff
def gather_bytes(w, p): return sum(((w[i] >> (8 * p)) & 0xff) << (8 * i) for i in range(4))
def bytes_of(word, signed):
    out = [(word >> (8 * i)) & 0xff for i in range(4)]
    return [v - 256 if signed and v > 127 else v for v in out]

def run(R=32, D=128, nk=50, valid_rows=29):
    q = (rng.standard_normal((R, D)) * 2.0 ** rng.integers(-8, 8)).astype(np.float32)
    K = (rng.standard_normal((nk, D)) * 2.0 ** rng.integers(-8, 8, size=(nk, 1))).astype(np.float32)
    q[valid_rows:] = 0  # rows past valid_rows are zero in the kernel
    live = rng.random(nk) < 0.9
    pitch_b = D + 16
    planes = np.zeros((3, R, pitch_b), dtype=np.int64)
    row_exp = [0] * R; row_sum = [0] * R
    lane_cols = D // 32
    for row in range(R):  # quantize_rows, per lane
        x = q[row]
        largest = max(fbits(v) & 0x7fffffff for v in x)
        E = mag_exp(largest); row_exp[row] = E
        s = 0
        for lane in range(32):
            for c in range(lane_cols):
                Q = quantize_mean(x[lane_cols * lane + c], E); s += Q
                for p in range(3): planes[p][row][lane_cols * lane + c] = ((Q & 0xffffffff) >> (8 * p)) & 0xff
        row_sum[row] = s
    EK = [mag_exp(max(fbits(v) & 0x7fffffff for v in K[j])) for j in range(nk)]
    keys = np.zeros((R, ((nk + 127) // 128) * 128), dtype=np.uint64)
    for warp in range(8):
        tile = warp
        while tile * 16 < nk:
            for first_row in range(0, R, 16 if R >= 16 else R):
                nt = (16 if R >= 16 else R) // 8
                acc = np.zeros((32, nt, 5, 4), dtype=np.int64)
                for c in range(0, D, 32):
                    A = [[None] * 4 for _ in range(32)]  # per lane, per piece: 4 regs
                    Bf = {}
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        kid = [min(tile * 16 + g + 8 * h, nk - 1) for h in range(2)]
                        krow = [K[j] for j in kid]
                        u = [[[offset_quantized(krow[h][c + 16 * half + 4 * t + i], key_scale(EK[kid[h]])) for i in range(4)] for half in range(2)] for h in range(2)]
                        A[lane] = [[gather_bytes(u[r & 1][r >> 1], p) for r in range(4)] for p in range(3)]
                        for n in range(nt):
                            row = first_row + 8 * n + g
                            for pq in range(3):
                                w0 = sum(int(planes[pq][row][c + 4 * t + i]) << (8 * i) for i in range(4))
                                w1 = sum(int(planes[pq][row][c + 16 + 4 * t + i]) << (8 * i) for i in range(4))
                                Bf[(lane, n, pq)] = (w0, w1)
                    for n in range(nt):
                        for pq in range(3):
                            for pk in range(3):
                                Am = np.zeros((16, 32), dtype=np.int64); Bm = np.zeros((32, 8), dtype=np.int64)
                                for lane in range(32):
                                    g, t = lane // 4, lane % 4
                                    a = A[lane][pk]
                                    Am[g, 4*t:4*t+4] = bytes_of(a[0], False); Am[g+8, 4*t:4*t+4] = bytes_of(a[1], False)
                                    Am[g, 16+4*t:16+4*t+4] = bytes_of(a[2], False); Am[g+8, 16+4*t:16+4*t+4] = bytes_of(a[3], False)
                                    b0, b1 = Bf[(lane, n, pq)]
                                    Bm[4*t:4*t+4, g] = bytes_of(b0, pq == 2); Bm[16+4*t:16+4*t+4, g] = bytes_of(b1, pq == 2)
                                Cm = Am @ Bm
                                for lane in range(32):
                                    g, t = lane // 4, lane % 4
                                    acc[lane, n, pk + pq] += [Cm[g, 2*t], Cm[g, 2*t+1], Cm[g+8, 2*t], Cm[g+8, 2*t+1]]
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    for n in range(nt):
                        for e in range(4):
                            key = tile * 16 + g + 8 * (e >> 1); row = first_row + 8 * n + 2 * t + (e & 1)
                            s = -row_sum[row] * (1 << 22) + sum(int(acc[lane, n, k, e]) * (1 << (8 * k)) for k in range(5))
                            ok = key < nk and live[key] and row < valid_rows
                            keys[row, key] = score_key(score_rank(s, row_exp[row], EK[min(key, nk - 1)])) if ok else 0
            tile += 8
    # CPU rule
    Qq = np.array([[quantize_mean(v, row_exp[r]) for v in q[r]] for r in range(R)], dtype=np.int64)
    Qk = np.array([[quantize_mean(v, EK[j]) for v in K[j]] for j in range(nk)], dtype=np.int64)
    for r in range(valid_rows):
        for j in range(nk):
            want = score_key(score_rank(int((Qq[r] * Qk[j]).sum()), row_exp[r], EK[j])) if live[j] else 0
            assert keys[r, j] == want, (r, j, keys[r, j], want)
    print("ok", R, D, nk)
run(32, 128, 50, 29)
run(8, 64, 37, 8)
run(16, 64, 20, 11)
