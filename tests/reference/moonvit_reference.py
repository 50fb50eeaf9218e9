"""An independent reference for Kimi K3's image path, written from its definition
(docs/model.md "Image input": preprocessing, the tower, merge and projector), not from the C++: Pillow preprocessing, the MoonViT-V2 tower, the 2x2 merge and
the PatchMergerMLPV2 projector, in numpy at a chosen float type (float64 for a gold run,
float32 for the engine's precision).

Deliberately plain: loops over blocks and heads, the position-table interpolation written out
from the formula (an image library's bilinear resize antialiases when it shrinks; PyTorch's
does not), the RoPE pairs
as complex numbers. `swap_rope=True` gives the docstring's wrong orientation (even slots = row),
so a test can show that the orientation is observable (docs/model.md "The tower": 2-D RoPE).
"""

import math

import numpy as np
from PIL import Image

PATCH = 14
MERGE = 2
IN_PATCH_LIMIT = 65536
PATCH_LIMIT_ON_ONE_SIDE = 512
EPS_TORCH27 = 2.0 ** -23
EPS_TORCH24 = 2.0 ** -7


# ---- preprocessing (docs/model.md "Preprocessing") ----

def navit_size(w, h):
    """The size rule: (resized_w, resized_h, padded_w, padded_h) in Python double arithmetic."""
    s1 = math.sqrt(IN_PATCH_LIMIT / (max(1, w // PATCH) * max(1, h // PATCH)))
    s2 = (PATCH_LIMIT_ON_ONE_SIDE * PATCH) / w
    s3 = (PATCH_LIMIT_ON_ONE_SIDE * PATCH) / h
    scale = min(1.0, s1, s2, s3)
    cap = PATCH_LIMIT_ON_ONE_SIDE * PATCH
    rw = min(max(1, int(w * scale)), cap)
    rh = min(max(1, int(h * scale)), cap)
    f = MERGE * PATCH
    return rw, rh, rw + (f - rw % f) % f, rh + (f - rh % f) % f


def chessboard(w, h):
    """Transparency: 8-px squares, white 255 top-left, gray 180 where (x//8 + y//8) is odd."""
    ys, xs = np.mgrid[0:h, 0:w]
    odd = ((xs // 8) + (ys // 8)) % 2 == 1
    bg = np.where(odd, 180, 255).astype(np.float32)
    return np.repeat(bg[:, :, None], 3, axis=2)


def fill_transparency(img):
    """Transparency (stage after_resize): an RGB uint8 array [h][w][3]."""
    if img.mode == "RGB":
        return np.asarray(img, dtype=np.uint8)
    has_alpha = img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info
    if not has_alpha:
        return np.asarray(img.convert("RGB"), dtype=np.uint8)
    rgba = np.asarray(img.convert("RGBA"), dtype=np.float32)
    alpha = rgba[:, :, 3:4] / np.float32(255)
    out = alpha * rgba[:, :, :3] + (np.float32(1) - alpha) * chessboard(img.width, img.height)
    return out.astype(np.uint8)  # truncation, as the release's cast


def normalise_lut():
    """Patches: float32(v/255) - 0.5 (in double, rounded to float32), times 2."""
    lut = np.empty(256, dtype=np.float32)
    for v in range(256):
        x = np.float32(v / 255.0)
        lut[v] = np.float32(float(x) - 0.5) * np.float32(2.0)
    return lut


def preprocess(path):
    """Pillow's view of one image: (pixel_values [L][3][14][14] float32, (gh, gw), (W, H))."""
    img = Image.open(path)
    img.load()
    w, h = img.size
    rw, rh, pw, ph = navit_size(w, h)
    if (rw, rh) != (w, h):
        img = img.resize((rw, rh), Image.BICUBIC)
    rgb = fill_transparency(img)
    padded = np.zeros((ph, pw, 3), dtype=np.uint8)
    padded[:rh, :rw] = rgb
    x = normalise_lut()[padded]  # [ph][pw][3]
    gh, gw = ph // PATCH, pw // PATCH
    patches = x.reshape(gh, PATCH, gw, PATCH, 3).transpose(0, 2, 4, 1, 3).reshape(gh * gw, 3, PATCH, PATCH)
    return np.ascontiguousarray(patches), (gh, gw), (w, h)


# ---- the tower (docs/model.md "The tower") ----

def interpolate_table(table, gh, gw, ft):
    """The position table: PyTorch bilinear, align_corners False, no antialias, from the formula."""
    th, tw, _ = table.shape

    def axis(n_in, n_out):
        s = np.float32(n_in) / np.float32(n_out)
        taps = []
        for i in range(n_out):
            src = max(np.float32(0), (np.float32(i) + np.float32(0.5)) * s - np.float32(0.5))
            i0 = min(int(src), n_in - 1)
            taps.append((i0, min(i0 + 1, n_in - 1), ft(src - np.float32(i0))))
        return taps

    t = table.astype(ft)
    out = np.empty((gh, gw, table.shape[2]), dtype=ft)
    one = ft(1)
    for y, (a0, a1, hl) in enumerate(axis(th, gh)):
        for x, (b0, b1, wl) in enumerate(axis(tw, gw)):
            out[y, x] = (one - hl) * ((one - wl) * t[a0, b0] + wl * t[a0, b1]) + hl * ((one - wl) * t[a1, b0] + wl * t[a1, b1])
    return out.reshape(gh * gw, -1)


def rope_rotations(gh, gw, dh, swap=False):
    """2-D RoPE: complex rotations [gh*gw][dh/2]; even pair = column, odd pair = row (swap: the
    docstring's reading, even = row). Angles in float32 as the release computes them."""
    n = dh // 4
    theta = (np.float32(1) / (np.float32(10000) ** (np.arange(0, dh, 4, dtype=np.float32)[:n] / np.float32(dh))))
    ys, xs = np.mgrid[0:gh, 0:gw]
    col = xs.reshape(-1).astype(np.float32)[:, None] * theta[None, :]
    row = ys.reshape(-1).astype(np.float32)[:, None] * theta[None, :]
    first, second = (row, col) if swap else (col, row)
    ang = np.empty((gh * gw, dh // 2), dtype=np.float32)
    ang[:, 0::2] = first
    ang[:, 1::2] = second
    return np.cos(ang), np.sin(ang)


def apply_rope(v, cos, sin, ft):
    """v [L][dh]: pairs (v[2k], v[2k+1]) times (cos + i sin)."""
    a, b = v[:, 0::2], v[:, 1::2]
    c, s = cos.astype(ft), sin.astype(ft)
    out = np.empty_like(v)
    out[:, 0::2] = a * c - b * s
    out[:, 1::2] = a * s + b * c
    return out


def rmsnorm(x, g, eps, ft):
    ms = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True)
    return (x * (1.0 / np.sqrt(ms + eps)).astype(ft)) * g.astype(ft)


def gelu_tanh(u):
    return 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def gelu_erf(u):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (0.5 * u * (1 + erf(u.astype(np.float64) / math.sqrt(2)))).astype(u.dtype)


def softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


class MoonViTReference:
    """weights: {name: float32 array} of the 12 kinds of tensor; cfg: the vision_config dict."""

    def __init__(self, weights, cfg):
        self.w = weights
        self.D = cfg["vt_hidden_size"]
        self.heads = cfg["vt_num_attention_heads"]
        self.layers = cfg["vt_num_hidden_layers"]
        self.A = cfg["qkv_hidden_size"]
        self.dh = self.A // self.heads
        self.proj_eps = cfg.get("projector_ln_eps", 1e-5)

    def tower(self, pixel_values, gh, gw, eps, ft=np.float64, swap_rope=False):
        w, D, A, dh = self.w, self.D, self.A, self.dh
        L = gh * gw
        tp = "vision_tower."
        conv = w[tp + "patch_embed.proj.weight"].reshape(D, -1).astype(ft)
        x = pixel_values.reshape(L, -1).astype(ft) @ conv.T
        x = x + interpolate_table(w[tp + "patch_embed.pos_emb.weight"], gh, gw, ft)
        cos, sin = rope_rotations(gh, gw, dh, swap_rope)
        for b in range(self.layers):
            p = f"{tp}encoder.blocks.{b}."
            h = rmsnorm(x, w[p + "norm0.weight"], eps, ft)
            qkv = h @ w[p + "wqkv.weight"].astype(ft).T
            out = np.empty((L, A), dtype=ft)
            for n in range(self.heads):
                q = apply_rope(qkv[:, n * dh:(n + 1) * dh], cos, sin, ft)
                k = apply_rope(qkv[:, A + n * dh:A + (n + 1) * dh], cos, sin, ft)
                v = qkv[:, 2 * A + n * dh:2 * A + (n + 1) * dh]
                out[:, n * dh:(n + 1) * dh] = softmax((q @ k.T) / ft(math.sqrt(dh))) @ v
            x = x + out @ w[p + "wo.weight"].astype(ft).T
            h = rmsnorm(x, w[p + "norm1.weight"], eps, ft)
            x = x + gelu_tanh(h @ w[p + "mlp.fc0.weight"].astype(ft).T) @ w[p + "mlp.fc1.weight"].astype(ft).T
        return rmsnorm(x, w[tp + "encoder.final_layernorm.weight"], eps, ft)

    @staticmethod
    def merge(y, gh, gw):
        """The 2x2 merge: [gh/2 * gw/2][4D], slot k = 2*dr + dc holds patch (2R+dr, 2C+dc)."""
        D = y.shape[1]
        return y.reshape(gh // 2, 2, gw // 2, 2, D).transpose(0, 2, 1, 3, 4).reshape(-1, 4 * D)

    def project(self, u, ft=np.float64):
        w = self.w
        z = gelu_erf(u.astype(ft) @ w["mm_projector.proj.0.weight"].astype(ft).T)
        z = z @ w["mm_projector.proj.2.weight"].astype(ft).T
        return rmsnorm(z, w["mm_projector.post_norm.weight"], self.proj_eps, ft)

    def rows(self, pixel_values, gh, gw, eps, ft=np.float64, swap_rope=False):
        y = self.tower(pixel_values, gh, gw, eps, ft, swap_rope)
        return self.project(self.merge(y, gh, gw), ft)
