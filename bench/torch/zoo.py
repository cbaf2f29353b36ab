"""The zoo of dtr (include/dtr/nn/models.h) in torch.nn, with dtr's parameter names, and dtr's state-dict format
(docs/state-dict.md) read and written from Python: what the PyTorch reference test (bench/torch/reference.py) and
the PyTorch baselines (bench/torch/baseline.py) share. Debian's python3-torch 1.13, run by /usr/bin/python3.
"""
import struct
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- dtr's state-dict format, version 1 (docs/state-dict.md) -------------------------------------------------

MAGIC = b"DTRSTATE"
DTYPES = {1: (torch.float32, 4), 2: (torch.float64, 8), 3: (torch.int64, 8)}
CODES = {torch.float32: 1, torch.float64: 2, torch.int64: 3}


def read_state_dict(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24 or data[:8] != MAGIC:
        raise ValueError(f"{path}: not a dtr state dict")
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise ValueError(f"{path}: checksum mismatch")
    version, count = struct.unpack_from("<IQ", data, 8)
    if version != 1:
        raise ValueError(f"{path}: version {version}")
    at = 20
    entries = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, at)
        at += 4
        name = data[at:at + length].decode("utf-8")
        at += length
        code, rank = struct.unpack_from("<BB", data, at)
        at += 2
        dims = list(struct.unpack_from(f"<{rank}q", data, at))
        at += 8 * rank
        (nbytes,) = struct.unpack_from("<Q", data, at)
        at += 8
        dtype, _ = DTYPES[code]
        values = torch.frombuffer(bytearray(data[at:at + nbytes]), dtype=dtype) if nbytes else torch.empty(0, dtype=dtype)
        entries[name] = values.reshape(dims).clone()
        at += nbytes
    if at != len(data) - 4:
        raise ValueError(f"{path}: {len(data) - 4 - at} bytes after the last entry")
    return entries


def write_state_dict(path, entries):
    out = bytearray(MAGIC)
    out += struct.pack("<IQ", 1, len(entries))
    for name, tensor in entries.items():
        tensor = tensor.detach().contiguous()
        encoded = name.encode("utf-8")
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<BB", CODES[tensor.dtype], tensor.dim())
        out += struct.pack(f"<{tensor.dim()}q", *tensor.shape)
        raw = tensor.numpy().astype(tensor.numpy().dtype.newbyteorder("<")).tobytes()
        out += struct.pack("<Q", len(raw)) + raw
    out += struct.pack("<I", zlib.crc32(bytes(out)))
    with open(path, "wb") as f:
        f.write(out)


# ---- the zoo, as dtr builds it (include/dtr/nn/models.h), with dtr's parameter names ---------------------------

class GlobalAvgPool2d(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


class Tokens(nn.Module):
    """[N, 1, 28, 28] -> [N, tokens, values]: rows, or patch x patch squares in row-major order."""

    def __init__(self, patch):
        super().__init__()
        self.patch = patch

    def forward(self, x):
        n = x.shape[0]
        if self.patch == 0:
            return x.reshape(n, 28, 28)
        cells = 28 // self.patch
        grid = x.reshape(n, cells, self.patch, cells, self.patch).permute(0, 1, 3, 2, 4)
        return grid.reshape(n, cells * cells, self.patch * self.patch)


def conv(cin, cout, kernel, stride=1, bias=False):
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=bias)


def conv_bn_relu(cin, cout, stride=1):
    return nn.Sequential(conv(cin, cout, 3, stride), nn.BatchNorm2d(cout), nn.ReLU())


def classifier_head(channels, dropout):
    layers = [GlobalAvgPool2d()]
    if dropout > 0:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(channels, 10))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv(cin, cout, 3, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = conv(cout, cout, 3)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


def make_resnet(depth, width, dropout=0.0):
    blocks = (depth - 2) // 6
    layers = [conv_bn_relu(1, width)]
    channels = width
    for stage in range(3):
        out = width << stage
        for b in range(blocks):
            layers.append(BasicBlock(channels, out, 2 if b == 0 and stage > 0 else 1))
            channels = out
    layers.append(classifier_head(channels, dropout))
    return nn.Sequential(*layers)


def make_mlp(width, depth, dropout=0.0):
    layers = [nn.Flatten()]
    features = 28 * 28
    for _ in range(depth):
        block = [nn.Linear(features, width), nn.ReLU()]
        if dropout > 0:
            block.append(nn.Dropout(dropout))
        layers.append(nn.Sequential(*block))
        features = width
    layers.append(nn.Linear(features, 10))
    return nn.Sequential(*layers)


class TokenEmbedding(nn.Module):
    def __init__(self, tokens, values, dim):
        super().__init__()
        self.project = nn.Linear(values, dim)
        self.position = nn.Parameter(torch.zeros(tokens, dim))

    def forward(self, x):
        return self.project(x) + self.position


class TokenMean(nn.Module):
    def forward(self, x):
        return x.mean(1)


def make_transformer(depth, dim, heads, patch, dropout=0.0):
    tokens = 28 if patch == 0 else (28 // patch) ** 2
    values = 28 if patch == 0 else patch * patch
    layers = [Tokens(patch), TokenEmbedding(tokens, values, dim)]
    for _ in range(depth):
        layers.append(nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout, batch_first=True))
    layers.append(TokenMean())
    if dropout > 0:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(dim, 10))
    return nn.Sequential(*layers)


class LastStepLSTM(nn.LSTM):
    """torch.nn.LSTM giving its last layer's last hidden state, h_n[-1] (dtr's LSTM with last_step_only)."""

    def forward(self, x):
        return super().forward(x)[1][0][-1]


def make_lstm(hidden, layers, dropout=0.0):
    modules = [Tokens(0), LastStepLSTM(28, hidden, layers, batch_first=True)]
    if dropout > 0:
        modules.append(nn.Dropout(dropout))
    modules.append(nn.Linear(hidden, 10))
    return nn.Sequential(*modules)


def conv_block(cin, cout, convs):
    return nn.Sequential(*[conv_bn_relu(cin if i == 0 else cout, cout) for i in range(convs)])


class UNetLevel(nn.Module):
    def __init__(self, channels, depth_below, convs):
        super().__init__()
        if depth_below == 0:
            self.bottom = conv_block(channels, 2 * channels, convs)
        else:
            self.inner = nn.Sequential(conv_block(channels, 2 * channels, convs),
                                       UNetLevel(2 * channels, depth_below - 1, convs))
        self.reduce = conv(2 * channels, channels, 1, bias=True)
        self.merge = conv_block(2 * channels, channels, convs)

    def forward(self, x):
        inner = self.bottom if hasattr(self, "bottom") else self.inner
        below = inner(F.max_pool2d(x, 2))
        # the 1x1 convolution before the upsampling, as dtr's zoo: the same function on a quarter of the pixels
        up = F.interpolate(self.reduce(below), scale_factor=2, mode="nearest")
        return self.merge(torch.cat([x, up], 1))


def make_unet(width, levels, convs=2, dropout=0.0):
    layers = [conv_block(1, width, convs), UNetLevel(width, levels - 1, convs)]
    if dropout > 0:
        layers.append(nn.Dropout(dropout))
    layers += [conv(width, 10, 1, bias=True), GlobalAvgPool2d()]
    return nn.Sequential(*layers)


class DenseLayer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), conv(cin, 4 * growth, 1),
                                  nn.BatchNorm2d(4 * growth), nn.ReLU(), conv(4 * growth, growth, 3))

    def forward(self, x):
        return torch.cat([x, self.body(x)], 1)


def make_densenet(growth, layers, blocks, dropout=0.0):
    channels = 2 * growth
    modules = [nn.Sequential(conv(1, channels, 3))]
    for block in range(blocks):
        for _ in range(layers):
            modules.append(DenseLayer(channels, growth))
            channels += growth
        if block + 1 < blocks:
            modules.append(nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(), conv(channels, channels // 2, 1),
                                         nn.AvgPool2d(2)))
            channels //= 2
    modules.append(nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU()))
    modules.append(classifier_head(channels, dropout))
    return nn.Sequential(*modules)


BUILDERS = {
    "mlp": make_mlp,
    "resnet": make_resnet,
    "transformer": make_transformer,
    "lstm": make_lstm,
    "unet": make_unet,
    "densenet": make_densenet,
}
