#!/usr/bin/env python3
"""Writes shape-true models with random weights, for timing only (issue 11).

Run it through scripts/shape-models, which finds the cache directory and the shared assets and
runs this file where python3-gguf, numpy and llama-quantize exist (the Debian sid root).

An LLM shape is a llama-architecture GGUF with a real model's dimensions, the 32k Llama-2
tokenizer of ../shared/models/llama-2-tiny-random.gguf (padded with made-up tokens up to the
real model's vocabulary size, so the output layer costs what the real one does), F16 weights
drawn from N(0, 0.02) and quantized by llama-quantize. A whisper shape is whisper.cpp's
tiny.en test model (real header, mel filters and vocabulary, no weights) with its header's
dimensions patched and every tensor the loader expects appended as random F16 data: the same
bytes, tensor for tensor, as the real ggml-*.en.bin files. Without the tensors (--whisper-weights
none) whisper.cpp still loads the file and encodes at full cost, but its weights are pages
nobody wrote, which the kernel maps to one shared zero page, so the decoder, which streams its
weights once per token, runs 10-25 % faster than it does with weights in memory.

Every output is a pure function of its parameters, the source files and the tools' versions:
the weights come from a per-tensor PCG64 stream (whose raw output numpy keeps stable across
versions) through a fixed 65,536-entry inverse-normal table, so no floating-point maths of
numpy's or the CPU's choosing is involved. A stamp beside each file records those inputs and
the file's sha256; a later run reuses the file when both still match.
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

# Bump when the bytes this script writes for the same parameters change.
GENERATOR_VERSION = 1
SEED = 20240611

LLM_DEFAULTS = dict(vocab=32000, ctx=2048, rope_theta=10000.0, rms_eps=1e-5, tied=False, quant="Q4_K_M")

# Dimensions from the models' config.json on their hosts.
LLM_SHAPES = {
    # Qwen/Qwen2.5-0.5B-Instruct: tie_word_embeddings, vocab_size 151936. Its q/k/v biases
    # have no place in the llama architecture; they add 1,152 values per layer (negligible).
    "qwen2.5-0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, ffn=4864, vocab=151936,
                         ctx=32768, rope_theta=1000000.0, rms_eps=1e-6, tied=True),
    # The same dimensions with only the Llama-2 vocabulary: a cheaper output layer.
    "qwen2.5-0.5b-v32k": dict(hidden=896, layers=24, heads=14, kv_heads=2, ffn=4864, vocab=32000,
                              ctx=32768, rope_theta=1000000.0, rms_eps=1e-6, tied=True),
    # TinyLlama/TinyLlama-1.1B-Chat-v1.0: the Llama-2 tokenizer itself, untied output.
    "tinyllama-1.1b": dict(hidden=2048, layers=22, heads=32, kv_heads=4, ffn=5632, vocab=32000,
                           ctx=2048, rope_theta=10000.0, rms_eps=1e-5, tied=False),
}

# The eleven int32 after the magic of whisper.cpp's ggml model files.
WHISPER_FIELDS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                  "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype")
WHISPER_MAGIC = 0x67676D6C
# Dimensions of openai/whisper's English-only checkpoints (the .en models share the vocabulary,
# contexts and mel count of the tiny.en test file).
WHISPER_SHAPES = {
    "whisper-tiny.en": dict(state=384, heads=6, layers=4),
    "whisper-base.en": dict(state=512, heads=8, layers=6),
    "whisper-small.en": dict(state=768, heads=12, layers=12),
}

TOKENIZER_SOURCE = "models/llama-2-tiny-random.gguf"
WHISPER_SOURCE = "models/ggml-tiny.en-for-tests.bin"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
LLM_INT_KEYS = ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab", "ctx")


def log(msg):
    print(f"shape-models: {msg}", file=sys.stderr, flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def package_version(name):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_custom(spec):
    """NAME:key=value,... → (name, params) for an LLM shape of custom dimensions."""
    name, sep, rest = spec.partition(":")
    if not sep or not NAME_RE.match(name):
        raise ValueError(f"--llm {spec!r}: want NAME:hidden=64,layers=2,heads=4,kv_heads=2,ffn=128[,vocab=,ctx=,rope_theta=,rms_eps=,tied=,quant=]")
    params = dict(LLM_DEFAULTS)
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--llm {spec!r}: {item!r} is not key=value")
        if key in LLM_INT_KEYS:
            params[key] = int(value)
        elif key in ("rope_theta", "rms_eps"):
            params[key] = float(value)
        elif key == "tied":
            params[key] = value in ("1", "true", "yes")
        elif key == "quant":
            params[key] = value
        else:
            raise ValueError(f"--llm {spec!r}: unknown key {key!r}")
    return name, params


def check_llm(name, p):
    for key in ("hidden", "layers", "heads", "kv_heads", "ffn"):
        if key not in p or p[key] <= 0:
            raise ValueError(f"{name}: {key} must be a positive integer")
    if p["hidden"] % p["heads"] or p["heads"] % p["kv_heads"]:
        raise ValueError(f"{name}: hidden must divide by heads and heads by kv_heads")
    if (p["hidden"] // p["heads"]) % 2:
        raise ValueError(f"{name}: the head size must be even (rope)")


class Cache:
    """One directory of generated files, each with a stamp NAME.FILE.stamp.json."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)

    def remove_leftovers(self):
        """Removes what a killed run left (temporary names start with a dot); call under the lock."""
        for entry in os.listdir(self.root):
            path = os.path.join(self.root, entry)
            if entry.startswith(".") and entry != ".lock":
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            elif entry.endswith(".stamp.json.tmp"):
                os.remove(path)

    def stamp_path(self, path):
        return path + ".stamp.json"

    def lookup(self, path, inputs):
        """The file's sha256 when it exists, its stamp names these inputs and its bytes match."""
        try:
            with open(self.stamp_path(path)) as f:
                stamp = json.load(f)
        except (OSError, ValueError):
            return None
        if stamp.get("inputs") != inputs or not os.path.isfile(path):
            return None
        if os.path.getsize(path) != stamp.get("size") or sha256_file(path) != stamp.get("sha256"):
            log(f"{os.path.basename(path)} differs from its stamp; rebuilding")
            return None
        return stamp["sha256"]

    def commit(self, tmp, path, inputs):
        digest = sha256_file(tmp)
        stamp = dict(inputs=inputs, sha256=digest, size=os.path.getsize(tmp))
        stamp_tmp = self.stamp_path(path) + ".tmp"
        with open(stamp_tmp, "w") as f:
            json.dump(stamp, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
        os.replace(stamp_tmp, self.stamp_path(path))
        return digest


def normal_table(std):
    """float16 quantiles of N(0, std) at (i+0.5)/65536: random 16-bit words index it."""
    import numpy as np

    dist = statistics.NormalDist(0.0, std)
    return np.array([dist.inv_cdf((i + 0.5) / 65536) for i in range(65536)], dtype=np.float64).astype(np.float16)


def random_f16(table, name, shape):
    """The tensor called name: a PCG64 stream seeded by (SEED, name) through the table."""
    import numpy as np

    n = 1
    for d in shape:
        n *= d
    entropy = int.from_bytes(hashlib.sha256(f"{SEED}:{name}".encode()).digest()[:16], "little")
    words = np.random.PCG64(np.random.SeedSequence(entropy)).random_raw((n + 3) // 4)
    return table[words.view("<u2")[:n]].reshape(shape)


def read_tokenizer(path):
    """The tokenizer.ggml.* fields of a GGUF file: (tokens, scores, types, scalar fields)."""
    import gguf

    reader = gguf.GGUFReader(path)

    def value(key):
        field = reader.fields.get(key)
        return None if field is None else field.contents()

    tokens, scores, types = value("tokenizer.ggml.tokens"), value("tokenizer.ggml.scores"), value("tokenizer.ggml.token_type")
    if not tokens or len(tokens) != len(scores) or len(tokens) != len(types):
        raise ValueError(f"{path}: no usable tokenizer.ggml.tokens/scores/token_type")
    scalars = {}
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
                "tokenizer.ggml.add_eos_token", "tokenizer.chat_template"):
        v = value(key)
        if v is not None:
            scalars[key] = v
    return list(tokens), [float(s) for s in scores], [int(t) for t in types], scalars


def pad_vocab(tokens, scores, types, size):
    """Extends the vocabulary to size with made-up normal tokens (pairs of real pieces), so
    sampling over the full vocabulary still detokenizes to word-like text. Their scores sit
    below every real token's, so SentencePiece prefers the real pieces when tokenizing."""
    import numpy as np

    if size <= len(tokens):
        return tokens[:size], scores[:size], types[:size]
    normal = [t for t, kind in zip(tokens, types) if kind == 1]
    seen = set(tokens)
    floor = min(scores) - 1.0
    words = np.random.PCG64(np.random.SeedSequence(SEED)).random_raw(4 * (size - len(tokens)) + 1024)
    picks = (words % len(normal)).tolist()
    tokens, scores, types = list(tokens), list(scores), list(types)
    i = 0
    while len(tokens) < size:
        if i + 1 >= len(picks):
            raise ValueError("could not make enough distinct padding tokens")
        text = normal[picks[i]] + normal[picks[i + 1]]
        i += 2
        if text in seen:
            continue
        seen.add(text)
        tokens.append(text)
        scores.append(floor)
        types.append(1)
    return tokens, scores, types


def llm_tensors(p):
    """(name, numpy shape, kind) in file order; a matmul weight is (n_out, n_in)."""
    hd = p["hidden"] // p["heads"]
    q, kv, h, f = p["heads"] * hd, p["kv_heads"] * hd, p["hidden"], p["ffn"]
    out = [("token_embd.weight", (p["vocab"], h), "w")]
    for i in range(p["layers"]):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (h,), "norm"),
            (b + "attn_q.weight", (q, h), "w"),
            (b + "attn_k.weight", (kv, h), "w"),
            (b + "attn_v.weight", (kv, h), "w"),
            (b + "attn_output.weight", (h, q), "w"),
            (b + "ffn_norm.weight", (h,), "norm"),
            (b + "ffn_gate.weight", (f, h), "w"),
            (b + "ffn_up.weight", (f, h), "w"),
            (b + "ffn_down.weight", (h, f), "w"),
        ]
    out.append(("output_norm.weight", (h,), "norm"))
    if not p["tied"]:
        out.append(("output.weight", (p["vocab"], h), "w"))
    return out


def n_params(p):
    total = 0
    for _, shape, _ in llm_tensors(p):
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def write_f16_gguf(path, name, p, tokenizer):
    import gguf
    import numpy as np

    tokens, scores, types, scalars = tokenizer
    tokens, scores, types = pad_vocab(tokens, scores, types, p["vocab"])
    hd = p["hidden"] // p["heads"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(f"Parley shape model {name} (random weights, timing only)")
    w.add_context_length(p["ctx"])
    w.add_embedding_length(p["hidden"])
    w.add_block_count(p["layers"])
    w.add_feed_forward_length(p["ffn"])
    w.add_head_count(p["heads"])
    w.add_head_count_kv(p["kv_heads"])
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(p["rope_theta"])
    w.add_layer_norm_rms_eps(p["rms_eps"])
    w.add_vocab_size(p["vocab"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model(scalars.get("tokenizer.ggml.model", "llama"))
    if "tokenizer.ggml.pre" in scalars:
        w.add_tokenizer_pre(scalars["tokenizer.ggml.pre"])
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    for key, add in (("tokenizer.ggml.bos_token_id", w.add_bos_token_id), ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
                     ("tokenizer.ggml.unknown_token_id", w.add_unk_token_id), ("tokenizer.ggml.padding_token_id", w.add_pad_token_id)):
        if key in scalars:
            add(int(scalars[key]))
    for key, add in (("tokenizer.ggml.add_bos_token", w.add_add_bos_token), ("tokenizer.ggml.add_eos_token", w.add_add_eos_token)):
        if key in scalars:
            add(bool(scalars[key]))
    if "tokenizer.chat_template" in scalars:
        w.add_chat_template(scalars["tokenizer.chat_template"])

    plan = llm_tensors(p)
    for tname, shape, kind in plan:
        dtype = np.float32 if kind == "norm" else np.float16
        n = 1
        for d in shape:
            n *= d
        w.add_tensor_info(tname, shape, np.dtype(dtype), n * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    table = normal_table(0.02)
    for tname, shape, kind in plan:
        if kind == "norm":
            w.write_tensor_data(np.ones(shape, dtype=np.float32))
        else:
            w.write_tensor_data(random_f16(table, tname, shape))
    w.close()


def build_llm(cache, name, p, shared, threads, tools):
    check_llm(name, p)
    source = os.path.join(shared, TOKENIZER_SOURCE)
    inputs = dict(generator=GENERATOR_VERSION, kind="llm", name=name, params=p, seed=SEED,
                  source=os.path.basename(source), source_sha256=sha256_file(source), tools=tools)
    path = os.path.join(cache.root, f"{name}-{p['quant']}.gguf")
    digest = cache.lookup(path, inputs)
    if digest:
        return path, digest, "cached"
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=cache.root) as work:
        f16 = os.path.join(work, "f16.gguf")
        log(f"{name}: writing random F16 weights ({n_params(p) / 1e6:.1f} M parameters)")
        write_f16_gguf(f16, name, p, read_tokenizer(source))
        written = time.monotonic()
        out = os.path.join(work, "out.gguf")
        log(f"{name}: llama-quantize {p['quant']} ({threads} threads)")
        res = subprocess.run(["llama-quantize", f16, out, p["quant"], str(threads)], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"llama-quantize failed ({res.returncode}):\n{res.stderr[-4000:]}")
        os.remove(f16)
        digest = cache.commit(out, path, inputs)
    took = time.monotonic() - start
    return path, digest, f"built in {took:.1f} s (F16 {written - start:.1f} s, quantize {took - (written - start):.1f} s)"


def whisper_tensors(h):
    """(name, ggml dims ne0.., type) of every tensor whisper.cpp's loader expects, F16 model."""
    a, t, f16, f32 = h["n_audio_state"], h["n_text_state"], 1, 0
    out = [("encoder.positional_embedding", (a, h["n_audio_ctx"]), f32),
           ("encoder.conv1.weight", (3, h["n_mels"], a), f16), ("encoder.conv1.bias", (1, a), f32),
           ("encoder.conv2.weight", (3, a, a), f16), ("encoder.conv2.bias", (1, a), f32),
           ("encoder.ln_post.weight", (a,), f32), ("encoder.ln_post.bias", (a,), f32)]

    def block(prefix, n, attns):
        out.extend([(prefix + "mlp_ln.weight", (n,), f32), (prefix + "mlp_ln.bias", (n,), f32),
                    (prefix + "mlp.0.weight", (n, 4 * n), f16), (prefix + "mlp.0.bias", (4 * n,), f32),
                    (prefix + "mlp.2.weight", (4 * n, n), f16), (prefix + "mlp.2.bias", (n,), f32)])
        for attn in attns:
            out.extend([(f"{prefix}{attn}_ln.weight", (n,), f32), (f"{prefix}{attn}_ln.bias", (n,), f32),
                        (f"{prefix}{attn}.query.weight", (n, n), f16), (f"{prefix}{attn}.query.bias", (n,), f32),
                        (f"{prefix}{attn}.key.weight", (n, n), f16),
                        (f"{prefix}{attn}.value.weight", (n, n), f16), (f"{prefix}{attn}.value.bias", (n,), f32),
                        (f"{prefix}{attn}.out.weight", (n, n), f16), (f"{prefix}{attn}.out.bias", (n,), f32)])

    for i in range(h["n_audio_layer"]):
        block(f"encoder.blocks.{i}.", a, ["attn"])
    out.extend([("decoder.positional_embedding", (t, h["n_text_ctx"]), f32),
                ("decoder.token_embedding.weight", (t, h["n_vocab"]), f16),
                ("decoder.ln.weight", (t,), f32), ("decoder.ln.bias", (t,), f32)])
    for i in range(h["n_text_layer"]):
        block(f"decoder.blocks.{i}.", t, ["attn", "cross_attn"])
    return out


def write_whisper_weights(f, hparams):
    """Appends random weights in whisper.cpp's ggml layout: per tensor n_dims, name length,
    type, dims, name, data. Norm weights are ones, other vectors zero."""
    import numpy as np

    table = normal_table(0.02)
    for tname, dims, ttype in whisper_tensors(hparams):
        n = 1
        for d in dims:
            n *= d
        f.write(struct.pack(f"<3i{len(dims)}i", len(dims), len(tname.encode()), ttype, *dims))
        f.write(tname.encode())
        if ttype == 1:
            f.write(random_f16(table, tname, (n,)).tobytes())
        elif tname.endswith("ln.weight") or tname.endswith("ln_post.weight"):
            f.write(np.ones(n, dtype="<f4").tobytes())
        else:
            f.write(np.zeros(n, dtype="<f4").tobytes())


def build_whisper(cache, name, shape, shared, weights):
    source = os.path.join(shared, WHISPER_SOURCE)
    with open(source, "rb") as f:
        data = bytearray(f.read())
    if len(data) < 48 or struct.unpack_from("<I", data, 0)[0] != WHISPER_MAGIC:
        raise ValueError(f"{source}: not a whisper.cpp ggml model")
    hparams = dict(zip(WHISPER_FIELDS, struct.unpack_from("<11i", data, 4)))
    if hparams["ftype"] != 1:
        raise ValueError(f"{source}: ftype {hparams['ftype']}, want 1 (F16)")
    hparams.update(n_audio_state=shape["state"], n_audio_head=shape["heads"], n_audio_layer=shape["layers"],
                   n_text_state=shape["state"], n_text_head=shape["heads"], n_text_layer=shape["layers"])
    inputs = dict(generator=GENERATOR_VERSION, kind="whisper", name=name, hparams=hparams, weights=weights, seed=SEED,
                  source=os.path.basename(source), source_sha256=hashlib.sha256(data).hexdigest())
    suffix = "-weightless" if weights == "none" else ""
    path = os.path.join(cache.root, f"{name}{suffix}.bin")
    digest = cache.lookup(path, inputs)
    if digest:
        return path, digest, "cached"
    start = time.monotonic()
    struct.pack_into("<11i", data, 4, *(hparams[k] for k in WHISPER_FIELDS))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=cache.root)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        if weights == "random":
            write_whisper_weights(f, hparams)
    os.chmod(tmp, 0o644)
    return path, cache.commit(tmp, path, inputs), f"built in {time.monotonic() - start:.1f} s"


def stop(signum, frame):
    # An exception unwinds through the temporary directories (removing them) and through
    # subprocess.run (killing llama-quantize).
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    signal.signal(signal.SIGTERM, stop)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="cache directory to write into")
    ap.add_argument("--shared", required=True, help="the shared test-asset folder")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama-quantize threads")
    ap.add_argument("--llm", action="append", default=[], metavar="NAME:key=value,...",
                    help="an extra LLM shape, e.g. tiny:hidden=64,layers=2,heads=4,kv_heads=2,ffn=128")
    ap.add_argument("--whisper-weights", choices=("random", "none"), default="random",
                    help="random: full random F16 weights (default); none: the header alone, NAME-weightless.bin, "
                         "whose never-written weights make decoding 10-25 %% faster than real weights")
    ap.add_argument("--list", action="store_true", help="list the built-in shapes and exit")
    ap.add_argument("names", nargs="*", help="shapes to build (default: all built-in ones)")
    args = ap.parse_args()

    custom = dict(parse_custom(spec) for spec in args.llm)
    if args.list:
        for name, p in LLM_SHAPES.items():
            print(f"{name}\tllm\t{n_params(dict(LLM_DEFAULTS, **p)) / 1e6:.1f}M params\t{json.dumps(p, sort_keys=True)}")
        for name, s in WHISPER_SHAPES.items():
            print(f"{name}\twhisper\t{json.dumps(s, sort_keys=True)}")
        return 0
    names = args.names or (list(custom) if custom else list(LLM_SHAPES) + list(WHISPER_SHAPES))
    for name in names:
        if name not in LLM_SHAPES and name not in WHISPER_SHAPES and name not in custom:
            raise SystemExit(f"shape-models: unknown shape {name!r} (see --list, or define it with --llm)")
    for name in custom:
        if name in LLM_SHAPES or name in WHISPER_SHAPES:
            raise SystemExit(f"shape-models: --llm {name}: that name is built in")

    cache = Cache(args.dir)
    tools = None
    with open(os.path.join(cache.root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cache.remove_leftovers()
        for name in names:
            if name in WHISPER_SHAPES:
                path, digest, status = build_whisper(cache, name, WHISPER_SHAPES[name], args.shared, args.whisper_weights)
            else:
                if tools is None:
                    import gguf.constants  # noqa: F401 (fails early when the module is missing)
                    import numpy as np

                    tools = {"llama.cpp-tools": package_version("llama.cpp-tools"), "python3-gguf": package_version("python3-gguf"),
                             "numpy": np.__version__}
                p = custom.get(name) or dict(LLM_DEFAULTS, **LLM_SHAPES[name])
                path, digest, status = build_llm(cache, name, p, args.shared, args.threads, tools)
            print(f"{name}\t{path}\t{digest}\t{status}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, RuntimeError, OSError) as e:
        print(f"shape-models: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("shape-models: stopped", file=sys.stderr)
        sys.exit(130)
