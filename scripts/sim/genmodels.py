#!/usr/bin/python3
"""Generate IndexTTS2-like model files: a checkpoints/ dir and the model hub's repos.

Real torch.save checkpoints and real safetensors files filled with fixed-seed
random weights, each big file scaled from its real size by one factor. Output:

  OUT/checkpoints/          what `hf download IndexTeam/IndexTTS-2` gives a user
  OUT/hub/ORG/REPO/FILE     the files hub.py serves (IndexTeam/IndexTTS-2 holds
                            hard links to checkpoints/, not copies)
  OUT/hub/manifest.json     per repo: commit id; per file: size, sha256, git sha1
  OUT/stamp.json            generator version + scale; same stamp = nothing to do
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import yaml

import stformat

# Bump when the generated content changes, so old trees are regenerated.
VERSION = 1

# Real sizes (bytes) of the big files, from INDEXTTS2.md.
REAL_SIZES = {
    "qwen": 1_200_000_000, "gpt": 3_500_000_000, "w2v": 2_300_000_000,
    "maskgct": 177_000_000, "s2mel": 1_200_000_000, "campplus": 28_000_000,
    "bigvgan": 450_000_000,
}
# small: a few MB (tests); demo: ~270 MB; bench: ~530 MB.
PRESETS = {"small": 0.0005, "demo": 0.03, "bench": 0.06}
# Model width: rows of DIM float32 (1 KiB each). The text embedding has VOCAB rows.
DIM = 256
VOCAB = 12000
EMB_DIM = 32
MIN_BYTES = 64 * 1024

# Files stored with git LFS on the real hub (their ETag is the sha256).
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".model")


def rows(seed, nbytes, dtype=np.float32, dim=DIM):
    """Fixed-seed random matrix of about nbytes, scaled like initialised weights."""
    itemsize = np.dtype(dtype).itemsize
    n = max(1, nbytes // (itemsize * dim))
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, dim), dtype=np.float32) * 0.02).astype(dtype, copy=False)


def layers(seed, prefix, nbytes, count, dtype=np.float32):
    """A state dict of `count` equal layers named prefix.{i}.weight."""
    # At least 4 rows per layer: webui.py takes an EMB_DIM x EMB_DIM block from each.
    each = max(nbytes // count, 4 * DIM * np.dtype(dtype).itemsize)
    return {f"{prefix}.{i}.weight": rows(seed * 1000 + i, each, dtype)
            for i in range(count)}


def torch_state(arrays):
    import torch
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def save_pt(path, obj):
    import torch
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path)


def write_text(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def config_yaml():
    # The keys IndexTTS2's infer_v2.py reads from checkpoints/config.yaml.
    return {
        "version": "2.0",
        "dataset": {"bpe_model": "bpe.model", "sample_rate": 24000, "squeeze": False,
                    "mel": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256,
                            "win_length": 1024, "n_mels": 100, "mel_fmin": 0, "normalize": False}},
        "gpt": {"model_dim": DIM, "max_mel_tokens": 1815, "max_text_tokens": 600, "heads": 20,
                "use_mel_codes_as_input": True, "mel_length_compression": 1024, "layers": 24,
                "number_text_tokens": VOCAB, "number_mel_codes": 8194, "start_mel_token": 8192,
                "stop_mel_token": 8193, "start_text_token": 0, "stop_text_token": 1,
                "train_solo_embeddings": False, "condition_type": "conformer_perceiver",
                "condition_module": {"output_size": 512, "linear_units": 2048, "attention_heads": 8,
                                     "num_blocks": 6, "input_layer": "conv2d2",
                                     "perceiver_mult": 2},
                "emo_condition_module": {"output_size": 512, "linear_units": 1024,
                                         "attention_heads": 4, "num_blocks": 4,
                                         "input_layer": "conv2d2", "perceiver_mult": 2}},
        "semantic_codec": {"codebook_size": 8192, "hidden_size": 1024, "codebook_dim": 8,
                           "vocos_dim": 384, "vocos_intermediate_dim": 2048, "vocos_num_layers": 12},
        "s2mel": {"preprocess_params": {"sr": 22050, "spect_params": {
            "n_fft": 1024, "win_length": 1024, "hop_length": 256, "n_mels": 80,
            "fmin": 0, "fmax": "None"}},
            "dit_type": "DiT", "reg_loss_type": "l1",
            "style_encoder": {"dim": 192, "campplus_path": "campplus_cn_common.bin"},
            "length_regulator": {"channels": 512, "is_discrete": False, "in_channels": 1024,
                                 "content_codebook_size": 2048, "sampling_ratios": [1, 1, 1, 1],
                                 "vector_quantize": False, "n_codebooks": 1,
                                 "quantizer_dropout": 0.0, "f0_condition": False, "n_f0_bins": 512},
            "DiT": {"hidden_dim": 512, "num_heads": 8, "depth": 13, "class_dropout_prob": 0.1,
                    "block_size": 8192, "in_channels": 80, "style_condition": True,
                    "final_layer_type": "wavenet", "target": "mel", "content_dim": 512,
                    "content_codebook_size": 1024, "content_type": "discrete",
                    "f0_condition": False, "n_f0_bins": 512, "content_codebooks": 1,
                    "is_causal": False, "long_skip_connection": True, "zero_prompt_speech_token": False,
                    "time_as_token": False, "style_as_token": False, "uvit_skip_connection": True,
                    "add_resblock_in_transformer": False},
            "wavenet": {"hidden_dim": 512, "num_layers": 8, "kernel_size": 5, "dilation_rate": 1,
                        "p_dropout": 0.2, "style_condition": True}},
        "gpt_checkpoint": "gpt.pth",
        "w2v_stat": "wav2vec2bert_stats.pt",
        "s2mel_checkpoint": "s2mel.pth",
        "emo_matrix": "feat2.pt",
        "spk_matrix": "feat1.pt",
        "emo_num": [3, 17, 2, 8, 4, 5, 10, 24],
        "qwen_emo_path": "qwen0.6bemo4-merge",
        "vocoder": {"type": "bigvgan", "name": "nvidia/bigvgan_v2_22khz_80band_256x"},
    }


def gen_checkpoints(ck, scale):
    """The files of IndexTeam/IndexTTS-2, laid out as in a user's checkpoints/."""
    import torch

    def size(key):
        return max(MIN_BYTES, int(REAL_SIZES[key] * scale))

    write_text(os.path.join(ck, "config.yaml"), yaml.safe_dump(config_yaml(), sort_keys=False))
    # bpe.model: a real SentencePiece model is a protobuf; the stand-in keeps the
    # vocabulary as "piece<TAB>score" lines (~476 KB like the real one).
    rng = np.random.default_rng(7)
    pieces = [f"\u2581p{i:05d}{chr(0x4e00 + int(c))}\t{-i / 1000:.4f}"
              for i, c in enumerate(rng.integers(0, 20000, VOCAB))]
    text = "\n".join(pieces) + "\n"
    write_text(os.path.join(ck, "bpe.model"), text + "#" * max(0, 476_000 - len(text.encode())) + "\n")

    # The text embedding has VOCAB rows whatever the scale; it is kept narrow
    # (EMB_DIM) so that the small preset stays small.
    emb = rows(11, VOCAB * EMB_DIM * 4, dim=EMB_DIM)
    gpt = {"text_embedding.weight": emb}
    gpt.update(layers(12, "gpt.h", max(MIN_BYTES, size("gpt") - emb.nbytes), 24))
    save_pt(os.path.join(ck, "gpt.pth"), torch_state(gpt))

    s2 = size("s2mel")
    save_pt(os.path.join(ck, "s2mel.pth"), {"net": {
        "cfm": torch_state(layers(21, "estimator.transformer.layers", s2 * 7 // 10, 13)),
        "length_regulator": torch_state(layers(22, "model", s2 * 2 // 10, 4)),
        "gpt_layer": torch_state(layers(23, "gpt_layer", s2 // 10, 3)),
    }})
    save_pt(os.path.join(ck, "wav2vec2bert_stats.pt"),
            {"mean": torch.from_numpy(rows(31, 4096, dim=1024)[0]),
             "var": torch.from_numpy(np.abs(rows(32, 4096, dim=1024)[0]) + 1.0)})
    save_pt(os.path.join(ck, "feat1.pt"), torch.from_numpy(rows(41, 57_000, dim=192)))
    save_pt(os.path.join(ck, "feat2.pt"), torch.from_numpy(rows(42, 375_000, dim=1280)))

    qwen = os.path.join(ck, "qwen0.6bemo4-merge")
    os.makedirs(qwen, exist_ok=True)
    stformat.write(os.path.join(qwen, "model.safetensors"),
                   layers(51, "model.layers", size("qwen"), 28, np.float16), {"format": "pt"})
    write_text(os.path.join(qwen, "config.json"), json.dumps(
        {"architectures": ["Qwen3ForCausalLM"], "hidden_size": DIM, "num_hidden_layers": 28,
         "torch_dtype": "float16", "vocab_size": 20000}, indent=2))
    vocab = {f"tok{i}": i for i in range(20000)}
    write_text(os.path.join(qwen, "tokenizer.json"), json.dumps(
        {"version": "1.0", "model": {"type": "BPE", "vocab": vocab, "merges": []}}))


def gen_hub_repos(hub, scale):
    """The files IndexTTS2 downloads at run time, per repository."""
    def size(key):
        return max(MIN_BYTES, int(REAL_SIZES[key] * scale))

    w2v = os.path.join(hub, "facebook", "w2v-bert-2.0")
    os.makedirs(w2v, exist_ok=True)
    write_text(os.path.join(w2v, "config.json"), json.dumps(
        {"architectures": ["Wav2Vec2BertModel"], "hidden_size": DIM, "num_hidden_layers": 24,
         "model_type": "wav2vec2-bert", "torch_dtype": "float32"}, indent=2))
    stformat.write(os.path.join(w2v, "model.safetensors"),
                   layers(61, "encoder.layers", size("w2v"), 24), {"format": "pt"})

    mg = os.path.join(hub, "amphion", "MaskGCT", "semantic_codec")
    os.makedirs(mg, exist_ok=True)
    stformat.write(os.path.join(mg, "model.safetensors"),
                   layers(71, "quantizer.layers", size("maskgct"), 8), {"format": "pt"})

    save_pt(os.path.join(hub, "funasr", "campplus", "campplus_cn_common.bin"),
            torch_state(layers(81, "xvector.block", size("campplus"), 6)))

    bv = os.path.join(hub, "nvidia", "bigvgan_v2_22khz_80band_256x")
    write_text(os.path.join(bv, "config.json"), json.dumps(
        {"resblock": "1", "num_mels": 80, "upsample_rates": [4, 4, 2, 2, 2, 2],
         "upsample_kernel_sizes": [8, 8, 4, 4, 4, 4], "upsample_initial_channel": 1536,
         "sampling_rate": 22050, "hop_size": 256, "use_cuda_kernel": False}, indent=2))
    save_pt(os.path.join(bv, "bigvgan_generator.pt"),
            {"generator": torch_state(layers(91, "ups", size("bigvgan"), 6))})


def file_hashes(path):
    sha256 = hashlib.sha256()
    size = os.path.getsize(path)
    # Git's blob id: what the hub sends as ETag for files not stored in LFS.
    sha1 = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha256.update(chunk)
            sha1.update(chunk)
    return size, sha256.hexdigest(), sha1.hexdigest()


def write_manifest(hub):
    repos = {}
    for org in sorted(os.listdir(hub)):
        if not os.path.isdir(os.path.join(hub, org)):
            continue
        for name in sorted(os.listdir(os.path.join(hub, org))):
            top = os.path.join(hub, org, name)
            files = {}
            for d, _, fs in os.walk(top):
                for fn in fs:
                    p = os.path.join(d, fn)
                    rel = os.path.relpath(p, top)
                    size, sha256, sha1 = file_hashes(p)
                    files[rel] = {"size": size, "sha256": sha256, "git_sha1": sha1,
                                  "lfs": rel.endswith(LFS_SUFFIXES)}
            # A stable 40-hex commit id derived from the content, like a git commit.
            commit = hashlib.sha1(json.dumps(files, sort_keys=True).encode()).hexdigest()
            repos[f"{org}/{name}"] = {"commit": commit, "files": dict(sorted(files.items()))}
    with open(os.path.join(hub, "manifest.json"), "w") as f:
        json.dump({"repos": repos}, f, indent=1)


def generate(out, scale):
    stamp_path = os.path.join(out, "stamp.json")
    stamp = {"version": VERSION, "scale": scale}
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp:
                return False
    except (OSError, ValueError):
        pass
    # Remove the stamp first: an interrupted run must not look complete.
    if os.path.exists(stamp_path):
        os.unlink(stamp_path)
    ck, hub = os.path.join(out, "checkpoints"), os.path.join(out, "hub")
    for d in (ck, hub):
        shutil.rmtree(d, ignore_errors=True)
    gen_checkpoints(ck, scale)
    gen_hub_repos(hub, scale)
    # IndexTeam/IndexTTS-2 on the hub = the checkpoints (hard links save the space).
    repo = os.path.join(hub, "IndexTeam", "IndexTTS-2")
    for d, _, fs in os.walk(ck):
        for fn in fs:
            dst = os.path.join(repo, os.path.relpath(os.path.join(d, fn), ck))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.link(os.path.join(d, fn), dst)
    write_manifest(hub)
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(PRESETS), default="small",
                    help="preset scale: small (a few MB), demo (~270 MB), bench (~530 MB)")
    ap.add_argument("--scale", type=float,
                    help="fraction of the real sizes (overrides --size), e.g. 0.01")
    ap.add_argument("--out", help="output directory (default: build/sim/SIZE)")
    args = ap.parse_args()
    scale = args.scale if args.scale is not None else PRESETS[args.size]
    if not 0 < scale <= 1:
        ap.error("--scale must be in (0, 1]")
    out = args.out or os.path.join("build", "sim", args.size if args.scale is None else f"scale-{scale}")
    os.makedirs(out, exist_ok=True)
    if generate(out, scale):
        total = sum(os.path.getsize(os.path.join(d, f))
                    for d, _, fs in os.walk(os.path.join(out, "checkpoints")) for f in fs)
        print(f"genmodels: wrote {out} (scale {scale}, checkpoints {total / 1e6:.1f} MB)")
    else:
        print(f"genmodels: {out} is up to date (scale {scale})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
