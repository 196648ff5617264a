"""FlexFlow's and Unity's benchmark models as training graphs: Unity's MLP, ResNet-101, Inception-v3, DLRM, and
FlexFlow's RNNLM and NMT, in fp32 with SGD and momentum."""

from __future__ import annotations

from autotune.search_spaces.parallel.graph import Builder, Graph, Op

SGD_STATE = 12  # FlexFlow-era fp32 models: weight, gradient and momentum per parameter


def mlp(batch: int, layers: int = 16, width: int = 8192, name: str = "mlp-unity") -> Graph:
    """Unity's MLP benchmark: 16 dense layers of 8192 units (fp32)."""
    g = Builder(name, batch)
    x = g.input("x", {"b": batch, "f": width}, {"b": "sample", "f": "parameter"})
    for i in range(layers):
        x = g.linear(x, width, f"fc{i}", tp="o" if i % 2 == 0 else "i", extra_flops=batch * width)
    g.loss(x)
    return g.build(state_bytes_per_param=SGD_STATE)


def resnet101(batch: int) -> Graph:
    g = Builder("resnet101", batch)
    x = g.input("image", {"b": batch, "c": 3, "h": 224, "w": 224},
                {"b": "sample", "c": None, "h": "attribute", "w": "attribute"})
    x = g.conv(x, 64, 7, "conv1", stride=2)
    x = g.pool(x, "pool1")
    for stage, (blocks, width) in enumerate(zip((3, 4, 23, 3), (64, 128, 256, 512))):
        for blk in range(blocks):
            stride = 2 if blk == 0 and stage > 0 else 1
            p = f"s{stage}b{blk}"
            y = g.conv(x, width, 1, f"{p}.c1")
            y = g.conv(y, width, 3, f"{p}.c2", stride=stride)
            y = g.conv(y, 4 * width, 1, f"{p}.c3")
            sc = g.conv(x, 4 * width, 1, f"{p}.down", stride=stride) if blk == 0 else x
            x = g.elementwise([y, sc], f"{p}.add", "add")
    x = g.pool(x, "avgpool", global_=True)
    x = _fc_from_map(g, x, 1000, "fc")
    g.loss(x)
    return g.build(state_bytes_per_param=SGD_STATE)


def _fc_from_map(g: Builder, x: str, n_out: int, name: str) -> str:
    """A classifier on a [b, c, 1, 1] map: the spatial axes are dropped."""
    (_, b, _), (_, c, _), _, _ = g.shape(x)
    f = 2.0 * b * c * n_out
    return g.add(Op(g._uniq(name), "linear", {"b": b, "o": n_out, "i": c},
                    {"b": "sample", "o": "parameter", "i": "reduction"}, ("b", "o"),
                    [(x, ("b", "i", None, None))], ("i", "o"), c * n_out, f, 2 * f, b * (c + n_out) + c * n_out, "o"))


def inception_v3(batch: int) -> Graph:
    """Inception-v3 (299x299): stem, 3 x A, B, 4 x C, D, 2 x E, as in torchvision."""
    g = Builder("inception-v3", batch)
    x = g.input("image", {"b": batch, "c": 3, "h": 299, "w": 299},
                {"b": "sample", "c": None, "h": "attribute", "w": "attribute"})
    for i, (c, k, s) in enumerate([(32, 3, 2), (32, 3, 1), (64, 3, 1)]):
        x = g.conv(x, c, k, f"stem{i}", stride=s)
    x = g.pool(x, "stem_pool1")
    x = g.conv(x, 80, 1, "stem3")
    x = g.conv(x, 192, 3, "stem4")
    x = g.pool(x, "stem_pool2")

    def chain(x, p, specs):
        for j, (c, k, s) in enumerate(specs):
            x = g.conv(x, c, k, f"{p}{j}", stride=s)
        return x

    for m, pf in enumerate((32, 64, 64)):  # InceptionA
        p = f"A{m}."
        x = g.concat([chain(x, p + "b1_", [(64, 1, 1)]), chain(x, p + "b5_", [(48, 1, 1), (64, 5, 1)]),
                      chain(x, p + "b3_", [(64, 1, 1), (96, 3, 1), (96, 3, 1)]),
                      chain(g.pool(x, p + "pool", stride=1), p + "bp_", [(pf, 1, 1)])], p + "cat")
    x = g.concat([chain(x, "B.b3_", [(384, 3, 2)]), chain(x, "B.bd_", [(64, 1, 1), (96, 3, 1), (96, 3, 2)]),
                  g.pool(x, "B.pool")], "B.cat")
    for m, c7 in enumerate((128, 160, 160, 192)):  # InceptionC
        p = f"C{m}."
        x = g.concat([chain(x, p + "b1_", [(192, 1, 1)]),
                      chain(x, p + "b7_", [(c7, 1, 1), (c7, (1, 7), 1), (192, (7, 1), 1)]),
                      chain(x, p + "bd_", [(c7, 1, 1), (c7, (7, 1), 1), (c7, (1, 7), 1), (c7, (7, 1), 1),
                                           (192, (1, 7), 1)]),
                      chain(g.pool(x, p + "pool", stride=1), p + "bp_", [(192, 1, 1)])], p + "cat")
    x = g.concat([chain(x, "D.b3_", [(192, 1, 1), (320, 3, 2)]),
                  chain(x, "D.b7_", [(192, 1, 1), (192, (1, 7), 1), (192, (7, 1), 1), (192, 3, 2)]),
                  g.pool(x, "D.pool")], "D.cat")
    for m in range(2):  # InceptionE
        p = f"E{m}."
        b3 = chain(x, p + "b3_", [(384, 1, 1)])
        bd = chain(x, p + "bd_", [(448, 1, 1), (384, 3, 1)])
        x = g.concat([chain(x, p + "b1_", [(320, 1, 1)]),
                      g.conv(b3, 384, (1, 3), p + "b3a"), g.conv(b3, 384, (3, 1), p + "b3b"),
                      g.conv(bd, 384, (1, 3), p + "bda"), g.conv(bd, 384, (3, 1), p + "bdb"),
                      chain(g.pool(x, p + "pool", stride=1), p + "bp_", [(192, 1, 1)])], p + "cat")
    x = g.pool(x, "avgpool", global_=True)
    g.loss(_fc_from_map(g, x, 1000, "fc"))
    return g.build(state_bytes_per_param=SGD_STATE)


def dlrm(batch: int, tables: int = 16, rows: int = 1_000_000, dim: int = 64) -> Graph:
    """DLRM as in Unity's evaluation: dense MLP, 16 large embedding tables, interaction, top MLP."""
    g = Builder("dlrm", batch)
    x = g.input("dense", {"b": batch, "f": 13}, {"b": "sample", "f": None})
    for i, n in enumerate((512, 256, dim)):
        x = g.linear(x, n, f"bot{i}")
    embs = [x]
    for t in range(tables):
        ids = g.input(f"ids{t}", {"b": batch}, {"b": "sample"})
        embs.append(g.embedding(ids, rows, dim, f"emb{t}"))
    x = g.concat(embs, "interact")
    for i, n in enumerate((1024, 1024, 1024, 1)):
        x = g.linear(x, n, f"top{i}")
    g.loss(x)
    return g.build(state_bytes_per_param=SGD_STATE)


def rnnlm(batch: int, seq: int = 40, hidden: int = 2048, vocab: int = 10000) -> Graph:
    """FlexFlow's RNNLM: embedding, 2 LSTM layers of 2048 units, softmax over the vocabulary."""
    g = Builder("rnnlm", batch)
    x = g.embedding(g.input("tokens", {"b": batch, "t": seq}, {"b": "sample", "t": None}), vocab, hidden, "embed")
    for i in range(2):
        x = g.lstm(x, hidden, f"lstm{i}")
    g.loss(g.linear(x, vocab, "proj"))
    return g.build(state_bytes_per_param=SGD_STATE)


def nmt(batch: int, seq: int = 40, hidden: int = 1024, vocab: int = 32000) -> Graph:
    """FlexFlow's NMT: 2-layer LSTM encoder and decoder, attention over the encoder, softmax."""
    g = Builder("nmt", batch)
    src = g.embedding(g.input("src", {"b": batch, "t": seq}, {"b": "sample", "t": None}), vocab, hidden, "src_embed")
    tgt = g.embedding(g.input("tgt", {"b": batch, "t": seq}, {"b": "sample", "t": None}), vocab, hidden, "tgt_embed")
    for i in range(2):
        src = g.lstm(src, hidden, f"enc{i}")
        tgt = g.lstm(tgt, hidden, f"dec{i}")
    ctx = g.linear(src, hidden, "attn_keys")
    x = g.elementwise([tgt, ctx], "attention", "attention_mix", 2.0 * seq)
    x = g.linear(x, hidden, "attn_out")
    g.loss(g.linear(x, vocab, "proj"))
    return g.build(state_bytes_per_param=SGD_STATE)
