"""The eight benchmark models, built locally with onnx.helper and random weights.

Every builder takes ``small`` (tiny widths and depths, for tests) and returns an
ONNX ModelProto with static shapes, batch 1, opset 17.
"""

from __future__ import annotations

import numpy as np


class Builder:
    def __init__(self, name: str, seed: int = 0):
        from onnx import helper, numpy_helper
        self.h, self.nh = helper, numpy_helper
        self.name, self.rng = name, np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.n = [], [], [], 0

    def fresh(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def weight(self, arr, base="w"):
        name = self.fresh(base)
        self.inits.append(self.nh.from_array(np.asarray(arr, dtype=arr.dtype if arr.dtype == np.int64 else np.float32),
                                             name))
        return name

    def input(self, shape, name="x"):
        from onnx import TensorProto
        self.inputs.append(self.h.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def op(self, op, ins, n_out=1, **attrs):
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op, list(ins), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, bn=True, relu=True, bias=False):
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (kh // 2, kw // 2) if pad is None else ((pad, pad) if isinstance(pad, int) else pad)
        w = self.rng.standard_normal((cout, cin // group, kh, kw)) * np.sqrt(2.0 / (cin // group * kh * kw))
        ins = [x, self.weight(w)] + ([self.weight(self.rng.standard_normal(cout) * 0.1, "b")] if bias else [])
        y = self.op("Conv", ins, kernel_shape=[kh, kw], strides=[stride, stride], pads=[ph, pw, ph, pw], group=group)
        if bn:
            r = self.rng
            y = self.op("BatchNormalization", [y, self.weight(1 + 0.1 * r.standard_normal(cout), "g"),
                                               self.weight(0.1 * r.standard_normal(cout), "be"),
                                               self.weight(0.1 * r.standard_normal(cout), "m"),
                                               self.weight(1 + 0.1 * r.random(cout), "v")], epsilon=1e-5)
        return self.op("Relu", [y]) if relu else y

    def linear(self, x, cin, cout, bias=True):
        y = self.op("MatMul", [x, self.weight(self.rng.standard_normal((cin, cout)) / np.sqrt(cin))])
        return self.op("Add", [y, self.weight(0.1 * self.rng.standard_normal(cout), "b")]) if bias else y

    def pool(self, op, x, k, s, p=0):
        return self.op(op, [x], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)

    def head(self, x, cin, classes):
        y = self.op("Flatten", [self.op("GlobalAveragePool", [x])], axis=1)
        w = self.rng.standard_normal((classes, cin)) / np.sqrt(cin)
        return self.op("Gemm", [y, self.weight(w), self.weight(np.zeros(classes), "b")], transB=1)

    def model(self, out):
        from onnx import TensorProto
        g = self.h.make_graph(self.nodes, self.name, self.inputs,
                              [self.h.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        m = self.h.make_model(g, opset_imports=[self.h.make_opsetid("", 17)], producer_name="autotune-zoo")
        m.ir_version = 8
        import onnx
        return onnx.shape_inference.infer_shapes(m)


def resnet(small=False, groups=1, width_per_group=64, name="resnet50"):
    b, res = Builder(name), 32 if small else 112
    blocks = [1, 1] if small else [3, 4, 6, 3]
    base = 8 if small else 64
    x = b.input((1, 3, res, res))
    y = b.pool("MaxPool", b.conv(x, 3, base, 7, 2), 3, 2, 1)
    cin = base
    for stage, n in enumerate(blocks):
        planes = base * 2 ** stage
        mid = planes if groups == 1 else (width_per_group * groups * 2 ** stage * base) // 64 // 1
        mid = max(mid, groups)
        for i in range(n):
            stride = 2 if i == 0 and stage > 0 else 1
            t = b.conv(y, cin, mid, 1)
            t = b.conv(t, mid, mid, 3, stride, group=groups)
            t = b.conv(t, mid, planes * 4, 1, relu=False)
            sc = b.conv(y, cin, planes * 4, 1, stride, relu=False) if i == 0 else y
            y = b.op("Relu", [b.op("Add", [t, sc])])
            cin = planes * 4
    return b.model(b.head(y, cin, 10 if small else 1000))


def resnext(small=False):
    return resnet(small, groups=4 if small else 32, width_per_group=4, name="resnext50")


def vgg19(small=False):
    b, res = Builder("vgg19"), 16 if small else 64
    cfg = [[8], [8]] if small else [[64] * 2, [128] * 2, [256] * 4, [512] * 4, [512] * 4]
    y = b.input((1, 3, res, res))
    cin = 3
    for stage in cfg:
        for c in stage:
            y, cin = b.conv(y, cin, c, 3, bn=False, bias=True), c
        y = b.pool("MaxPool", y, 2, 2)
    sp = res // 2 ** len(cfg)
    y = b.op("Flatten", [y], axis=1)
    hidden = 32 if small else 1024
    y = b.op("Relu", [b.linear(y, cin * sp * sp, hidden)])
    y = b.op("Relu", [b.linear(y, hidden, hidden)])
    return b.model(b.linear(y, hidden, 10 if small else 1000))


def squeezenet(small=False):
    b, res = Builder("squeezenet11"), 32 if small else 112
    x = b.input((1, 3, res, res))
    y = b.pool("MaxPool", b.conv(x, 3, 64, 3, 2, pad=0, bn=False, bias=True), 3, 2)
    fires = [(16, 64), (16, 64)] if small else [(16, 64), (16, 64), "pool", (32, 128), (32, 128), "pool",
                                                  (48, 192), (48, 192), (64, 256), (64, 256)]
    cin = 64
    for f in fires:
        if f == "pool":
            y = b.pool("MaxPool", y, 3, 2)
            continue
        s = b.conv(y, cin, f[0], 1, bn=False, bias=True)
        e1 = b.conv(s, f[0], f[1], 1, bn=False, bias=True)
        e3 = b.conv(s, f[0], f[1], 3, bn=False, bias=True)
        y, cin = b.op("Concat", [e1, e3], axis=1), 2 * f[1]
    y = b.conv(y, cin, 10 if small else 1000, 1, bn=False, bias=True)
    return b.model(b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1))


def inception_v3(small=False):
    b, res = Builder("inception_v3"), 75 if small else 139
    d = 4 if small else 1  # width divisor
    c = lambda n: max(n // d, 4)
    x = b.input((1, 3, res, res))
    y = b.conv(x, 3, c(32), 3, 2, pad=0)
    y = b.conv(y, c(32), c(64), 3)
    y = b.pool("MaxPool", y, 3, 2)
    y = b.conv(y, c(64), c(192), 3, pad=0)
    y, cin = b.pool("MaxPool", y, 3, 2), c(192)

    def block_a(y, cin, pool_ch):
        b1 = b.conv(y, cin, c(64), 1)
        b2 = b.conv(b.conv(y, cin, c(48), 1), c(48), c(64), 5)
        b3 = b.conv(b.conv(b.conv(y, cin, c(64), 1), c(64), c(96), 3), c(96), c(96), 3)
        b4 = b.conv(b.pool("AveragePool", y, 3, 1, 1), cin, c(pool_ch), 1)
        return b.op("Concat", [b1, b2, b3, b4], axis=1), c(64) + c(64) + c(96) + c(pool_ch)

    def block_c(y, cin, mid):
        b1 = b.conv(y, cin, c(192), 1)
        b2 = b.conv(b.conv(b.conv(y, cin, c(mid), 1), c(mid), c(mid), (1, 7)), c(mid), c(192), (7, 1))
        b3 = b.conv(y, cin, c(mid), 1)
        for k in [(7, 1), (1, 7), (7, 1)]:
            b3 = b.conv(b3, c(mid), c(mid), k)
        b3 = b.conv(b3, c(mid), c(192), (1, 7))
        b4 = b.conv(b.pool("AveragePool", y, 3, 1, 1), cin, c(192), 1)
        return b.op("Concat", [b1, b2, b3, b4], axis=1), 4 * c(192)

    for pool_ch in ([32] if small else [32, 64, 64]):
        y, cin = block_a(y, cin, pool_ch)
    r1 = b.conv(y, cin, c(384), 3, 2, pad=0)
    r2 = b.conv(b.conv(b.conv(y, cin, c(64), 1), c(64), c(96), 3), c(96), c(96), 3, 2, pad=0)
    y = b.op("Concat", [r1, r2, b.pool("MaxPool", y, 3, 2)], axis=1)
    cin = c(384) + c(96) + cin
    for mid in ([128] if small else [128, 160, 160, 192]):
        y, cin = block_c(y, cin, mid)
    return b.model(b.head(y, cin, 10 if small else 1000))


def bert(small=False, layers=None):
    b = Builder("bert_base")
    seq, hid, heads = (8, 32, 2) if small else (128, 768, 12)
    layers = layers or (1 if small else 2)
    x = b.input((1, seq, hid))
    shape = lambda s: b.weight(np.array(s, dtype=np.int64), "shape")
    for _ in range(layers):
        q, k, v = (b.linear(x, hid, hid) for _ in range(3))
        split = lambda t: b.op("Reshape", [t, shape([1, seq, heads, hid // heads])])
        q = b.op("Transpose", [split(q)], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [split(k)], perm=[0, 2, 3, 1])
        v = b.op("Transpose", [split(v)], perm=[0, 2, 1, 3])
        s = b.op("Mul", [b.op("MatMul", [q, k]), b.weight(np.array(1 / np.sqrt(hid // heads)), "scale")])
        a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), shape([1, seq, hid])])
        x = b.op("LayerNormalization", [b.op("Add", [b.linear(a, hid, hid), x]), b.weight(np.ones(hid), "ln"),
                                        b.weight(np.zeros(hid), "lb")], axis=-1, epsilon=1e-5)
        h = b.linear(x, hid, 4 * hid)
        h = b.op("Mul", [b.op("Mul", [h, b.op("Add", [b.op("Erf", [b.op("Div", [h, b.weight(np.array(1.4142135))])]),
                                                       b.weight(np.array(1.0))])]), b.weight(np.array(0.5))])
        x = b.op("LayerNormalization", [b.op("Add", [b.linear(h, 4 * hid, hid), x]), b.weight(np.ones(hid), "ln"),
                                        b.weight(np.zeros(hid), "lb")], axis=-1, epsilon=1e-5)
    return b.model(x)


def nasrnn(small=False, steps=None):
    """The NAS recurrent cell (Zoph & Le), unrolled: eight x-projections and eight h-projections per step."""
    b = Builder("nasrnn")
    hid = 16 if small else 512
    steps = steps or (2 if small else 5)
    xs = [b.input((1, hid), f"x{t}") for t in range(steps)]
    h = b.weight(np.zeros((1, hid)), "h0")
    for t in range(steps):
        gates = [b.op("Add", [b.linear(xs[t], hid, hid, bias=False), b.linear(h, hid, hid, bias=False)])
                 for _ in range(8)]
        acts = ["Sigmoid", "Relu", "Sigmoid", "Relu", "Tanh", "Sigmoid", "Tanh", "Sigmoid"]
        g = [b.op(a, [v]) for a, v in zip(acts, gates)]
        l1 = [b.op("Add", [g[0], g[1]]), b.op("Mul", [g[2], g[3]]), b.op("Add", [g[4], g[5]]), b.op("Mul", [g[6], g[7]])]
        l2 = [b.op("Tanh", [b.op("Mul", [l1[0], l1[1]])]), b.op("Tanh", [b.op("Add", [l1[2], l1[3]])])]
        h = b.op("Tanh", [b.op("Mul", [l2[0], l2[1]])])
    return b.model(h)


def nasnet_a(small=False, cells=None):
    """NASNet-A normal cells: separable convolutions, pooling and additions over two inputs."""
    b, res = Builder("nasnet_a"), 16 if small else 28
    ch = 8 if small else 128
    cells = cells or (1 if small else 4)
    x = b.input((1, ch, res, res))

    def sep(y, k):
        for _ in range(2):
            y = b.op("Relu", [y])
            y = b.conv(y, ch, ch, k, group=ch, bn=False, relu=False)
            y = b.conv(y, ch, ch, 1, relu=False)
        return y

    prev, cur = x, b.conv(x, ch, ch, 1, relu=False)
    for _ in range(cells):
        h0 = b.conv(b.op("Relu", [prev]), ch, ch, 1, relu=False)
        h1 = b.conv(b.op("Relu", [cur]), ch, ch, 1, relu=False)
        s = [b.op("Add", [sep(h1, 5), sep(h0, 3)]), b.op("Add", [sep(h0, 5), sep(h0, 3)]),
             b.op("Add", [b.pool("AveragePool", h1, 3, 1, 1), h0]),
             b.op("Add", [b.pool("AveragePool", h0, 3, 1, 1), b.pool("AveragePool", h0, 3, 1, 1)]),
             b.op("Add", [sep(h1, 3), h1])]
        prev, cur = cur, b.op("Concat", [h0] + s, axis=1)
        cur = b.conv(cur, 6 * ch, ch, 1, relu=False)
    return b.model(cur)


MODELS = {"resnet50": resnet, "resnext50": resnext, "inception_v3": inception_v3, "squeezenet11": squeezenet,
          "bert_base": bert, "nasnet_a": nasnet_a, "nasrnn": nasrnn, "vgg19": vgg19}


def build(name: str, small: bool = False):
    return MODELS[name](small=small)
